package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"slices"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/optlake/optlake/internal/redact"
	"github.com/optlake/optlake/internal/settings"
	"github.com/optlake/optlake/lake"
	"github.com/optlake/optlake/lake/layout"
	"github.com/optlake/optlake/lake/tableformat"
	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/pipeline/ledger"
	"github.com/optlake/optlake/pipeline/retention"
	"github.com/optlake/optlake/sinks/parquet/compact"
	"github.com/optlake/optlake/storage"
)

// crashEnv names the test-only crash hook: the process kills itself
// (SIGKILL, as kill -9) right after the named step of a compaction's
// publish (compact.Steps). Not documented for users.
const crashEnv = "OPTLAKE_TEST_COMPACT_CRASH_AT"

func compactCommand(h host) *cli.Command {
	return &cli.Command{
		Name:  "compact",
		Usage: "rewrite each closed day's per-snapshot Parquet files of a table into one file sorted by the table's key",
		Flags: append(settings.Flags(settings.Compact),
			&cli.StringFlag{Name: "from", Usage: "first day, inclusive (YYYY-MM-DD; default: the first)", EnvVars: envs("compact-from")},
			&cli.StringFlag{Name: "to", Usage: "last day, exclusive (YYYY-MM-DD; default: today UTC, so every closed day; tomorrow includes today)", EnvVars: envs("compact-to")},
			&cli.StringSliceFlag{Name: "tables", Usage: "tables to compact (default: all)", EnvVars: envs("compact-tables")},
		),
		Action: func(c *cli.Context) error {
			from, to := c.String("from"), c.String("to")
			keep, grace := c.Duration("iceberg-keep-snapshots"), c.Duration("iceberg-orphan-grace")
			if keep < 0 || grace < 0 {
				return usagef("--iceberg-keep-snapshots and --iceberg-orphan-grace must not be negative")
			}
			for name, v := range map[string]string{"--from": from, "--to": to} {
				if v == "" {
					continue
				}
				if _, err := time.Parse(time.DateOnly, v); err != nil {
					return usagef("%s %q: want YYYY-MM-DD", name, v)
				}
			}
			st, err := openStore(c.Context, c.String("data-dir"), true)
			if err != nil {
				return err
			}
			defer st.Close()
			if dir := storage.LocalDir(st); dir != "" {
				if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
					return usagef("--data-dir %s: not a directory", dir)
				}
			}
			log, err := newLogger(c.App.ErrWriter, c.String("log-format"), c.String("log-level"), redact.New(catalogSecrets(c)...))
			if err != nil {
				return err
			}
			h.lowerMemoryLimit(compact.MemoryLimit)
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
			cst := lk.Compaction()
			defer cst.Close()
			opt := compact.Options{Target: cst, From: from, To: to, Tables: splitList(c.StringSlice("tables")), Logger: log, Crash: crashHook()}
			rep, err := compact.Compact(c.Context, opt)
			printCompactReport(c.App.Writer, rep, h.now())
			if c.Context.Err() == nil {
				err = errors.Join(err, upkeep(c.Context, lk, tableformat.Upkeep{Tables: opt.Tables, Keep: keep, Grace: grace}, c.App.Writer))
			}
			return err
		},
	}
}

// compactBudget bounds run --compact: no day is started after 10 minutes
// (with --every, half the interval); a day under way finishes (stopping
// it would waste it). What is left waits for the next run.
func compactBudget(j *job) time.Duration {
	b := 10 * time.Minute
	if j.Every > 0 {
		b = min(b, j.Every/2)
	}
	return b
}

