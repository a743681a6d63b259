package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/optlake/optlake/lake/layout"
	"github.com/optlake/optlake/pipeline/archive"
	"github.com/optlake/optlake/pipeline/ledger"
	"github.com/optlake/optlake/storage"
)

// catchUpRow is the row of the next run with 12 snapshots pending.
const catchUpRow = "run with 12 snapshots pending (catch-up)"

func init() { rowNames = append(rowNames, catchUpRow) }

// pendingSnapshots is how many snapshots the catch-up row leaves pending.
const pendingSnapshots = 12

// measureCatchUp times the next run on a copy of lake whose raw archive
// holds every closed day (catchUpBase) and whose ledger leaves the first
// 12 snapshots of today pending (their bodies archived): the run catches
// them up, then takes its own snapshot. Without --compact: the row is the
// catch-up's planning and loads, not a compaction.
func measureCatchUp(ctx context.Context, bin, addr, key, lake string, cfg config, rep *Report) error {
	base, err := catchUpBase(ctx, lake, cfg)
	if err != nil {
		return fmt.Errorf("catch-up lake: %w", err)
	}
	for r := range cfg.runs {
		cp := lake + ".catchup-run"
		if err := hardCopy(ctx, base, cp); err != nil {
			return err
		}
		if err := leavePending(ctx, cp, cfg); err != nil {
			return fmt.Errorf("pending snapshots: %w", err)
		}
		if err := lastSweptYesterday(cp); err != nil {
			return err
		}
		p, err := timed(ctx, bin, "run", "--api-url", "http://"+addr, "--data-dir", cp, "--endpoints", "instruments",
			"--source", source, "--log-level", "warn")
		if err != nil {
			return err
		}
		keep(rep, catchUpRow, key, p, r == 0)
		os.RemoveAll(cp)
	}
	return nil
}

// hardCopy makes dst a hard-linked copy of src's tree (a committed file
// never changes in place). dst is removed first; one that cannot be
// removed is an error, never a copy nested inside it (cp -al into an
// existing folder copies src into dst/<base of src>).
func hardCopy(ctx context.Context, src, dst string) error {
	if err := os.RemoveAll(dst); err != nil {
		return fmt.Errorf("copy lake: %w", err)
	}
	if _, err := os.Lstat(dst); !os.IsNotExist(err) {
		return fmt.Errorf("copy lake: %s still there after removing it (%v)", dst, err)
	}
	if out, err := exec.CommandContext(ctx, "cp", "-al", "--no-target-directory", src, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("copy lake: %v %s", err, out)
	}
	return nil
}

