package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/optlake/optlake/lake/iceberg"
)

var replayDays = flag.Int("replay-days", 30, "days of 5-minute snapshots the month's replay rows replay (0: no replay rows)")

// ReplayRow is one timed replay: a format, a number of snapshots.
type ReplayRow struct {
	Format    string  `json:"format"`
	Snapshots int     `json:"snapshots"`
	Rows      int64   `json:"rows"`
	RowsPerS  float64 `json:"rows_per_cpu_second"`
	Proc      Proc    `json:"proc"`
	// The instruments table's newest metadata.json (Iceberg), and the
	// snapshots it lists.
	MetadataBytes     int64 `json:"metadata_bytes,omitempty"`
	MetadataSnapshots int   `json:"metadata_snapshots,omitempty"`
}

// measureReplay times `optlake replay` of 150 snapshots and of a month
// (-replay-days) into a new lake, Parquet and Iceberg. The archive is
// forged from the lake's archived day (its 288 listings, each with its
// meta.json): snapshot k of every day is a hard link to listing k of that
// day, with its own time and run id, so a month holds 30 copies of one
// day's listings. Rows per CPU-second of the month against the 150's is
// the row's ratio.
func measureReplay(ctx context.Context, bin, work, lake string, cfg config, rep *Report) error {
	if *replayDays <= 0 {
		return nil
	}
	tmpls, err := archivedDay(lake)
	if err != nil {
		return err
	}
	perDay := int(24 * time.Hour / cfg.every)
	first := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -*replayDays)
	for _, format := range []string{"parquet", "iceberg"} {
		for _, n := range []int{150, *replayDays * perDay} {
			dir := filepath.Join(work, fmt.Sprintf("replay-%s-%d", format, n))
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
			progress("replay of %d snapshots into a %s lake (%s)", n, format, dir)
			for i := range n {
				ts := first.AddDate(0, 0, i/perDay).Add(time.Duration(i%perDay) * cfg.every)
				t := tmpls[i%perDay%len(tmpls)]
				if err := linkBody(dir, t.meta, &t.body, ts, runID(ts)); err != nil {
					return err
				}
			}
			sum := filepath.Join(work, "replay-summary.json")
			p, err := timed(ctx, bin, "replay", "--data-dir", dir, "--endpoints", "instruments", "--table-format", format,
				"--summary-json", sum, "--log-level", "warn")
			if err != nil {
				return err
			}
			row := ReplayRow{Format: format, Snapshots: n, Proc: p}
			if row.Rows, err = summaryRows(sum); err != nil {
				return err
			}
			if p.CPU > 0 {
				row.RowsPerS = float64(row.Rows) / p.CPU
			}
			if format == "iceberg" {
				row.MetadataBytes, row.MetadataSnapshots, err = newestMetadata(filepath.Join(dir, "instruments", "metadata"))
				if err != nil {
					return err
				}
			}
			rep.Replay = append(rep.Replay, row)
			if format == "iceberg" && n > 150 {
				// The README's queries over the month's Iceberg tables.
				if err := measureQueries(ctx, icebergMonth, dir, true, cfg, rep); err != nil {
					return err
				}
			}
			os.RemoveAll(dir)
		}
	}
	return nil
}

// archived is one archived listing: its metadata and its body's file.
type archived struct {
	meta archiveMeta
	body string
}

// archivedDay returns the listings of the lake's newest archived day, in
// snapshot order.
func archivedDay(lake string) ([]archived, error) {
	days, err := filepath.Glob(filepath.Join(lake, "raw", "instruments", "date=*"))
	if err != nil || len(days) == 0 {
		return nil, fmt.Errorf("no archived day in %s (%v)", lake, err)
	}
	sort.Strings(days)
	metas, err := filepath.Glob(filepath.Join(days[len(days)-1], "*.meta.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(metas)
	var out []archived
	for _, m := range metas {
		meta, body, err := readMeta(lake, m)
		if err != nil {
			return nil, err
		}
		out = append(out, archived{meta, body})
	}
	return out, nil
}

// summaryRows reads the rows a replay's --summary-json reports.
func summaryRows(name string) (int64, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return 0, err
	}
	var s struct {
		Rows int64 `json:"rows"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return s.Rows, nil
}

// newestMetadata is the size of the newest vN.metadata.json in dir and
// the snapshots it lists.
func newestMetadata(dir string) (int64, int, error) {
	newest, _, err := iceberg.NewestMetadataFile(dir)
	if err != nil {
		return 0, 0, err
	}
	b, err := os.ReadFile(newest)
	if err != nil {
		return 0, 0, err
	}
	var m struct {
		Snapshots []json.RawMessage `json:"snapshots"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return 0, 0, fmt.Errorf("%s: %w", newest, err)
	}
	return int64(len(b)), len(m.Snapshots), nil
}

// icebergMonth is the lake key of the queries over the month's Iceberg
// tables (Report.Rows).
const icebergMonth = "iceberg-month"

func printReplay(r Report) {
	if len(r.Replay) == 0 {
		return
	}
	for _, q := range readmeQueries {
		row := "ClickHouse (chDB): " + q.name
		if p, ok := r.Rows[row][icebergMonth]; ok {
			fmt.Printf("- %s over the month's Iceberg tables (icebergLocal): %.3f s wall, %.3f CPU-s, %.0f MiB\n", row, p.Wall, p.CPU, float64(p.PeakRSS)/(1<<20))
		}
	}
	fmt.Println()
	fmt.Printf("| replay into a new lake | snapshots | rows | wall s | CPU s | rows per CPU-s | vs 150 | peak RSS MiB | Iceberg metadata.json |\n")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	base := map[string]float64{}
	for _, row := range r.Replay {
		if row.Snapshots == 150 {
			base[row.Format] = row.RowsPerS
		}
		ratio := "1.00×"
		if b := base[row.Format]; b > 0 && row.Snapshots != 150 {
			ratio = fmt.Sprintf("%.2f×", row.RowsPerS/b)
		}
		meta := ""
		if row.MetadataBytes > 0 {
			meta = fmt.Sprintf("%.1f KiB, %d snapshots", float64(row.MetadataBytes)/1024, row.MetadataSnapshots)
		}
		fmt.Printf("| %s | %d | %d | %.1f | %.1f | %.0f | %s | %.0f | %s |\n", row.Format, row.Snapshots, row.Rows, row.Proc.Wall, row.Proc.CPU,
			row.RowsPerS, ratio, float64(row.Proc.PeakRSS)/(1<<20), meta)
	}
	fmt.Println()
}
