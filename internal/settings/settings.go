// Package settings is the one list of optlake's settings. From it derive
// the command-line flags (urfave/cli), the OPTLAKE_* environment variables,
// the keys of the --config YAML file and the effective configuration that
// `optlake config check` prints. Adding a setting is one entry in list (and,
// to consume it, one tagged field in the command's configuration struct; see
// Decode).
package settings

import (
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/optlake/optlake/schema"
)

// Kind is how a setting takes its value.
type Kind int

const (
	String   Kind = iota
	List          // repeatable flag; a YAML list in the config file
	Bool          // no value on the command line
	Int           // Go int
	Int64         // Go int64
	Duration      // time.Duration ("5m")
	Float         // Go float64
)

func (k Kind) String() string {
	return [...]string{"string", "list", "bool", "int", "int64", "duration", "float"}[k]
}

// Command names a command that takes settings of the list.
const (
	Run     = "run" // also `config check`, which validates what run would do
	Replay  = "replay"
	Demo    = "demo"
	Migrate = "migrate"
	Status  = "status"
	Schema  = "schema"
	History = "history"
	Compact = "compact"
	Convert = "lake convert"
)

// DefaultMaxRejectShare is --max-reject-share: a listing or an account
// endpoint's body whose rejects are more than a tenth of its rows fails
// (pipeline.Config's default too).
const DefaultMaxRejectShare = 0.1

// DefaultColumnBudget is --column-budget, the most columns of an account
// table (infer.Policy's default too).
const DefaultColumnBudget = 1000

// DefaultBatchRows is the rows per Arrow record batch (--batch-rows).
const DefaultBatchRows = schema.DefaultBatchRows

// Setting is one setting: a flag --Name, the variable Env(), and (unless
// NotInFile) the key Name of the config file.
type Setting struct {
	Name    string
	Kind    Kind
	Default any // string, []string, bool, int, int64 or time.Duration by Kind; nil is the zero value
	Usage   string
	// Secret: the value holds credentials. config check shows it redacted;
	// a flag value may be a reference (${VAR}, @file, see internal/secret).
	Secret bool
	// NotInFile: not a key of the config file (--config itself).
	NotInFile bool
	// Shown is the key under which config check prints the setting, when
	// not Name; "-" when a structured key shows it (headers, accounts).
	Shown string
	// Commands that take the setting (Run includes `config check`).
	Commands []string
	// Per command: another usage text or default.
	Overrides map[string]Override
}

// Override changes a setting for one command.
type Override struct {
	Usage   string
	Default any
}

// Env is the environment variable that sets s: OPTLAKE_ and the name in
// upper case with "_" for "-".
func (s Setting) Env() string { return EnvName(s.Name) }