// compactClosedDays is run --compact: after the snapshot, in the same
// process (which holds the data directory's lock), the lake's closed days
// are compacted from where its format says they may not be
// (tableformat.Compaction.ClosedFrom), starting none after compactBudget.
// A failure is logged; the snapshot's outcome stands.
func (b *built) compactClosedDays(ctx context.Context, j *job, stdout io.Writer, sum *pipeline.Summary) {
	b.reopenCaughtUpDays(ctx, sum)
	if !j.Compact || !slices.Contains(j.Sinks, "parquet") {
		return
	}
	cst := b.lake.Compaction()
	defer cst.Close()
	opt := compact.Options{Target: cst, Now: j.host.now, Deadline: time.Now().Add(compactBudget(j)),
		Logger: b.log.With("step", "compact"), Crash: crashHook(), From: cst.ClosedFrom(ctx)}
	rep, err := compact.Compact(ctx, opt)
	if len(rep.Partitions) > 0 {
		printCompactReport(stdout, rep, j.host.now())
	}
	if err != nil {
		b.log.Error("compaction failed; the next run tries again", "err", err)
	} else if ctx.Err() == nil && time.Now().Before(opt.Deadline) && rep.To > opt.From {
		// Every day before rep.To is compacted now.
		if err := cst.Closed(ctx, rep.To); err != nil {
			b.log.Warn("compaction: the compacted days' mark not written (the next run looks at every day)", "err", err)
		}
	}
	// The format's upkeep (an Iceberg lake's reads every snapshot's
	// manifest list): once a day is compacted (about daily), not after
	// every snapshot.
	if len(rep.Partitions) > 0 && ctx.Err() == nil {
		if err := upkeep(ctx, b.lake, tableformat.Upkeep{Keep: j.IcebergKeep, Grace: j.IcebergGrace}, stdout); err != nil {
			b.log.Error("the table format's upkeep failed; the next compaction tries again", "err", err)
		}
	}
}

// upkeep is the lake format's upkeep after a compaction; it prints what
// the format did.
func upkeep(ctx context.Context, f *lake.Format, u tableformat.Upkeep, w io.Writer) error {
	line, err := f.Upkeep(ctx, u)
	if line != "" {
		fmt.Fprintln(w, line)
	}
	return err
}

// recoverCompaction finishes or undoes a compaction a crash cut short
// (every command that takes the lock calls it, through openLake: the next
// run, replay, compact or convert). A failure is logged: the partition
// stays as the crash left it, readable, and the next start tries again.
func recoverCompaction(ctx context.Context, f *lake.Format, log *slog.Logger) {
	cst := f.Compaction()
	defer cst.Close()
	if err := cst.Recover(ctx); err != nil {
		log.Warn("recovering an interrupted compaction", "err", err)
	}
}

// crashHook returns the test-only crash hook (nil unless crashEnv is set).
func crashHook() func(step string) {
	at := os.Getenv(crashEnv)
	if at == "" {
		return nil
	}
	return func(step string) {
		if step == at {
			killSelf()
		}
	}
}

// printCompactReport prints one line per table: partitions, files, bytes
// and bytes per row before and after; now tells which day is today.
func printCompactReport(w io.Writer, rep compact.Report, now time.Time) {
	type sum struct {
		parts, filesIn, filesOut int
		bytesIn, bytesOut, rows  int64
		took                     time.Duration
	}
	by := map[string]*sum{}
	for _, p := range rep.Partitions {
		s := by[p.Table]
		if s == nil {
			s = &sum{}
			by[p.Table] = s
		}
		s.parts++
		s.filesIn += p.InputFiles
		s.filesOut += p.OutputFiles
		s.bytesIn += p.InputBytes
		s.bytesOut += p.OutputBytes
		s.rows += p.Rows
		s.took += p.Took
	}
	tables := make([]string, 0, len(by))
	for t := range by {
		tables = append(tables, t)
	}
	slices.Sort(tables)
	perRow := func(b, rows int64) string {
		if rows == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f", float64(b)/float64(rows))
	}
	for _, t := range tables {
		s := by[t]
		fmt.Fprintf(w, "%s: %d day(s), %d files -> %d, %d rows, %d -> %d bytes (%s -> %s bytes/row) in %s\n",
			t, s.parts, s.filesIn, s.filesOut, s.rows, s.bytesIn, s.bytesOut, perRow(s.bytesIn, s.rows), perRow(s.bytesOut, s.rows), s.took.Round(time.Millisecond))
	}
	fmt.Fprintf(w, "compacted %d partition(s); %d had nothing new (already compacted)\n", len(rep.Partitions), rep.Skipped)
	printSkippedDays(w, rep, now)
}

