package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/optlake/optlake/internal/settings"
	"github.com/optlake/optlake/pipeline"
)

func replayCommand(h host) *cli.Command {
	return &cli.Command{
		Name:  "replay",
		Usage: "rebuild tables from the raw archive (backfill, schema change, a sink that was down)",
		Flags: append(settings.Flags(settings.Replay),
			&cli.StringFlag{Name: "from", Usage: "first snapshot time, inclusive (RFC 3339 or YYYY-MM-DD)", EnvVars: envs("replay-from")},
			&cli.StringFlag{Name: "to", Usage: "end of the range, exclusive (RFC 3339 or YYYY-MM-DD)", EnvVars: envs("replay-to")},
		),
		Action: func(c *cli.Context) error {
			from, err := parseTimeFlag(c.String("from"))
			if err != nil {
				return usagef("--from: %v", err)
			}
			to, err := parseTimeFlag(c.String("to"))
			if err != nil {
				return usagef("--to: %v", err)
			}
			j, err := readJob(c)
			if err != nil {
				return err
			}
			j.Replay, j.host = true, h
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
			progress := progressPrinter(c.App.ErrWriter, b)
			res, err := b.runner.Replay(ctx, pipeline.ReplayOptions{From: from, To: to, Progress: progress})
			if err != nil {
				return err
			}
			out := c.App.Writer
			fmt.Fprintf(out, "replayed %d snapshots: %d rows, %d rejects, %d events; %d failed, %d files skipped\n",
				len(res.Snapshots), res.Rows, res.Rejects, res.Events, res.Failed, len(res.Problems))
			for _, p := range res.Problems {
				fmt.Fprintln(out, "  skipped "+b.redactor.String(p))
			}
			for _, p := range res.NeverLoaded {
				fmt.Fprintln(out, "  never loaded live either: "+b.redactor.String(p))
			}
			if sj := j.SummaryJSON; sj != "" {
				if err := writeJSON(sj, res, b.redactor); err != nil {
					return fmt.Errorf("write summary: %w", err)
				}
			}
			switch {
			case res.OK():
				return nil
			case len(res.Snapshots) > res.Failed:
				return codedError{exitPartial, fmt.Errorf("replay incomplete: %d snapshot(s) failed, %d file(s) skipped", res.Failed, len(res.Problems))}
			default:
				return codedError{exitFailure, fmt.Errorf("replay failed: %d snapshot(s) failed, %d file(s) skipped", res.Failed, len(res.Problems))}
			}
		},
	}
}

// parseTimeFlag accepts RFC 3339 or a date (UTC midnight); "" is open.
func parseTimeFlag(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q is neither RFC 3339 nor YYYY-MM-DD", s)
}

// progressPrinter shows a progress bar (github.com/schollz/progressbar) on
// a terminal and plain log lines otherwise.
func progressPrinter(w io.Writer, b *built) func(int, int, *pipeline.Summary) {
	// A terminal, not any character device: /dev/null is one too, and a
	// bar drawn there costs an fsync per snapshot.
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return progressBar(w)
	}
	return func(done, total int, s *pipeline.Summary) {
		b.log.Info("replayed", "snapshot", s.SnapshotTime.Format(time.RFC3339Nano), "run_id", s.RunID, "ok", s.OK, "rows", summaryRows(s), "progress", fmt.Sprintf("%d/%d", done, total))
	}
}

// progressBar draws the replay's progress on w (a terminal): done/total
// snapshots, the snapshot just replayed and its rows.
func progressBar(w io.Writer) func(int, int, *pipeline.Summary) {
	var bar *progressbar.ProgressBar
	return func(done, total int, s *pipeline.Summary) {
		if bar == nil {
			bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(w), progressbar.OptionSetWidth(30),
				progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(false),
				progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }))
		}
		bar.Describe(fmt.Sprintf("%s %d rows", s.SnapshotTime.Format(time.RFC3339), summaryRows(s)))
		bar.Set(done)
	}
}

func summaryRows(s *pipeline.Summary) int64 {
	var rows int64
	for _, e := range s.Endpoints {
		rows += e.Rows
	}
	return rows
}
