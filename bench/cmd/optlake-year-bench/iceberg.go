package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/optlake/optlake/lake"
	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/lake/tableformat"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/storage"
)

var icebergYear = flag.Bool("iceberg", true, "also synthesise the Iceberg lakes (the Parquet lakes' files registered a day at a time) and time their rows")
var icebergOnly = flag.Bool("iceberg-only", false, "time only the Iceberg lakes' rows")

// The Iceberg lakes' keys in Report.Rows.
const (
	iceDay1 = "iceberg-day1"
	iceDayN = "iceberg-dayN"
)

// icebergRowNames are the Iceberg lakes' rows, in order.
var icebergRowNames = []string{"run (first of the UTC day)", "run (next)", "status", "history NAME", "schema",
	"compact (one day of per-snapshot files)", "expire (in process: snapshots older than 7 days, files older than 1 h)"}

func init() {
	for _, q := range readmeQueries {
		icebergRowNames = append(icebergRowNames, "ClickHouse (chDB): "+q.name)
	}
}

// icebergDir is where the Iceberg lake of the Parquet lake dir is used
// (its metadata names this folder: an Iceberg table's locations are
// absolute), and pristineDir the generated lake, hard-linked, that each
// measurement starts again from.
func icebergDir(dir string) string  { return dir + "-iceberg" }
func pristineDir(dir string) string { return icebergDir(dir) + ".pristine" }

// ensureIcebergLake synthesises the Iceberg lake of the Parquet lake dir
// unless a finished generation left it (fresh false): the Parquet lake
// hard-linked (its compacted day files, raw archive, ledger and events
// state), each day's file of each table registered by one Iceberg append
// (iceberg.Warehouse.Append, as a replay commits a day; manifests merged
// as every append merges them), oldest day first, then every snapshot
// but the current one expired and the files no snapshot references
// deleted (iceberg.Warehouse.Expire with no retention), and the compacted
// days' mark set to today (every closed day compacted).
//
// What a year of `run --compact` leaves differs in the snapshot log: its
// last 7 days' snapshots (an append every 5 minutes and a compaction a
// day, about 2,000 a table) stay until they are 7 days old; the
// generator's commits are all minutes old, so it expires them all to
// leave a lake of any age the same log (the one current snapshot).
func ensureIcebergLake(ctx context.Context, dir string) (bool, error) {
	if !*icebergYear {
		return false, nil
	}
	live, pristine := icebergDir(dir), pristineDir(dir)
	if _, err := os.Stat(filepath.Join(pristine, genMarker)); err == nil {
		progress("reusing %s", pristine)
		return false, nil
	}
	progress("synthesising the Iceberg lake %s", live)
	start := time.Now()
	os.RemoveAll(pristine)
	if err := hardCopy(ctx, dir, live); err != nil {
		return false, err
	}
	if err := asIceberg(live); err != nil {
		return false, err
	}
	days, err := registerIceberg(ctx, storage.NewLocal(live), live)
	if err != nil {
		return false, err
	}
	if err := hardCopy(ctx, live, pristine); err != nil {
		return false, err
	}
	b, _ := json.Marshal(map[string]any{"days": days, "seconds": time.Since(start).Seconds()})
	return true, os.WriteFile(filepath.Join(pristine, genMarker), append(b, '\n'), 0o644)
}

// asIceberg records the Parquet lake copy live's format as Iceberg,
// as `optlake lake convert --to iceberg` leaves it (a lake with a ledger
// and no record is parquet), and removes the generator's marker.
func asIceberg(live string) error {
	for _, f := range []string{genMarker, lake.FormatName} {
		if err := os.Remove(filepath.Join(live, f)); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(live, lake.FormatName), []byte(string(lake.Iceberg)+"\n"), 0o644)
}

// registerIceberg makes the hive lake in the data directory st (its files
// listed from src, the same lake on disk) an Iceberg lake, as
// ensureIcebergLake says: each day's file of each table registered by one
// append, oldest day first, every snapshot but the current one expired,
// and the compacted days' mark set to today. It returns the days.
func registerIceberg(ctx context.Context, st storage.Store, src string) (int, error) {
	start := time.Now()
	wh := iceberg.New(st, nil)
	defer wh.Close()
	days, err := filepath.Glob(filepath.Join(src, schema.Instruments.Name, "date=*"))
	if err != nil {
		return 0, err
	}
	sort.Strings(days)
	for i, d := range days {
		day := filepath.Base(d)
		for _, t := range []*schema.Table{schema.Instruments, schema.InstrumentEvents} {
			files, err := filepath.Glob(filepath.Join(src, t.Name, day, "*.parquet"))
			if err != nil {
				return 0, err
			}
			if len(files) == 0 {
				continue
			}
			names := make([]string, len(files))
			for k, f := range files {
				names[k] = t.Name + "/" + day + "/" + filepath.Base(f)
			}
			if _, err := wh.Append(ctx, t, names, map[string]string{"optlake.year-bench": "a compacted day"}, iceberg.Fresh()); err != nil {
				return 0, fmt.Errorf("iceberg %s %s: %w", t.Name, day, err)
			}
		}
		if (i+1)%30 == 0 || i == len(days)-1 {
			progress("iceberg: %d/%d days registered, %.0f s", i+1, len(days), time.Since(start).Seconds())
		}
	}
	if _, err := wh.Expire(ctx, nil, 0, 0); err != nil {
		return 0, err
	}
	// Every closed day compacted, as the last run --compact leaves it.
	today := time.Now().UTC().Format(time.DateOnly)
	if err := (tableformat.Mark{St: st}).Closed(ctx, today); err != nil {
		return 0, err
	}
	return len(days), nil
}