// EnvName is the OPTLAKE_* variable of a setting name.
func EnvName(name string) string {
	return "OPTLAKE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Takes reports whether command takes s.
func (s Setting) Takes(command string) bool {
	for _, c := range s.Commands {
		if c == command {
			return true
		}
	}
	return false
}

var (
	runOnly    = []string{Run}
	runReplay  = []string{Run, Replay}
	runCompact = []string{Run, Compact}
	dataDirs   = []string{Run, Replay, Demo, Status, Schema, History, Compact}
	logs       = []string{Run, Replay, Demo, Migrate, Compact}
	icebergs   = []string{Run, Replay, Status, History, Compact, Convert}
)

// list is every setting, in the order `--help` and config check show them.
var list = []Setting{
	{Name: "config", Kind: String, NotInFile: true, Usage: "YAML file with any of these flags as keys", Commands: runOnly},
	{Name: "api-url", Kind: String, Usage: "venue base URL, e.g. https://api.venue.example", Commands: runOnly},
	{Name: "header", Kind: List, Secret: true, Shown: "-", Usage: "`'Name: value'` sent with every request (repeatable; values are secrets, never logged; a value may be ${ENV} or @file)", Commands: runOnly},
	{Name: "param", Kind: List, Shown: "params", Usage: "`endpoint.key=value` query parameter (repeatable; a comma list fans out into one request per value)", Commands: runOnly},
	{Name: "endpoints", Kind: List, Usage: "endpoints to snapshot (default: every endpoint that needs no parameter)", Commands: runReplay,
		Overrides: map[string]Override{Replay: {Usage: "endpoints to replay (default: instruments)"}}},
	{Name: "account", Kind: List, Shown: "-", Usage: "account `LABEL` snapshotted by the account endpoints (repeatable; default one account, \"default\")", Commands: runOnly},
	{Name: "account-header", Kind: List, Secret: true, Shown: "-", Usage: "`'label:Name: value'` header of one account (repeatable; value may be ${ENV} or @file)", Commands: runOnly},
	{Name: "schema-contract", Kind: String, Default: "evolve", Usage: "account tables: evolve (new fields become columns), freeze (new fields fail the endpoint) or discard-columns", Commands: runOnly},
	{Name: "table-format", Kind: String, Usage: "the lake's table format: parquet (hive folders of files) or iceberg (the same files as Iceberg v2 tables); chosen at the lake's first run and kept (default: the lake's, parquet for a new lake)", Commands: runReplay},
	{Name: "sink", Kind: List, Default: []string{"parquet"}, Usage: "parquet and/or clickhouse (repeatable)", Commands: runReplay},
	{Name: "data-dir", Kind: String, Default: "./data", Usage: "Parquet lake and raw archive", Commands: dataDirs,
		Overrides: map[string]Override{
			Replay:  {Usage: "the data directory whose raw/ archive is replayed"},
			Demo:    {Usage: "where the lake goes"},
			Status:  {Usage: "the data directory whose ledger is read"},
			Schema:  {Usage: "the data directory (inferred schemas live in DIR/_schema)"},
			Compact: {Usage: "the data directory whose lake is compacted"},
			History: {Usage: "read the Parquet lake in this directory"},
		}},
	{Name: "clickhouse-dsn", Kind: String, Secret: true, Usage: "clickhouse://user:pass@host:9000/db (may be ${ENV} or @file)", Commands: []string{Run, Replay, Migrate, History},
		Overrides: map[string]Override{
			Migrate: {Usage: "clickhouse://user:pass@host:9000/db (required unless --print)"},
			History: {Usage: "read from ClickHouse instead of the lake"},
		}},
	{Name: "cluster", Kind: String, Usage: "ClickHouse cluster `NAME`: Replicated tables per shard behind Distributed ones (see docs/sql-and-clickhouse.md)", Commands: []string{Run, Replay, Migrate},
		Overrides: map[string]Override{Migrate: {Usage: "create Replicated + Distributed tables ON CLUSTER `NAME`"}}},
	{Name: "migrate", Kind: Bool, Usage: "apply pending ClickHouse migrations before loading (otherwise an out-of-date schema is an error)", Commands: runReplay},
	{Name: "clickhouse-max-attempts", Kind: Int, Default: 4, Usage: "attempts per ClickHouse connect or insert on a transient error (server down, network), 0.5s, 1s, 2s… apart; a load that gives up stays pending for the next run's catch-up (1 = no retry)", Commands: runReplay},
	{Name: "source", Kind: String, Usage: "venue name stored in every row (default: the API URL's host)", Commands: runOnly},
	{Name: "timestamp-unit", Kind: String, Default: "auto", Usage: "unit of creation/expiration timestamps: auto, s, ms, us, ns", Commands: runReplay},
	{Name: "timeout", Kind: Duration, Default: 60 * time.Second, Usage: "per request: wait for headers and for each chunk of the body", Commands: runOnly},
	{Name: "deadline", Kind: Duration, Default: 30 * time.Minute, Usage: "overall limit of one snapshot (0 = none)", Commands: runOnly},
	{Name: "ca-file", Kind: String, Usage: "PEM certificates to trust besides the system roots (a venue behind a private CA)", Commands: runOnly},
	{Name: "insecure-skip-verify", Kind: Bool, Usage: "turn TLS certificate verification off (tests only; logged loudly)", Commands: runOnly},
	{Name: "max-attempts", Kind: Int, Default: 5, Usage: "attempts per request (network errors, 429, 5xx)", Commands: runOnly},
	{Name: "max-body-size", Kind: Int64, Default: int64(4 << 30), Usage: "largest response body accepted, bytes", Commands: runOnly},
	{Name: "rate-limit", Kind: String, Usage: "at most `N/s` requests (or N/m, N/h) for the whole run: every endpoint, account, parameter and retry (default unlimited)", Commands: runOnly},
	{Name: "rate-burst", Kind: Int, Default: 1, Usage: "with --rate-limit: requests allowed at once before the rate applies", Commands: runOnly},
	{Name: "column-budget", Kind: Int, Default: DefaultColumnBudget, Usage: "account tables: most columns per table (meta columns included); further fields go to the JSON column extra", Commands: runReplay},
	{Name: "batch-rows", Kind: Int, Default: DefaultBatchRows, Usage: "rows per Arrow record batch", Commands: runReplay},
	{Name: "max-reject-share", Kind: Float, Default: DefaultMaxRejectShare, Usage: "a listing or account body whose rejected rows are more than this share of its rows fails its endpoint, loading none of it (exit 3, the reason most rows gave); one whose every row is rejected always fails (1 = only then)", Commands: runReplay},
	{Name: "summary-json", Kind: String, Usage: "write the run summary as JSON to this file", Commands: runReplay,
		Overrides: map[string]Override{Replay: {Usage: "write the replay summary as JSON"}}},
	{Name: "every", Kind: Duration, Usage: "stay up and snapshot on this interval, aligned to the clock (e.g. 5m)", Commands: runOnly},
	{Name: "jitter", Kind: Duration, Usage: "with --every: wait a random extra delay up to this long before each snapshot (spreads many jobs)", Commands: runOnly},
	{Name: "cpuprofile", Kind: String, Usage: "write a CPU profile to this file (go tool pprof)", Commands: runReplay},
	{Name: "memprofile", Kind: String, Usage: "write a heap profile at the end to this file", Commands: runReplay},
	{Name: "metrics-file", Kind: String, Usage: "after each run, write Prometheus metrics to this file (node_exporter textfile collector); counters carry on across runs", Commands: runOnly},
	{Name: "listen", Kind: String, Usage: "with --every: serve /metrics and /healthz on this `ADDR` (e.g. :9464)", Commands: runOnly},
	{Name: "lease-ttl", Kind: Duration, Default: 60 * time.Second, Usage: "a data directory on a bucket: one process writes it, holding a lease renewed every third of this; a holder killed with -9 keeps others out this long", Commands: []string{Run, Replay, Demo}},
	{Name: "catch-up-budget", Kind: Duration, Default: time.Minute, Usage: "before each snapshot, load what a sink missed (load ledger) for at most this long; the rest waits for the next run (0 = no limit; with --every at most half the interval)", Commands: runOnly},
	{Name: "catch-up-max", Kind: Int, Default: 100, Usage: "load at most this many missed snapshots per run (0 = no limit)", Commands: runOnly},
	{Name: "compact", Kind: Bool, Usage: "after each snapshot, compact the Parquet lake's closed days (as optlake compact), starting none after 10 minutes (with --every half the interval)", Commands: runOnly},
	{Name: "raw-retention", Kind: Duration, Usage: "after each snapshot, once a day, delete the raw archive's and the load ledger's done records' days older than this, but none a pending load needs (0 = keep everything; a replay then rebuilds only the days kept)", Commands: runOnly},
	{Name: "iceberg-keep-snapshots", Kind: Duration, Default: 7 * 24 * time.Hour, Usage: "an Iceberg lake: compaction expires table snapshots older than this (time travel reaches this far back; the current snapshot always stays)", Commands: runCompact},
	{Name: "iceberg-catalog", Kind: String, Default: "none", Usage: "an Iceberg lake: where its tables are registered: none (the current metadata is the newest vN.metadata.json in each table's folder; no server), sql (a JDBC-compatible SQL catalog, the iceberg_tables of Iceberg's JdbcCatalog and pyiceberg's SqlCatalog, on PostgreSQL or SQLite: --iceberg-catalog-uri) or rest (an Iceberg REST catalog server: Polaris, Lakekeeper, Nessie, Gravitino, Unity, Glue's or S3 Tables' REST endpoint; --iceberg-catalog-uri http(s)://…); commits go through the catalog's atomic swap, and a table it lacks is registered at the lake's current version; a lake whose tables are registered records its catalog (.optlake.iceberg-catalog) and every command without it fails", Commands: icebergs},
	{Name: "iceberg-catalog-uri", Kind: String, Secret: true, Usage: "--iceberg-catalog sql: postgres://user:pass@host:5432/db or sqlite:PATH; rest: the catalog's base URL, http(s)://host[:port][/path] (the client adds /v1/…) (may be ${ENV} or @file)", Commands: icebergs},
	{Name: "iceberg-catalog-name", Kind: String, Default: "optlake", Usage: "--iceberg-catalog sql: the catalog's name (its rows' catalog_name); rest: the client's name of the catalog (in errors and the lake's binding)", Commands: icebergs},
	{Name: "iceberg-catalog-warehouse", Kind: String, Usage: "--iceberg-catalog rest: the warehouse asked of the server's /v1/config (a Polaris catalog, a Lakekeeper warehouse, an S3 Tables bucket ARN); empty: the server's default", Commands: icebergs},
	{Name: "iceberg-catalog-token", Kind: String, Secret: true, Usage: "--iceberg-catalog rest: a static bearer token sent on every request (may be ${ENV} or @file)", Commands: icebergs},
	{Name: "iceberg-catalog-credential", Kind: String, Secret: true, Usage: "--iceberg-catalog rest: OAuth2 client credentials CLIENT_ID:CLIENT_SECRET, exchanged for a token at --iceberg-catalog-oauth2-uri and refreshed as it expires (may be ${ENV} or @file)", Commands: icebergs},
	{Name: "iceberg-catalog-oauth2-uri", Kind: String, Usage: "--iceberg-catalog rest: the OAuth2 token endpoint (default: the catalog's own URI/v1/oauth/tokens)", Commands: icebergs},
	{Name: "iceberg-catalog-scope", Kind: String, Usage: "--iceberg-catalog rest: the OAuth2 scope asked for (default: catalog; Polaris wants PRINCIPAL_ROLE:ALL)", Commands: icebergs},
	{Name: "iceberg-catalog-sigv4-region", Kind: String, Usage: "--iceberg-catalog rest: sign every request with AWS SigV4 for this region, with the AWS default credentials (Glue's and S3 Tables' REST endpoints); empty: no signing", Commands: icebergs},
	{Name: "iceberg-catalog-sigv4-service", Kind: String, Default: "glue", Usage: "--iceberg-catalog rest with --iceberg-catalog-sigv4-region: the service name signed for (glue, or s3tables)", Commands: icebergs},
	{Name: "iceberg-namespace", Kind: String, Default: "optlake", Usage: "an Iceberg catalog's namespace of the lake's tables (a.b for a nested one)", Commands: icebergs},
	{Name: "iceberg-table-prefix", Kind: String, Usage: "an Iceberg catalog's table names: this prefix, then the lake's table name", Commands: icebergs},
	{Name: "iceberg-orphan-grace", Kind: Duration, Default: time.Hour, Usage: "an Iceberg lake: compaction deletes files under a table that no snapshot references once they are this old", Commands: runCompact},
	{Name: "log-format", Kind: String, Default: "text", Usage: "text or json", Commands: []string{Run, Replay, Migrate, Compact}},
	{Name: "log-level", Kind: String, Default: "info", Usage: "debug, info, warn, error", Commands: logs,
		Overrides: map[string]Override{Demo: {Default: "warn"}, Migrate: {Default: "warn"}}},
}

// All returns every setting, in order.
func All() []Setting { return append([]Setting(nil), list...) }

// For returns the settings command takes, in order, with the command's
// overrides applied.
func For(command string) []Setting {
	var out []Setting
	for _, s := range list {
		if !s.Takes(command) {
			continue
		}
		if o, ok := s.Overrides[command]; ok {
			if o.Usage != "" {
				s.Usage = o.Usage
			}
			if o.Default != nil {
				s.Default = o.Default
			}
		}
		out = append(out, s)
	}
	return out
}

// Lookup returns the setting called name.
func Lookup(name string) (Setting, bool) {
	for _, s := range list {
		if s.Name == name {
			return s, true
		}
	}
	return Setting{}, false
}

// Flags returns the urfave/cli flags of command.
func Flags(command string) []cli.Flag {
	ss := For(command)
	out := make([]cli.Flag, 0, len(ss))
	for _, s := range ss {
		out = append(out, s.Flag())
	}
	return out
}

// Flag is s as a urfave/cli flag reading s.Env().
func (s Setting) Flag() cli.Flag {
	env := []string{s.Env()}
	switch s.Kind {
	case String:
		d, _ := s.Default.(string)
		return &cli.StringFlag{Name: s.Name, Usage: s.Usage, Value: d, EnvVars: env}
	case List:
		f := &cli.StringSliceFlag{Name: s.Name, Usage: s.Usage, EnvVars: env}
		if d, _ := s.Default.([]string); len(d) > 0 {
			f.Value = cli.NewStringSlice(d...) // a fresh slice per flag: cli appends to it
		}
		return f
	case Bool:
		d, _ := s.Default.(bool)
		return &cli.BoolFlag{Name: s.Name, Usage: s.Usage, Value: d, EnvVars: env}
	case Int:
		d, _ := s.Default.(int)
		return &cli.IntFlag{Name: s.Name, Usage: s.Usage, Value: d, EnvVars: env}
	case Int64:
		d, _ := s.Default.(int64)
		return &cli.Int64Flag{Name: s.Name, Usage: s.Usage, Value: d, EnvVars: env}
	case Duration:
		d, _ := s.Default.(time.Duration)
		return &cli.DurationFlag{Name: s.Name, Usage: s.Usage, Value: d, EnvVars: env}
	case Float:
		d, _ := s.Default.(float64)
		return &cli.Float64Flag{Name: s.Name, Usage: s.Usage, Value: d, EnvVars: env}
	}
	panic(fmt.Sprintf("settings: %s has unknown kind %d", s.Name, s.Kind))
}

// Value reads s's value from a parsed command line (flag, environment, or
// what the config file set through c.Set), typed by Kind.
func (s Setting) Value(c *cli.Context) any {
	switch s.Kind {
	case List:
		return c.StringSlice(s.Name)
	case Bool:
		return c.Bool(s.Name)
	case Int:
		return c.Int(s.Name)
	case Int64:
		return c.Int64(s.Name)
	case Duration:
		return c.Duration(s.Name)
	case Float:
		return c.Float64(s.Name)
	}
	return c.String(s.Name)
}

// Flag is the flag of the setting name as command takes it.
func Flag(command, name string) cli.Flag {
	for _, s := range For(command) {
		if s.Name == name {
			return s.Flag()
		}
	}
	panic(fmt.Sprintf("settings: %s takes no setting %q", command, name))
}
