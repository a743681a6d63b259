package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/optlake/optlake/internal/settings"
	"github.com/optlake/optlake/storage"
	"github.com/optlake/optlake/venuesim"
)

func demoCommand(h host) *cli.Command {
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
			j := defaultJob() // run's defaults, then the demo's own settings
			j.host = h
			if err := settings.Decode(c, j); err != nil {
				return err
			}
			hist := demoHistory{Seed: c.Int64("seed"), Instruments: c.Int("instruments"), Start: time.Now().UTC().Truncate(time.Hour)}
			prev, err := readDemoHistory(c.Context, j.DataDir)
			if err != nil {
				return err
			}
			if prev != nil {
				if prev.Seed != hist.Seed || prev.Instruments != hist.Instruments {
					return usagef("demo: %s holds the simulated history of --seed %d --instruments %d: continue it with those, or give another --data-dir", j.DataDir, prev.Seed, prev.Instruments)
				}
				hist = *prev
			}
			sim := venuesim.New(venuesim.Config{Seed: hist.Seed, Instruments: hist.Instruments,
				Start: hist.Start, TickEvery: time.Hour,
				Faults: venuesim.Faults{IndexPriceVariants: true, ExtraFields: true}})
			if prev != nil {
				// The same venue, later: starting it over at tick 0 would
				// compare an earlier state with the lake's last snapshot and
				// report events that never happened.
				sim.Advance(prev.Tick + 1)
				fmt.Fprintf(out, "continuing the simulated history already in %s\n", j.DataDir)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			go serve(c.Context, ln, sim.Handler())
			apiURL := "http://" + ln.Addr().String()
			fmt.Fprintf(out, "simulated venue at %s (%d instruments)\n", apiURL, sim.NumInstruments())
			j.APIURL, j.Sinks, j.Source = apiURL, []string{"parquet"}, "venue-sim"
			j.Timeout, j.Deadline, j.MaxAttempts = 30*time.Second, 5*time.Minute, 3
			b, ctx, release, err := j.start(c.Context, c.App.ErrWriter)
			if err != nil {
				return err
			}
			defer release()
			first := sim.Instruments()
			files := 0
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
						files += len(sr.Files)
					}
				}
				hist.Tick = sim.Tick()
				if err := writeDemoHistory(ctx, b.store, hist); err != nil {
					return err
				}
			}
			return printDemoNext(out, b.store, j.DataDir, files, flipped(first, sim.Instruments()))
		},
	}
}

// demoHistory is what a demo's lake records of the simulated venue it
// snapshotted, so that the next demo into it continues that history.
type demoHistory struct {
	Seed        int64     `json:"seed"`
	Instruments int       `json:"instruments"`
	Start       time.Time `json:"start"`
	Tick        int       `json:"tick"` // of the last snapshot
}

// demoHistoryFile is where a demo's lake keeps its demoHistory.
const demoHistoryFile = "_state/demo.json"

// readDemoHistory returns the history of the demo that wrote dataDir, nil
// when none did.
func readDemoHistory(ctx context.Context, dataDir string) (*demoHistory, error) {
	st, err := openStore(ctx, dataDir, false)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	b, err := storage.ReadAll(ctx, st, demoHistoryFile)
	if errors.Is(err, storage.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the demo's history: %w", err)
	}
	var h demoHistory
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("read the demo's history %s: %w", demoHistoryFile, err)
	}
	return &h, nil
}

func writeDemoHistory(ctx context.Context, st storage.Store, h demoHistory) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if err := st.Put(ctx, demoHistoryFile, b); err != nil {
		return fmt.Errorf("save the demo's history: %w", err)
	}
	return nil
}

// flipped returns an instrument listed in both listings whose is_active or
// deployed differs between them (its history has events), "" when none.
func flipped(before, after []venuesim.Instrument) string {
	was := make(map[string]venuesim.Instrument, len(before))
	for _, in := range before {
		was[in.InstrumentName] = in
	}
	var names []string
	for _, in := range after {
		if w, ok := was[in.InstrumentName]; ok && (w.IsActive != in.IsActive || w.Deployed != in.Deployed) {
			names = append(names, in.InstrumentName)
		}
	}
	if len(names) == 0 {
		return ""
	}
	sort.Strings(names)
	return names[0]
}

// printDemoNext says where the lake is and what to try on it: commands that
// work on the demo's own data.
func printDemoNext(out io.Writer, st storage.Store, dataDir string, files int, name string) error {
	if name == "" {
		name = "BTC-PERPETUAL"
	}
	bin := "optlake"
	if exe, err := os.Executable(); err == nil && filepath.Base(filepath.Dir(exe)) == "bin" {
		bin = "bin/optlake" // make demo: the binary is not on PATH
	}
	dd := ""
	if dataDir != "./data" && dataDir != "data" {
		dd = " --data-dir " + dataDir
	}
	if storage.LocalDir(st) == "" {
		fmt.Fprintf(out, "\nwrote %d files under %s.\n\nTry next:\n\n", files, st)
		fmt.Fprintf(out, "  %s history%s %s\n  %s status%s\n  %s schema%s\n", bin, dd, name, bin, dd, bin, dd)
		fmt.Fprintln(out, "\nand DuckDB (httpfs), pandas or polars on the bucket: see docs/object-storage.md.")
		return nil
	}
	dir, _ := filepath.Abs(dataDir)
	fmt.Fprintf(out, "\nwrote %d files under %s (one folder per table, a file per snapshot; raw/ holds the venue's bodies).\n\nTry next:\n\n", files, dir)
	fmt.Fprintf(out, "  %s history%s %s     # events and parameters of one instrument over time\n", bin, dd, name)
	fmt.Fprintf(out, "  %s status%s                # what each sink has loaded\n", bin, dd)
	fmt.Fprintf(out, "  %s schema%s                # every table and its columns\n", bin, dd)
	glob := filepath.Join(dir, "instruments", "*", "*.parquet")
	fmt.Fprintf(out, "\nand in DuckDB:\n\n  SELECT snapshot_time, base_currency, count(*) AS instruments, max(index_price) AS index_price\n  FROM read_parquet('%s', hive_partitioning = true)\n  GROUP BY ALL ORDER BY ALL;\n", glob)
	fmt.Fprintf(out, "\nMore: README.md, \"After the demo, try…\", and docs/notebooks-and-the-lake.md.\n")
	return nil
}
