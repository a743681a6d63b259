package main

import (
	"fmt"
	"net"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/optlake/optlake/internal/settings"
	"github.com/optlake/optlake/storage"
	"github.com/optlake/optlake/venuesim"
)

func demoCommand() *cli.Command {
	return &cli.Command{
		Name:  "demo",
		Usage: "start the simulated venue in-process and take a few snapshots into a Parquet lake (no server needed)",
		Flags: append(settings.Flags(settings.Demo),
			&cli.IntFlag{Name: "snapshots", Value: 3, Usage: "how many snapshots", EnvVars: envs("demo-snapshots")},
			&cli.DurationFlag{Name: "interval", Value: 2 * time.Second, Usage: "pause between snapshots", EnvVars: envs("demo-interval")},
			&cli.Int64Flag{Name: "seed", Value: 1, Usage: "simulator seed", EnvVars: envs("sim-seed")},
			&cli.IntFlag{Name: "instruments", Usage: "listing size (0 = realistic default)", EnvVars: envs("sim-instruments")},
		),
		Action: func(c *cli.Context) error {
			out := c.App.Writer
			sim := venuesim.New(venuesim.Config{Seed: c.Int64("seed"), Instruments: c.Int("instruments"),
				Start: time.Now().UTC().Truncate(time.Hour), TickEvery: time.Hour,
				Faults: venuesim.Faults{IndexPriceVariants: true, ExtraFields: true}})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			go serve(c.Context, ln, sim.Handler())
			apiURL := "http://" + ln.Addr().String()
			fmt.Fprintf(out, "simulated venue at %s (%d instruments)\n", apiURL, sim.NumInstruments())
			j := defaultJob() // run's defaults, then the demo's own settings
			if err := settings.Decode(c, j); err != nil {
				return err
			}
			j.APIURL, j.Sinks, j.Source = apiURL, []string{"parquet"}, "venue-sim"
			j.Timeout, j.Deadline, j.MaxAttempts = 30*time.Second, 5*time.Minute, 3
			b, ctx, release, err := j.start(c.Context, c.App.ErrWriter)
			if err != nil {
				return err
			}
			defer release()
			var files []string
			n := c.Int("snapshots")
			for i := 0; i < n; i++ {
				if i > 0 {
					select {
					case <-ctx.Done():
						return ctx.Err()
					case <-time.After(c.Duration("interval")):
					}
					sim.Advance(1) // an hour of venue life: index moves, listings, expiries, flips
				}
				sum, err := b.once(ctx, j, out)
				if err != nil {
					return err
				}
				for _, e := range sum.Endpoints {
					for _, sr := range e.Sinks {
						files = append(files, sr.Files...)
					}
				}
			}
			if storage.LocalDir(b.store) == "" {
				fmt.Fprintf(out, "\nwrote %d files under %s:\n", len(files), b.store)
				for _, f := range files {
					fmt.Fprintln(out, "  "+f)
				}
				fmt.Fprintln(out, "\nQuery them with DuckDB (httpfs), pandas or polars: see \"The lake on S3\" in the README.")
				return nil
			}
			dir, _ := filepath.Abs(j.DataDir)
			fmt.Fprintf(out, "\nwrote %d files under %s:\n", len(files), dir)
			for _, f := range files {
				fmt.Fprintln(out, "  "+f)
			}
			glob := filepath.Join(dir, "instruments", "*", "*.parquet")
			fmt.Fprintf(out, "\nQuery them with DuckDB:\n\n  SELECT snapshot_time, base_currency, count(*) AS instruments, any_value(index_price) AS index_price\n  FROM read_parquet('%s', hive_partitioning = true)\n  GROUP BY ALL ORDER BY ALL;\n", glob)
			fmt.Fprintf(out, "\nor pandas:\n\n  import pandas as pd\n  df = pd.read_parquet(%q)\n  df.groupby(['snapshot_time', 'base_currency']).index_price.first()\n\n", filepath.Join(dir, "instruments"))
			return nil
		},
	}
}