// printSkippedDays names the days left out because they are not closed
// (today UTC is still being written) or come at or after --to.
func printSkippedDays(w io.Writer, rep compact.Report, now time.Time) {
	today := now.UTC().Format(time.DateOnly)
	for _, d := range rep.Later {
		next := d
		if t, err := time.Parse(time.DateOnly, d); err == nil {
			next = t.AddDate(0, 0, 1).Format(time.DateOnly)
		}
		why := fmt.Sprintf("on or after --to %s", rep.To)
		if d >= today {
			why = "still open: today (UTC) is being written"
		}
		fmt.Fprintf(w, "skipped %s: %s; --to %s includes it\n", d, why, next)
	}
}

// pruneRaw is --raw-retention: after the snapshot (and its compaction),
// the first run of each UTC day deletes the raw archive's and the load
// ledger's done records' days older than the retention (retention.Prune:
// none a pending load needs). A failure is logged; the snapshot's outcome
// stands, and the next day's first run tries again.
func (b *built) pruneRaw(ctx context.Context, j *job) {
	if j.RawRetention <= 0 || ctx.Err() != nil {
		return
	}
	now := j.host.now()
	marker := path.Join(ledger.Dir, pruneMarker)
	if fi, err := b.store.Stat(ctx, marker); err == nil && fi.ModTime.UTC().Truncate(24*time.Hour).Equal(now.UTC().Truncate(24*time.Hour)) {
		return // pruned today
	}
	rep, err := retention.Prune(ctx, b.store, ledger.New(b.store, j.host.now), now, j.RawRetention)
	if err != nil {
		b.log.Error("raw retention failed; the next run tries again", "err", err)
		return
	}
	if len(rep.Folders) > 0 {
		b.log.Info("raw retention: deleted the raw archive and done records of days before the cut; a replay rebuilds only from it",
			"cut", rep.Cut, "folders", len(rep.Folders), "objects", rep.Objects)
	}
	if !rep.HeldBy.IsZero() {
		b.log.Info("raw retention: kept the days from a pending snapshot's on (catch-up loads it from its raw bodies)", "pending", rep.HeldBy)
	}
	if err := b.store.Put(ctx, marker, []byte(now.UTC().Format(time.RFC3339)+"\n")); err != nil {
		b.log.Warn("raw retention: marker not written (pruning again next run)", "err", err)
	}
}

// pruneMarker, in the ledger's folder, is the time of the last raw
// retention (one a UTC day).
const pruneMarker = "raw-retention.last"

// reopenCaughtUpDays tells the lake's compaction which days a catch-up of
// this run loaded a snapshot of (its per-snapshot files wait for
// compaction there), with or without --compact.
func (b *built) reopenCaughtUpDays(ctx context.Context, sum *pipeline.Summary) {
	if sum == nil || sum.CatchUp == nil || len(sum.CatchUp.Snapshots) == 0 {
		return
	}
	low := ""
	for _, s := range sum.CatchUp.Snapshots {
		if d := s.SnapshotTime.UTC().Format(time.DateOnly); low == "" || d < low {
			low = d
		}
	}
	cst := b.lake.Compaction()
	defer cst.Close()
	if err := cst.Reopen(ctx, low); err != nil {
		b.log.Error("compaction: the compacted days' mark could not be lowered nor removed; remove it by hand", "mark", layout.CompactedBefore, "err", err)
	}
}