// catchUpBase is a copy of lake (made once, beside it) whose raw archive
// holds the listing of every snapshot of every closed day, as a lake that
// keeps its raw archive (no --raw-retention, the default) does after the
// days: the generator archives the last day's bodies only, so each older
// snapshot's body is a hard link to one archived body, with its own
// meta.json (its time and run id; the body's sha256 holds). Only the names
// and the metadata matter here: a catch-up reads the bodies of the pending
// snapshots alone.
func catchUpBase(ctx context.Context, lake string, cfg config) (string, error) {
	base := lake + ".catchup"
	done := filepath.Join(base, ".year-bench-catchup")
	if _, err := os.Stat(done); err == nil {
		return base, nil
	}
	if err := hardCopy(ctx, lake, base); err != nil {
		return "", err
	}
	tmpl, body, err := templateBody(base)
	if err != nil {
		return "", err
	}
	var gs genStats
	if b, err := os.ReadFile(filepath.Join(lake, genMarker)); err != nil || json.Unmarshal(b, &gs) != nil {
		return "", fmt.Errorf("%s: not a generated lake (%v)", lake, err)
	}
	today := time.Now().UTC().Truncate(24 * time.Hour)
	perDay := int(24 * time.Hour / cfg.every)
	for d := 1; d <= gs.Days; d++ {
		date := today.AddDate(0, 0, -d)
		dir := filepath.Join(base, "raw", "instruments", "date="+date.Format(time.DateOnly))
		if _, err := os.Stat(dir); err == nil {
			continue // archived by the generator
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		for k := range perDay {
			ts := date.Add(time.Duration(k) * cfg.every)
			if err := linkBody(base, tmpl, &body, ts, runID(ts)); err != nil {
				return "", err
			}
		}
	}
	progress("catch-up lake %s: the raw archive of %d days", base, gs.Days)
	return base, os.WriteFile(done, nil, 0o644)
}

// archiveMeta is an archived body's meta.json.
type archiveMeta = archive.Meta

// templateBody returns an archived listing body's metadata and the body's
// file (absolute).
func templateBody(lake string) (archive.Meta, string, error) {
	metas, err := filepath.Glob(filepath.Join(lake, "raw", "instruments", "date=*", "*.meta.json"))
	if err != nil || len(metas) == 0 {
		return archive.Meta{}, "", fmt.Errorf("no archived listing in %s (%v)", lake, err)
	}
	return readMeta(lake, metas[0])
}

// readMeta reads the meta.json name of lake: the metadata and its body's
// file (absolute).
func readMeta(lake, name string) (archive.Meta, string, error) {
	var m archive.Meta
	b, err := os.ReadFile(name)
	if err != nil {
		return m, "", err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, "", fmt.Errorf("%s: %w", name, err)
	}
	return m, filepath.Join(lake, filepath.FromSlash(m.File)), nil
}

// linkBody archives snapshot (ts, run) in lake: *body hard-linked (see
// linkOrCopy), its meta.json written after it (as the archive does).
func linkBody(lake string, tmpl archive.Meta, body *string, ts time.Time, run string) error {
	name := ts.Format(storage.TimeLayout) + "-" + storage.SafeName(run) + "-r000-a1"
	rel := path.Join("raw", "instruments", "date="+ts.Format(time.DateOnly), name)
	m := tmpl
	m.SnapshotTime, m.FetchTime, m.RunID = ts, ts, run
	m.File = rel + ".json.zst"
	if err := os.MkdirAll(filepath.Join(lake, filepath.FromSlash(path.Dir(rel))), 0o755); err != nil {
		return err
	}
	if err := linkOrCopy(body, filepath.Join(lake, filepath.FromSlash(m.File))); err != nil {
		return err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(lake, filepath.FromSlash(rel+".meta.json")), append(b, '\n'), 0o644)
}

// maxLinks is how many links linkOrCopy gives one body at most: the
// file system's bound (ext4: 65,000) less room for the hard-linked copies
// the bench makes of a lake (each adds a link to every file). A year of
// 5-minute snapshots is 105,120 bodies.
const maxLinks = 10000

// linkOrCopy hard-links *src at dst; when *src has maxLinks links, it
// copies it there instead and links the next ones to the copy (*src = dst).
func linkOrCopy(src *string, dst string) error {
	fi, err := os.Stat(*src)
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Nlink < maxLinks {
		return os.Link(*src, dst)
	}
	b, err := os.ReadFile(*src)
	if err != nil {
		return err
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		return err
	}
	*src = dst
	return nil
}

// leavePending archives the first 12 snapshots of today in lake and
// records them in its ledger with their listing pending in parquet, as
// runs whose sink failed leave them.
func leavePending(ctx context.Context, lake string, cfg config) error {
	tmpl, body, err := templateBody(lake)
	if err != nil {
		return err
	}
	today := time.Now().UTC().Truncate(24 * time.Hour)
	l := ledger.New(storage.NewLocal(lake), nil)
	for k := range pendingSnapshots {
		ts := today.Add(time.Duration(k) * cfg.every)
		run := strings.Replace(runID(ts), "-8000-", "-8001-", 1) // not a committed run's id
		if err := linkBody(lake, tmpl, &body, ts, run); err != nil {
			return err
		}
		if err := l.Begin(ctx, ts, run, source, []string{"instruments"}, []string{"parquet"}); err != nil {
			return err
		}
	}
	return nil
}

// lockWork holds the work folder for this bench (an flock): two benches
// on one -keep folder would remove each other's copies of the lakes
// midway through a timed command. unlock may be called twice.
func lockWork(work string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(work, ".year-bench.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s is in use by another year bench (%v)", work, err)
	}
	var once sync.Once
	return func() { once.Do(func() { f.Close() }) }, nil
}

// compactedToYesterday gives the lake the compacted days' mark a year of
// `run --compact` leaves before today's first run: every day before
// yesterday compacted (the generator writes the days compacted but no
// mark; without one, the first run --compact looks at every day of the
// history once, then writes it). A mark already there is kept.
func compactedToYesterday(dir string) error {
	mark := filepath.Join(dir, filepath.FromSlash(layout.CompactedBefore))
	if _, err := os.Stat(mark); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(mark), 0o755); err != nil {
		return err
	}
	yesterday := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -1)
	return os.WriteFile(mark, []byte(yesterday.Format(time.DateOnly)+"\n"), 0o644)
}