// restoreIceberg makes the Iceberg lake of dir the generated one again
// (a hard-linked copy: a committed file never changes in place).
func restoreIceberg(ctx context.Context, dir string) (string, error) {
	live := icebergDir(dir)
	if err := hardCopy(ctx, pristineDir(dir), live); err != nil {
		return "", err
	}
	return live, os.Remove(filepath.Join(live, genMarker))
}

// measureIceberg times the Iceberg lakes' rows (Report.Rows keys iceDay1
// and iceDayN) and records their newest metadata.json's and manifest
// list's bytes (Report.Bytes), as generated and after the next runs.
func measureIceberg(ctx context.Context, bin string, sims map[string]string, day1, dayN string, cfg config, rep *Report) error {
	if !*icebergYear {
		return nil
	}
	today := time.Now().UTC().Truncate(24 * time.Hour)
	for _, l := range []struct{ key, dir, sim string }{{iceDay1, day1, sims["day1"]}, {iceDayN, dayN, sims["dayN"]}} {
		progress("the Iceberg rows of %s", icebergDir(l.dir))
		live, err := restoreIceberg(ctx, l.dir)
		if err != nil {
			return err
		}
		if err := icebergMetaBytes(live, l.key+" generated", rep); err != nil {
			return err
		}
		for _, c := range []struct {
			row  string
			args []string
		}{
			{"status", []string{"status", "--data-dir", live}},
			{"history NAME", []string{"history", "BTC-PERPETUAL", "--data-dir", live, "--format", "csv"}},
			{"schema", []string{"schema", "--data-dir", live}},
		} {
			for r := range cfg.runs {
				p, err := timed(ctx, bin, c.args...)
				if err != nil {
					return err
				}
				keep(rep, c.row, l.key, p, r == 0)
			}
		}
		if err := measureQueries(ctx, l.key, live, true, cfg, rep); err != nil {
			return err
		}
		for r := range cfg.runs {
			if live, err = restoreIceberg(ctx, l.dir); err != nil {
				return err
			}
			if err := lastSweptYesterday(live); err != nil {
				return err
			}
			args := []string{"run", "--api-url", "http://" + l.sim, "--data-dir", live, "--endpoints", "instruments",
				"--source", source, "--compact", "--log-level", "warn"}
			for _, name := range icebergRowNames[:2] {
				p, err := timed(ctx, bin, args...)
				if err != nil {
					return err
				}
				keep(rep, name, l.key, p, r == 0)
			}
			if r == 0 {
				if err := icebergMetaBytes(live, l.key+" after 2 runs", rep); err != nil {
					return err
				}
			}
		}
		for r := range cfg.runs {
			if live, err = restoreIceberg(ctx, l.dir); err != nil {
				return err
			}
			p, err := expireInProcess(ctx, live)
			if err != nil {
				return err
			}
			keep(rep, icebergRowNames[6], l.key, p, r == 0)
		}
		// compact of one day: today's per-snapshot files appended to the
		// table (one commit, as a replay's day), then compacted.
		for r := range cfg.runs {
			if live, err = restoreIceberg(ctx, l.dir); err != nil {
				return err
			}
			if err := appendOpenDay(ctx, live, openDayDir(dayN, cfg)); err != nil {
				return err
			}
			p, err := timed(ctx, bin, "compact", "--data-dir", live, "--from", today.Format(time.DateOnly),
				"--to", today.AddDate(0, 0, 1).Format(time.DateOnly), "--tables", "instruments")
			if err != nil {
				return err
			}
			keep(rep, "compact (one day of per-snapshot files)", l.key, p, r == 0)
		}
		os.RemoveAll(live)
	}
	return nil
}

