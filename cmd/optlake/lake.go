package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/optlake/optlake/internal/redact"
	"github.com/optlake/optlake/internal/secret"
	"github.com/optlake/optlake/internal/settings"
	"github.com/optlake/optlake/lake"
	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/lake/tableformat"
	"github.com/optlake/optlake/pipeline/infer"
	"github.com/optlake/optlake/schema"
)

// convertCrashEnv names the test-only crash hook of `lake convert`: the
// process kills itself (SIGKILL) right after registering the named table.
// Not documented for users.
const convertCrashEnv = "OPTLAKE_TEST_CONVERT_CRASH_AT"

func lakeCommand(h host) *cli.Command {
	return &cli.Command{
		Name:  "lake",
		Usage: "manage the lake's table format",
		Subcommands: []*cli.Command{{
			Name:  "convert",
			Usage: "register an existing Parquet lake's files in place (not rewritten) as Iceberg tables, then record the lake's format as iceberg; safe to run again",
			Flags: append([]cli.Flag{
				&cli.StringFlag{Name: "to", Usage: "the table format to convert to: iceberg", EnvVars: envs("convert-to")},
				&cli.StringFlag{Name: "data-dir", Value: "./data", Usage: "the data directory whose lake is converted", EnvVars: envs("data-dir")},
				&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn, error", EnvVars: envs("log-level")},
			}, catalogFlags(settings.Convert)...),
			Action: func(c *cli.Context) error { return convertAction(c, h) },
		}},
	}
}

func convertAction(c *cli.Context, h host) error {
	to, err := lake.ParseFormat(c.String("to"))
	if err != nil {
		return usageError{err}
	}
	if to != lake.Iceberg {
		return usagef("--to %q: only iceberg (a Parquet lake's files registered as Iceberg tables)", c.String("to"))
	}
	st, err := openStore(c.Context, c.String("data-dir"), true)
	if err != nil {
		return err
	}
	defer st.Close()
	log, err := newLogger(c.App.ErrWriter, "text", c.String("log-level"), redact.New(catalogSecrets(c)...))
	if err != nil {
		return err
	}
	cat, err := icebergCatalog(c)
	if err != nil {
		return err
	}
	lease, err := lockStore(c.Context, st, 0, log)
	if err != nil {
		return err
	}
	defer lease.Release(context.WithoutCancel(c.Context))
	lk, err := openLake(c.Context, st, "", false, lakeOptions(log, h, cat))
	if err != nil {
		return err
	}
	defer lk.Close()
	reg, err := infer.LoadRegistryFrom(c.Context, st)
	if err != nil {
		return err
	}
	fixed := map[string]*schema.Table{}
	for _, t := range schema.Tables() {
		fixed[t.Name] = t
	}
	opt := lake.ConvertOptions{
		Schema: func(name string) *schema.Table {
			if t, ok := fixed[name]; ok {
				return t
			}
			return reg.Table(name)
		},
		Log:     log,
		Catalog: cat,
	}
	if at := os.Getenv(convertCrashEnv); at != "" {
		opt.Crash = func(table string) error {
			if table == at {
				killSelf()
			}
			return nil
		}
	}
	res, err := lake.Convert(c.Context, st, lk, opt)
	if res.Already {
		// Only tables whose metadata names another location are
		// registered again (a copied or moved lake).
		for _, t := range res.Tables {
			if t.Cataloged {
				fmt.Fprintf(c.App.Writer, "%-28s registered in the catalog\n", t.Table)
				continue
			}
			fmt.Fprintf(c.App.Writer, "%-28s registered at %s (earlier snapshots dropped)\n", t.Table, st)
		}
		if err == nil && len(res.Tables) == 0 {
			fmt.Fprintf(c.App.Writer, "the lake in %s is Iceberg already: nothing to convert\n", st)
		}
		return err
	}
	for _, t := range res.Tables {
		fmt.Fprintf(c.App.Writer, "%-28s %6d files  +%d -%d", t.Table, t.Files, t.Added, t.Removed)
		if t.SnapshotID != 0 {
			fmt.Fprintf(c.App.Writer, "  snapshot %d", t.SnapshotID)
		}
		fmt.Fprintln(c.App.Writer)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "the lake in %s is Iceberg: %d tables\n", st, len(res.Tables))
	return nil
}

// lakeOptions are what a command builds the lake's table format with:
// its logger and clock, the test-only crash hooks, the heap's limit the
// format's work may lower, and the Iceberg catalog cat (icebergCatalog;
// other formats ignore it).
func lakeOptions(log *slog.Logger, h host, cat iceberg.CatalogConfig) lake.Options {
	return lake.Options{Options: tableformat.Options{
		Log: log, Now: h.now, Crash: crashHook(), CommitCrash: commitCrash(), LowerMemoryLimit: h.lowerMemoryLimit,
	}, Iceberg: formatOptions(cat)}
}

