package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/optlake/optlake/internal/settings"
	"github.com/optlake/optlake/pipeline/ledger"
)

// statusCommand prints, per sink, what the load ledger holds pending or
// failed. It only reads (no lock): a run may be writing at the same time,
// and every ledger object is replaced whole.
func statusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "per sink, the snapshots still pending in the load ledger (count, oldest, last error) and those that failed",
		Flags: []cli.Flag{
			settings.Flag(settings.Status, "data-dir"),
			&cli.StringFlag{Name: "format", Value: "text", Usage: "text or json", EnvVars: envs("status-format")},
		},
		Action: func(c *cli.Context) error {
			led, closeStore, err := openLedger(c.Context, c.String("data-dir"), true)
			if err != nil {
				return err
			}
			defer closeStore()
			format := c.String("format")
			if format != "text" && format != "json" {
				return usagef("--format %q: want text or json", format)
			}
			recs, err := led.Open(c.Context)
			if err != nil {
				return err
			}
			st := ledger.Summarize(recs)
			w := c.App.Writer
			if format == "json" {
				if st == nil {
					st = []ledger.SinkStatus{}
				}
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"sinks": st})
			}
			if len(st) == 0 {
				fmt.Fprintln(w, "nothing pending: every snapshot in the load ledger is loaded into every sink")
				return nil
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "SINK\tPENDING\tOLDEST\tFAILED\tLAST ERROR")
			for _, s := range st {
				oldest, last := "-", "-"
				if s.Oldest != nil {
					oldest = s.Oldest.UTC().Format(time.RFC3339Nano)
				}
				if s.LastError != "" {
					last = s.LastError
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\n", s.Sink, s.Pending, oldest, len(s.Failed), last)
			}
			tw.Flush()
			for _, s := range st {
				for _, f := range s.Failed {
					fmt.Fprintf(w, "failed: %s %s %s (run %s): %s\n", s.Sink, f.SnapshotTime.UTC().Format(time.RFC3339Nano), f.Endpoint, f.RunID, f.Reason)
				}
			}
			return nil
		},
	}
}
