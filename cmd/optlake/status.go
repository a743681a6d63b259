package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/optlake/optlake/internal/settings"
	"github.com/optlake/optlake/lake"
	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/pipeline/ledger"
	"github.com/optlake/optlake/sinks/parquet/compact"
	"github.com/optlake/optlake/storage"
)

// statusCommand prints, per sink, what the load ledger holds pending or
// failed. It only reads (no lock): a run may be writing at the same time,
// and every ledger object is replaced whole.
func statusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "per sink, the snapshots still pending in the load ledger (count, oldest, last error) and those that failed",
		Flags: append(append([]cli.Flag{settings.Flag(settings.Status, "data-dir")}, catalogFlags(settings.Status)...),
			&cli.StringFlag{Name: "format", Value: "text", Usage: "text or json", EnvVars: envs("status-format")},
		),
		Action: func(c *cli.Context) error {
			st0, err := openStore(c.Context, c.String("data-dir"), true)
			if err != nil {
				return err
			}
			defer st0.Close()
			led := ledger.New(st0, nil)
			format := c.String("format")
			if format != "text" && format != "json" {
				return usagef("--format %q: want text or json", format)
			}
			recs, err := led.Open(c.Context)
			if err != nil {
				return err
			}
			st := ledger.Summarize(recs)
			comps, err := unfinishedCompactions(c.Context, st0)
			if err != nil {
				return err
			}
			notes, err := pipeline.EventsNotes(c.Context, st0)
			if err != nil {
				return err
			}
			dups, err := pipeline.Duplicates(c.Context, st0)
			if err != nil {
				return err
			}
			lease := leaseOf(c.Context, st0)
			cat, err := icebergCatalog(c)
			if err != nil {
				return err
			}
			// Status writes nothing (a read-only catalog): a table the
			// catalog lacks is shown as not registered.
			cat.ReadOnly = true
			lk, err := lake.Read(c.Context, st0, lake.Options{Iceberg: formatOptions(cat)})
			if err != nil {
				return err
			}
			defer lk.Close()
			tf, err := lk.Status(c.Context)
			if err != nil {
				return err
			}
			w := c.App.Writer
			if format == "json" {
				if st == nil {
					st = []ledger.SinkStatus{}
				}
				if notes == nil {
					notes = []pipeline.EventsNote{}
				}
				if dups == nil {
					dups = []pipeline.DuplicateCount{}
				}
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				doc := map[string]any{"sinks": st, "compactions": comps, "events_not_written": notes, "duplicates": dups}
				if lease != nil {
					doc["lease"] = lease
				}
				maps.Copy(doc, tf.JSON)
				return enc.Encode(doc)
			}
			for _, l := range tf.Lines {
				fmt.Fprintln(w, l)
			}
			for _, cp := range comps {
				fmt.Fprintf(w, "unfinished compaction: %s %s (%s): %s\n", cp.Table, cp.Date, cp.Journal, cp.Note)
			}
			if lease != nil {
				fmt.Fprintln(w, lease.line())
			}
			for _, n := range notes {
				fmt.Fprintf(w, "instrument events not written: %s snapshot %s (run %s, %s): %s; cleared by the next snapshot whose events are written\n",
					n.Source, n.SnapshotTime.UTC().Format(time.RFC3339Nano), n.RunID, n.Endpoint, n.Reason)
			}
			for _, d := range dups {
				fmt.Fprintf(w, "duplicate keys: %s %s: %d row(s) rejected as duplicates in %d snapshot(s), the last %s (%d)\n",
					d.Source, d.Endpoint, d.Rows, d.Snapshots, d.Last.UTC().Format(time.RFC3339Nano), d.LastRows)
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

// compactionStatus is a compaction whose journal a crash left behind: the
// next command that takes the data directory (compact, run, replay)
// finishes or undoes it.
type compactionStatus struct {
	Table   string `json:"table"`
	Date    string `json:"date"`
	Journal string `json:"journal"`
	// Duplicates: readers may see some of the day's rows twice until it is
	// recovered (on a bucket, where the compacted objects may be visible
	// beside their inputs; a local folder swaps in one step).
	Duplicates bool   `json:"duplicates_possible"`
	Note       string `json:"note"`
}

// unfinishedCompactions lists the compaction journals of the data
// directory (parsed by compact.Journals).
func unfinishedCompactions(ctx context.Context, st storage.Store) ([]compactionStatus, error) {
	js, err := compact.Journals(ctx, st)
	if err != nil {
		return nil, err
	}
	out := []compactionStatus{}
	bucket := storage.LocalDir(st) == ""
	for _, j := range js {
		c := compactionStatus{Table: j.Table, Date: j.Date, Journal: j.Name, Duplicates: bucket,
			Note: "readers see every row once; the next compact, run or replay finishes or undoes it"}
		if bucket {
			c.Note = "readers may see rows of that day twice until the next compact, run or replay recovers it"
		}
		out = append(out, c)
	}
	return out, nil
}

// leaseStatus is the lease of a bucket data directory.
type leaseStatus struct {
	Holder  string    `json:"holder"`
	Expires time.Time `json:"expires"`
	Expired bool      `json:"expired"`
}

// leaseOf reads the lease (nil: none, or a local folder, whose lock dies
// with its process).
func leaseOf(ctx context.Context, st storage.Store) *leaseStatus {
	holder, exp, err := storage.ReadLease(ctx, st)
	if err != nil {
		return nil
	}
	return &leaseStatus{Holder: holder, Expires: exp.UTC(), Expired: !time.Now().Before(exp)}
}

func (l *leaseStatus) line() string {
	if l.Expired {
		return fmt.Sprintf("lease: held by %s, expired at %s: the next command takes it over", l.Holder, l.Expires.Format(time.RFC3339))
	}
	return fmt.Sprintf("lease: held by %s until %s: another command is refused until then (unless the holder releases it)", l.Holder, l.Expires.Format(time.RFC3339))
}