// formatOptions are the Iceberg format's options of the catalog cat
// (lake.Options.Iceberg).
func formatOptions(cat iceberg.CatalogConfig) []iceberg.Option {
	return []iceberg.Option{iceberg.WithCatalog(cat)}
}

// icebergCatalog is an Iceberg lake's catalog as the --iceberg-catalog
// settings of a command that reads no job name it (the URI's reference,
// ${VAR} or @file, resolved). Its errors never show the URI's password.
func icebergCatalog(c *cli.Context) (iceberg.CatalogConfig, error) {
	uri, err := secret.Resolve(c.String("iceberg-catalog-uri"))
	if err != nil {
		return iceberg.CatalogConfig{}, usagef("--iceberg-catalog-uri: %v", redact.New(c.String("iceberg-catalog-uri")).Err(err))
	}
	var rest icebergREST
	if err := settings.Decode(c, &rest); err != nil {
		return iceberg.CatalogConfig{}, err
	}
	for _, s := range []*string{&rest.Token, &rest.Credential} {
		if *s, err = secret.Resolve(*s); err != nil {
			return iceberg.CatalogConfig{}, usagef("--iceberg-catalog-token/--iceberg-catalog-credential: %v", err)
		}
	}
	cat := iceberg.CatalogConfig{Kind: c.String("iceberg-catalog"), URI: uri, Name: c.String("iceberg-catalog-name"),
		Namespace: c.String("iceberg-namespace"), Prefix: c.String("iceberg-table-prefix"), REST: rest.config()}
	return cat, checkCatalogKind(cat.Kind)
}

// icebergREST are the --iceberg-catalog rest settings.
type icebergREST struct {
	Warehouse    string `setting:"iceberg-catalog-warehouse"`
	Token        string `setting:"iceberg-catalog-token"`
	Credential   string `setting:"iceberg-catalog-credential"`
	OAuth2URI    string `setting:"iceberg-catalog-oauth2-uri"`
	Scope        string `setting:"iceberg-catalog-scope"`
	SigV4Region  string `setting:"iceberg-catalog-sigv4-region"`
	SigV4Service string `setting:"iceberg-catalog-sigv4-service"`
}

func (r icebergREST) config() iceberg.RESTConfig {
	return iceberg.RESTConfig{Warehouse: r.Warehouse, Token: r.Token, Credential: r.Credential, OAuth2URI: r.OAuth2URI,
		Scope: r.Scope, SigV4Region: r.SigV4Region, SigV4Service: r.SigV4Service}
}

// catalogFlags are the flags of an Iceberg catalog's settings that command
// takes (lake convert, status: commands whose other flags are their own).
func catalogFlags(command string) []cli.Flag {
	var out []cli.Flag
	for _, s := range settings.For(command) {
		if strings.HasPrefix(s.Name, "iceberg-catalog") || s.Name == "iceberg-namespace" || s.Name == "iceberg-table-prefix" {
			out = append(out, s.Flag())
		}
	}
	return out
}

// checkCatalogKind refuses an --iceberg-catalog other than none, sql or rest
// (exit 2).
func checkCatalogKind(kind string) error {
	if _, err := iceberg.ParseCatalogKind(kind); err != nil {
		return usageError{err}
	}
	return nil
}

// catalogSecrets are the secrets of the Iceberg catalog's settings
// (--iceberg-catalog-uri, -token, -credential) of a command that reads no
// job, for its log's redactor.
func catalogSecrets(c *cli.Context) []string {
	var out []string
	if uri, err := secret.Resolve(c.String("iceberg-catalog-uri")); err == nil {
		out = redact.URISecrets(uri)
	}
	for _, name := range []string{"iceberg-catalog-token", "iceberg-catalog-credential"} {
		if v, err := secret.Resolve(c.String(name)); err == nil && v != "" {
			out = append(out, iceberg.RESTConfig{Token: v}.Secrets()...)
			if name == "iceberg-catalog-credential" {
				out = append(out, iceberg.RESTConfig{Credential: v}.Secrets()...)
			}
		}
	}
	return out
}

// icebergCatalog is the run's or replay's Iceberg catalog.
func (j *job) icebergCatalog() iceberg.CatalogConfig {
	return iceberg.CatalogConfig{Kind: j.IcebergCatalog, URI: j.IcebergCatalogURI, Name: j.IcebergCatalogAs,
		Namespace: j.IcebergNamespace, Prefix: j.IcebergPrefix, REST: j.restConfig()}
}

// restConfig is the run's or replay's --iceberg-catalog rest settings.
func (j *job) restConfig() iceberg.RESTConfig {
	return icebergREST{j.IcebergWarehouse, j.IcebergToken, j.IcebergCredential, j.IcebergOAuth2URI, j.IcebergScope,
		j.IcebergSigV4Region, j.IcebergSigV4Service}.config()
}
