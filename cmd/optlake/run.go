package main

import (
	"github.com/urfave/cli/v2"

	"github.com/optlake/optlake/internal/secret"
	"github.com/optlake/optlake/internal/settings"
)

// jobFlags are the flags of `optlake run` (and `config check`), from the
// list in internal/settings; every flag also reads an OPTLAKE_* variable and
// a key of the same name in the --config YAML file (see config.go).
// Precedence: flag > environment > config file > default.
func jobFlags() []cli.Flag { return settings.Flags(settings.Run) }

// readJob reads the settings of the parsed command line into a job; a
// secret setting's value may be a reference (${VAR}, @file).
func readJob(c *cli.Context) (*job, error) {
	j := &job{}
	if err := settings.Decode(c, j); err != nil {
		return nil, err
	}
	for _, s := range settings.All() {
		if !s.Secret || s.Kind != settings.String {
			continue
		}
		if v, ok := settings.Get(j, s.Name); ok && v != "" {
			r, err := secret.Resolve(v.(string))
			if err != nil {
				return nil, usagef("--%s: %v", s.Name, err)
			}
			settings.Set(j, s.Name, r)
		}
	}
	return j, nil
}

// dsnSetting is --clickhouse-dsn of a command that reads no job (migrate,
// history), its reference (${VAR}, @file) resolved.
func dsnSetting(c *cli.Context) (string, error) {
	dsn, err := secret.Resolve(c.String("clickhouse-dsn"))
	if err != nil {
		return "", usagef("--clickhouse-dsn: %v", err)
	}
	return dsn, nil
}

func runCommand(h host) *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "take one snapshot of the venue (or one every --every) and exit",
		Flags: jobFlags(),
		Action: func(c *cli.Context) error {
			j, err := configure(c)
			if err != nil {
				return err
			}
			j.host = h
			stopProfile, err := startProfiles(j.CPUProfile, j.MemProfile)
			if err != nil {
				return err
			}
			defer stopProfile()
			b, ctx, release, err := j.start(c.Context, c.App.ErrWriter)
			if err != nil {
				return err
			}
			defer release()
			if j.Listen != "" && j.Every <= 0 {
				return usagef("--listen serves metrics in --every mode; a one-shot run writes --metrics-file")
			}
			if j.Every > 0 {
				if j.Listen != "" {
					stop, err := b.serveMetrics(ctx, j)
					if err != nil {
						return err
					}
					defer stop()
				}
				err := b.loop(ctx, j, c.App.Writer)
				if lerr := b.leaseErr(); lerr != nil {
					return lerr
				}
				return err
			}
			_, err = b.once(ctx, j, c.App.Writer)
			if lerr := b.leaseErr(); lerr != nil {
				return lerr
			}
			return err
		},
	}
}

// splitList splits comma lists in repeatable flags: --endpoints a,b --endpoints c.
func splitList(vals []string) []string { return settings.SplitList(vals) }
