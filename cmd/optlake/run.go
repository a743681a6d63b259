package main

import (
	"github.com/urfave/cli/v2"

	"github.com/optlake/optlake/internal/settings"
)

// jobFlags are the flags of `optlake run` (and `config check`), from the
// list in internal/settings; every flag also reads an OPTLAKE_* variable and
// a key of the same name in the --config YAML file (see config.go).
// Precedence: flag > environment > config file > default.
func jobFlags() []cli.Flag { return settings.Flags(settings.Run) }

// readJob reads the settings of the parsed command line into a job.
func readJob(c *cli.Context) (*job, error) {
	j := &job{}
	if err := settings.Decode(c, j); err != nil {
		return nil, err
	}
	return j, nil
}

func runCommand() *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "take one snapshot of the venue (or one every --every) and exit",
		Flags: jobFlags(),
		Action: func(c *cli.Context) error {
			j, err := configure(c)
			if err != nil {
				return err
			}
			stopProfile, err := startProfiles(j.CPUProfile, j.MemProfile)
			if err != nil {
				return err
			}
			defer stopProfile()
			b, release, err := j.start(c.Context, c.App.ErrWriter)
			if err != nil {
				return err
			}
			defer release()
			if j.Listen != "" && j.Every <= 0 {
				return usagef("--listen serves metrics in --every mode; a one-shot run writes --metrics-file")
			}
			if j.Every > 0 {
				if j.Listen != "" {
					stop, err := b.serveMetrics(c.Context, j)
					if err != nil {
						return err
					}
					defer stop()
				}
				return b.loop(c.Context, j, c.App.Writer)
			}
			_, err = b.once(c.Context, j, c.App.Writer)
			return err
		},
	}
}

// splitList splits comma lists in repeatable flags: --endpoints a,b --endpoints c.
func splitList(vals []string) []string { return settings.SplitList(vals) }
