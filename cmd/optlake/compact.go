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
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/optlake/optlake/internal/redact"
	"github.com/optlake/optlake/internal/settings"
	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/pipeline/ledger"
	"github.com/optlake/optlake/pipeline/retention"
	pq "github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/sinks/parquet/compact"
	"github.com/optlake/optlake/storage"
)

// crashEnv names the test-only crash hook: the process kills itself
// (SIGKILL, as kill -9) right after the named step of a compaction's
// publish (compact.Steps). Not documented for users.
const crashEnv = "OPTLAKE_TEST_COMPACT_CRASH_AT"

// compactMemoryLimit is the Go heap's soft limit while compacting (unless
// GOMEMLIMIT is set): the merge's working set is bounded (see package
// compact), this keeps garbage from growing the process past it.
const compactMemoryLimit = 160 << 20

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
			h.lowerMemoryLimit(compactMemoryLimit)
			cat, err := icebergCatalog(c)
			if err != nil {
				return err
			}
			lease, err := lockStore(c.Context, st, cat, 0, h.now, log)
			if err != nil {
				return err
			}
			defer lease.Release(context.WithoutCancel(c.Context))
			cst, ice, err := compactStore(c.Context, st, cat, h.now, log)
			if err != nil {
				return err
			}
			defer cst.Close()
			defer ice.Close()
			opt := compact.Options{Lake: cst, From: from, To: to, Tables: splitList(c.StringSlice("tables")), Logger: log, Crash: crashHook()}
			rep, err := compact.Compact(c.Context, opt)
			printCompactReport(c.App.Writer, rep, h.now())
			if ice != nil && c.Context.Err() == nil {
				err = errors.Join(err, expireIceberg(c.Context, ice, opt.Tables, keep, grace, c.App.Writer))
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
// process (which holds the data directory's lock), the Parquet lake's
// closed days are compacted, starting none after compactBudget. A
// failure is logged; the snapshot's outcome stands.
//
// A Parquet lake's days before compactedBefore are not looked at: each run
// compacts from that day on (yesterday, once every day before it is
// compacted), not every day of the history again.
func (b *built) compactClosedDays(ctx context.Context, j *job, stdout io.Writer, sum *pipeline.Summary) {
	b.lowerCompactedBefore(ctx, sum)
	if !j.Compact || !slices.Contains(j.Sinks, "parquet") {
		return
	}
	log := b.log.With("step", "compact")
	cst, ice, err := compactStore(ctx, b.store, j.icebergCatalog(), j.host.now, log)
	if err != nil {
		b.log.Error("compaction failed; the next run tries again", "err", err)
		return
	}
	defer cst.Close()
	defer ice.Close()
	opt := compact.Options{Lake: cst, Now: j.host.now, Deadline: time.Now().Add(compactBudget(j)),
		Logger: log, Crash: crashHook()}
	if ice == nil {
		opt.From = b.compactFrom(ctx)
	}
	rep, err := compact.Compact(ctx, opt)
	if len(rep.Partitions) > 0 {
		printCompactReport(stdout, rep, j.host.now())
	}
	if err != nil {
		b.log.Error("compaction failed; the next run tries again", "err", err)
	} else if ice == nil && ctx.Err() == nil && time.Now().Before(opt.Deadline) && rep.To > opt.From {
		// Every day before rep.To is compacted now.
		if err := b.store.Put(ctx, compactedBefore, []byte(rep.To+"\n")); err != nil {
			b.log.Warn("compaction: the compacted days' mark not written (the next run looks at every day)", "err", err)
		}
	}
	// An Iceberg lake's upkeep reads every snapshot's manifest list: once
	// a day is compacted (about daily), not after every snapshot.
	if ice != nil && len(rep.Partitions) > 0 && ctx.Err() == nil {
		if err := expireIceberg(ctx, ice, nil, j.IcebergKeep, j.IcebergGrace, stdout); err != nil {
			b.log.Error("iceberg snapshot expiry failed; the next compaction tries again", "err", err)
		}
	}
}

// recoverCompaction finishes or undoes a compaction a crash cut short
// (every command that takes the lock calls it: the next run, replay or
// compact). A failure is logged: the partition stays as the crash left
// it, readable, and the next start tries again.
func recoverCompaction(ctx context.Context, st storage.Store, cat iceberg.CatalogConfig, now func() time.Time, log *slog.Logger) {
	cst, ice, err := compactStore(ctx, st, cat, now, log)
	if err == nil {
		defer cst.Close()
		defer ice.Close()
		err = cst.Recover(ctx)
	}
	if err != nil {
		log.Warn("recovering an interrupted compaction", "err", err)
	}
}

// compactStore is the lake of a data directory as compaction sees it; for
// an Iceberg lake also its catalog (nil for a Parquet lake), whose
// compaction is one replace commit per table and day; now is the clock of
// the Parquet lake's trash.
func compactStore(ctx context.Context, st storage.Store, cat iceberg.CatalogConfig, now func() time.Time, log *slog.Logger) (compact.Lake, *iceberg.Lake, error) {
	ice, err := icebergLake(ctx, st, cat, log)
	if err != nil {
		return nil, nil, err
	}
	if ice != nil {
		return ice.Compaction(crashHook()), ice, nil
	}
	return compact.For(st, crashHook(), now), nil, nil
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

// compactedBefore, in compaction's folder, holds the first day (YYYY-MM-DD)
// that run --compact has not compacted every table of: the days before it
// hold compacted files only, unless a later load of an older snapshot
// (catch-up: lowerCompactedBefore; a replay's parked files: compactFrom)
// wrote there since.
const compactedBefore = pq.CompactDir + "/compacted-before"

// compactFrom is the first day run --compact compacts: compactedBefore's,
// or the oldest day with parked files when older ("" without a mark: every
// day).
func (b *built) compactFrom(ctx context.Context) string {
	data, err := storage.ReadAll(ctx, b.store, compactedBefore)
	from := strings.TrimSpace(string(data))
	if _, perr := time.Parse(time.DateOnly, from); err != nil || perr != nil {
		return ""
	}
	parked := pq.CompactDir + "/" + pq.ParkedDir + "/"
	objs, err := b.store.List(ctx, parked)
	if err != nil {
		return ""
	}
	for _, o := range objs {
		if _, day, ok := strings.Cut(o.Name, "/date="); ok && len(day) >= len(time.DateOnly) && day[:len(time.DateOnly)] < from {
			from = day[:len(time.DateOnly)]
		}
	}
	return from
}

// lowerCompactedBefore moves compactedBefore back to the oldest day a
// catch-up of this run loaded a snapshot of (its per-snapshot files wait
// for compaction there), with or without --compact.
func (b *built) lowerCompactedBefore(ctx context.Context, sum *pipeline.Summary) {
	if sum == nil || sum.CatchUp == nil || len(sum.CatchUp.Snapshots) == 0 {
		return
	}
	data, err := storage.ReadAll(ctx, b.store, compactedBefore)
	if err != nil {
		return // no mark: every day is looked at
	}
	mark := strings.TrimSpace(string(data))
	low := mark
	for _, s := range sum.CatchUp.Snapshots {
		if d := s.SnapshotTime.UTC().Format(time.DateOnly); d < low {
			low = d
		}
	}
	if low == mark {
		return
	}
	if err := b.store.Put(ctx, compactedBefore, []byte(low+"\n")); err != nil {
		// The mark would hide the caught-up day from compaction: drop it.
		if err := b.store.Delete(ctx, compactedBefore); err != nil {
			b.log.Error("compaction: the compacted days' mark could not be lowered nor removed; remove it by hand", "mark", compactedBefore, "err", err)
		}
	}
}