// appendOpenDay links today's per-snapshot instruments files from open
// into the Iceberg lake live and appends them to its table in one commit.
func appendOpenDay(ctx context.Context, live, open string) error {
	part := filepath.Join(schema.Instruments.Name, "date="+time.Now().UTC().Format(time.DateOnly))
	if out, err := exec.CommandContext(ctx, "cp", "-al", "--no-target-directory", filepath.Join(open, part), filepath.Join(live, part)).CombinedOutput(); err != nil {
		return fmt.Errorf("copy open day: %v %s", err, out)
	}
	files, err := filepath.Glob(filepath.Join(live, part, "*.parquet"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("open day: no files in %s (%v)", part, err)
	}
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = filepath.ToSlash(filepath.Join(part, filepath.Base(f)))
	}
	wh := iceberg.New(storage.NewLocal(live), nil)
	defer wh.Close()
	_, err = wh.Append(ctx, schema.Instruments, names, map[string]string{"optlake.year-bench": "the open day"}, iceberg.Fresh())
	return err
}

// expireInProcess times the lake's expiry with run --compact's defaults
// (iceberg.Warehouse.Expire) in this process: wall and CPU, no peak RSS.
func expireInProcess(ctx context.Context, live string) (Proc, error) {
	wh := iceberg.New(storage.NewLocal(live), nil)
	defer wh.Close()
	var before, after syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	start := time.Now()
	_, err := wh.Expire(ctx, nil, 7*24*time.Hour, time.Hour)
	p := Proc{Wall: time.Since(start).Seconds()}
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	p.CPU = float64(after.Utime.Nano()+after.Stime.Nano()-before.Utime.Nano()-before.Stime.Nano()) / 1e9
	return p, err
}

// icebergMetaBytes records the instruments table's newest metadata.json's
// bytes, its snapshots, and its current manifest list's bytes under
// "KEY metadata.json", "KEY snapshots" and "KEY manifest list".
func icebergMetaBytes(live, key string, rep *Report) error {
	dir := filepath.Join(live, schema.Instruments.Name, "metadata")
	newest, _, err := iceberg.NewestMetadataFile(dir)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(newest)
	if err != nil {
		return err
	}
	var m struct {
		Current   int64 `json:"current-snapshot-id"`
		Snapshots []struct {
			ID   int64  `json:"snapshot-id"`
			List string `json:"manifest-list"`
		} `json:"snapshots"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("%s: %w", newest, err)
	}
	if rep.Bytes == nil {
		rep.Bytes = map[string]int64{}
	}
	rep.Bytes[key+" metadata.json"] = int64(len(b))
	rep.Bytes[key+" snapshots"] = int64(len(m.Snapshots))
	for _, s := range m.Snapshots {
		if s.ID != m.Current {
			continue
		}
		fi, err := os.Stat(filepath.Join(dir, filepath.Base(s.List)))
		if err != nil {
			return err
		}
		rep.Bytes[key+" manifest list"] = fi.Size()
	}
	return nil
}

func printIceberg(r Report) {
	if _, ok := r.Rows["status"][iceDayN]; !ok {
		return
	}
	fmt.Printf("### The Iceberg lakes (the same days' files, registered a day at a time)\n\n")
	fmt.Printf("| command | day 1 wall s | day %d wall s | ratio | day 1 CPU s | day %d CPU s | ratio | day 1 RSS MiB | day %d RSS MiB |\n", r.Days, r.Days, r.Days)
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, row := range icebergRowNames {
		a, ok := r.Rows[row][iceDay1]
		if !ok {
			continue // not measured (-no-duckdb: no chDB)
		}
		b := r.Rows[row][iceDayN]
		fmt.Printf("| %s | %.3f | %.3f | %.2f× | %.3f | %.3f | %.2f× | %.1f | %.1f |\n", row, a.Wall, b.Wall, b.Wall/a.Wall, a.CPU, b.CPU, b.CPU/a.CPU,
			float64(a.PeakRSS)/(1<<20), float64(b.PeakRSS)/(1<<20))
	}
	fmt.Printf("\n| instruments table | day 1 metadata.json | day %d metadata.json | day 1 manifest list | day %d manifest list |\n|---|---|---|---|---|\n", r.Days, r.Days)
	for _, when := range []string{"generated", "after 2 runs"} {
		k1, kN := iceDay1+" "+when+" ", iceDayN+" "+when+" "
		fmt.Printf("| %s | %d B (%d snapshots) | %d B (%d snapshots) | %d B | %d B |\n", when,
			r.Bytes[k1+"metadata.json"], r.Bytes[k1+"snapshots"], r.Bytes[kN+"metadata.json"], r.Bytes[kN+"snapshots"],
			r.Bytes[k1+"manifest list"], r.Bytes[kN+"manifest list"])
	}
	fmt.Println()
}
