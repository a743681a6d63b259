package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/optlake/optlake/bench"
)

// The every-5-minutes job and its replay (issue 16): an archive of
// -snapshots runs of `optlake run` against `optlake venue-sim` serving its
// realistic listing (a few thousand instruments, the state moving every
// tick), each run one process as cron starts it. Measured in the same run:
//
//   - per run (item 3): the whole process, the process start alone
//     (`optlake --version`), the run as its summary times it, the fetch of
//     the same body by a plain HTTP GET;
//   - `optlake replay --sink parquet` of the archive's raw bodies into an
//     empty data directory, against DuckDB reading the same raw files
//     (read_json of every .json.zst, unnest, TRY_CAST → one zstd Parquet);
//   - bytes of one snapshot's instruments file against DuckDB's file of
//     the same body.
type runSplit struct {
	Runs       int     `json:"runs"`
	ProcessMS  float64 `json:"process_ms"`  // median, exec to exit
	StartMS    float64 `json:"start_ms"`    // median of `optlake --version`
	RunMS      float64 `json:"run_ms"`      // median of the summary's duration
	EndpointMS float64 `json:"endpoint_ms"` // median of the instruments endpoint's duration
	FetchMS    float64 `json:"fetch_ms"`    // median of a plain GET of the listing
	// StagesMS is the median of each stage of the instruments endpoint,
	// from the run's summary (pipeline.Stage*).
	StagesMS       map[string]float64 `json:"stages_ms"`
	PeakRSS        int64              `json:"peak_rss"`     // highest
	CPUMS          float64            `json:"cpu_ms"`       // median user+sys
	RowsPerRun     int64              `json:"rows_per_run"` // median
	BodyBytes      int64              `json:"body_bytes"`   // median
	SnapshotFileB  int64              `json:"snapshot_file_bytes"`
	DuckDBSnapshot int64              `json:"duckdb_snapshot_file_bytes"`
	// DuckDBSameCols is DuckDB's file of optlake's own snapshot file
	// rewritten: the same rows and the same 32 columns (the raw body gives
	// DuckDB only the venue's 25).
	DuckDBSameCols int64 `json:"duckdb_same_columns_file_bytes"`
}

// replayPart builds the archive, measures the runs, the replay and DuckDB.
func (b *benchRun) replayPart(ctx context.Context, bin string) error {
	n := b.cfg.snapshots
	addr, stop, err := startSim(ctx, bin, "--tick", "50ms")
	if err != nil {
		return err
	}
	defer stop()
	archive := filepath.Join(b.work, "replay-archive")
	os.RemoveAll(archive)
	if b.cfg.keep == "" {
		defer os.RemoveAll(archive)
	}
	var procMS, runMS, epMS, fetchMS, cpuMS, rows, body []float64
	stages := map[string][]float64{}
	split := &runSplit{Runs: n}
	var totalRows int64
	b.progress("replay: taking %d snapshots of venue-sim's realistic listing, one `optlake run` process each", n)
	client := &http.Client{Timeout: time.Minute}
	for i := range n {
		t0 := time.Now()
		resp, err := client.Get("http://" + addr + "/v1/public/get_instruments")
		if err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fetchMS = append(fetchMS, ms(time.Since(t0)))

		sum := filepath.Join(b.work, "replay-summary.json")
		cmd := exec.CommandContext(ctx, bin, "run", "--api-url", "http://"+addr, "--data-dir", archive, "--endpoints", "instruments",
			"--sink", "parquet", "--source", "venue-sim", "--summary-json", sum, "--log-level", "warn")
		pr, err := runProc(ctx, cmd, "")
		if err != nil {
			return fmt.Errorf("run %d: %w", i+1, err)
		}
		s, err := readRunSummary(sum)
		if err != nil {
			return fmt.Errorf("run %d: %w", i+1, err)
		}
		procMS = append(procMS, ms(pr.Wall))
		cpuMS = append(cpuMS, pr.CPU*1000)
		runMS = append(runMS, float64(s.DurationMS))
		epMS = append(epMS, float64(s.endpointMS))
		rows = append(rows, float64(s.rows))
		body = append(body, float64(s.bytes))
		for k, v := range s.stages {
			stages[k] = append(stages[k], v)
		}
		split.PeakRSS = max(split.PeakRSS, pr.PeakRSS)
		totalRows += s.rows
	}
	var startMS []float64
	for range 20 {
		pr, err := runProc(ctx, exec.CommandContext(ctx, bin, "--version"), "")
		if err != nil {
			return err
		}
		startMS = append(startMS, ms(pr.Wall))
	}
	split.ProcessMS, split.StartMS, split.RunMS, split.EndpointMS = median(procMS), median(startMS), median(runMS), median(epMS)
	split.FetchMS, split.CPUMS, split.RowsPerRun, split.BodyBytes = median(fetchMS), median(cpuMS), int64(median(rows)), int64(median(body))
	split.StagesMS = map[string]float64{}
	for k, v := range stages {
		split.StagesMS[k] = median(v)
	}
	b.rep.Split = split
	b.progress("replay: a run takes %.0f ms (process start %.0f ms, run %.0f ms, fetch %.0f ms), %s peak", split.ProcessMS, split.StartMS, split.RunMS, split.FetchMS, mib(split.PeakRSS))

	label := fmt.Sprintf("%d snapshots × ~%d", n, split.RowsPerRun)
	raws, err := filepath.Glob(filepath.Join(archive, "raw", "instruments", "date=*", "*.json.zst"))
	if err != nil || len(raws) != n {
		return fmt.Errorf("archive holds %d raw listings, want %d (%v)", len(raws), n, err)
	}
	var rawBytes int64
	for _, r := range raws {
		if fi, err := os.Stat(r); err == nil {
			rawBytes += fi.Size()
		}
	}

	// optlake replay into a copy of the raw archive alone.
	m := b.rep.add("replay", label, "optlake")
	for i := range b.cfg.runs {
		dir := filepath.Join(b.work, "replay-data")
		os.RemoveAll(dir)
		if err := os.CopyFS(filepath.Join(dir, "raw"), os.DirFS(filepath.Join(archive, "raw"))); err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, bin, "replay", "--data-dir", dir, "--endpoints", "instruments", "--sink", "parquet", "--log-level", "warn")
		if b.cfg.profile != "" {
			cmd.Args = append(cmd.Args, "--cpuprofile", b.profilePath("replay", "archive", i))
		}
		pr, err := runProc(ctx, cmd, "")
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		if !strings.Contains(string(pr.Stdout), fmt.Sprintf("replayed %d snapshots", n)) {
			return fmt.Errorf("replay: unexpected output %q", pr.Stdout)
		}
		m.Runs = append(m.Runs, bench.Result{Rows: totalRows, InBytes: rawBytes, Seconds: pr.Wall.Seconds(), CPUSeconds: pr.CPU, PeakRSS: pr.PeakRSS})
		b.progress("replay run %d: %s, CPU %.2fs, peak RSS %s", i+1, rate(m.Runs[len(m.Runs)-1]), pr.CPU, mib(pr.PeakRSS))
		if i == b.cfg.runs-1 && b.cfg.keep == "" {
			os.RemoveAll(dir)
		}
	}
	m.finish()
	if !b.cfg.skip["bounds"] {
		if err := b.replayBounds(ctx, archive, raws, label); err != nil {
			return err
		}
	}

	if b.cfg.skip["duckdb"] {
		return nil
	}
	glob := filepath.Join(archive, "raw", "instruments", "date=*", "*.json.zst")
	for _, threads := range []int{1, 2} {
		dm := b.rep.add("duckdb_replay_t"+strconv.Itoa(threads), label, "duckdb")
		for i := range b.cfg.runs {
			r, version, err := b.duckdbJSON(ctx, glob, totalRows, rawBytes, threads, "")
			if err != nil {
				return fmt.Errorf("DuckDB over the raw archive: %w", err)
			}
			b.rep.Machine.DuckDB = version
			dm.Runs = append(dm.Runs, r)
			b.progress("DuckDB threads=%d over the raw archive run %d: %s", threads, i+1, rate(r))
		}
		dm.finish()
	}

	// One snapshot's file: optlake's against DuckDB's of the same body.
	files, _ := filepath.Glob(filepath.Join(archive, "instruments", "date=*", "*.parquet"))
	slices.Sort(files)
	if len(files) > 0 {
		last := files[len(files)-1]
		if fi, err := os.Stat(last); err == nil {
			split.SnapshotFileB = fi.Size()
		}
		slices.Sort(raws)
		r, _, err := b.duckdbJSON(ctx, raws[len(raws)-1], split.RowsPerRun, 0, 1, "")
		if err == nil {
			split.DuckDBSnapshot = r.OutBytes
		} else {
			b.progress("DuckDB of one snapshot: %v", err)
		}
		if n, err := b.duckdbRewrite(ctx, last); err == nil {
			split.DuckDBSameCols = n
		} else {
			b.progress("DuckDB rewriting one snapshot's file: %v", err)
		}
	}
	return nil
}

// duckdbRewrite has DuckDB (threads=1, zstd, its defaults otherwise) write
// the rows and columns of the Parquet file in to a new file, and returns
// that file's size.
func (b *benchRun) duckdbRewrite(ctx context.Context, in string) (int64, error) {
	dir := filepath.Join(b.cfg.repo, "tools", "duckdb")
	out := filepath.Join(b.work, "duckdb-rewrite.parquet")
	defer os.Remove(out)
	sql := fmt.Sprintf("SET threads = 1; COPY (SELECT * FROM read_parquet('%s', hive_partitioning = false)) TO '%s' (FORMAT parquet, COMPRESSION zstd)", in, out)
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "query.mjs"), sql)
	cmd.Dir = dir
	if _, err := runProc(ctx, cmd, ""); err != nil {
		return 0, err
	}
	fi, err := os.Stat(out)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// duckdbJSON runs tools/duckdb/bench.mjs on the JSON file(s) of glob and
// checks the row count (want < 0: any).
func (b *benchRun) duckdbJSON(ctx context.Context, glob string, want, inBytes int64, threads int, maxObject string) (bench.Result, string, error) {
	dir := filepath.Join(b.cfg.repo, "tools", "duckdb")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@duckdb", "node-api")); err != nil {
		return bench.Result{}, "", errors.New("@duckdb/node-api is not installed in tools/duckdb: run `make deps` (or skip with -skip duckdb)")
	}
	out := filepath.Join(b.work, "duckdb-replay.parquet")
	defer os.Remove(out)
	args := []string{filepath.Join(dir, "bench.mjs"), "--json", glob, "--out", out, "--columns", bench.DuckDBColumns(), "--threads", strconv.Itoa(threads)}
	if maxObject != "" {
		args = append(args, "--max-object-size", maxObject)
	}
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Dir = dir
	pr, err := runProc(ctx, cmd, "")
	if err != nil {
		return bench.Result{}, "", err
	}
	var r struct {
		Version  string  `json:"version"`
		Rows     int64   `json:"rows"`
		Seconds  float64 `json:"seconds"`
		OutBytes int64   `json:"out_bytes"`
	}
	if err := json.Unmarshal(pr.Stdout, &r); err != nil {
		return bench.Result{}, "", fmt.Errorf("bad output %q: %w", pr.Stdout, err)
	}
	if want >= 0 && r.Rows != want {
		return bench.Result{}, "", fmt.Errorf("DuckDB read %d rows, optlake %d", r.Rows, want)
	}
	return bench.Result{Rows: r.Rows, InBytes: inBytes, OutBytes: r.OutBytes, Seconds: r.Seconds, PeakRSS: pr.PeakRSS, CPUSeconds: pr.CPU}, r.Version, nil
}

// runSummary is what the bench reads of a run's --summary-json.
type runSummary struct {
	DurationMS int64 `json:"duration_ms"`
	OK         bool  `json:"ok"`
	rows       int64
	bytes      int64
	endpointMS int64
	stages     map[string]float64
}

func readRunSummary(path string) (runSummary, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return runSummary{}, err
	}
	var s struct {
		runSummary
		Error     string `json:"error"`
		Endpoints []struct {
			Endpoint   string             `json:"endpoint"`
			Rows       int64              `json:"rows"`
			Bytes      int64              `json:"bytes"`
			DurationMS int64              `json:"duration_ms"`
			Stages     map[string]float64 `json:"stages_ms"`
		} `json:"endpoints"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return runSummary{}, fmt.Errorf("run summary: %w", err)
	}
	if !s.OK {
		return runSummary{}, fmt.Errorf("run failed: %s", s.Error)
	}
	for _, e := range s.Endpoints {
		if e.Endpoint == "instruments" {
			s.rows, s.bytes, s.endpointMS, s.stages = e.Rows, e.Bytes, e.DurationMS, e.Stages
			return s.runSummary, nil
		}
	}
	return runSummary{}, errors.New("run summary has no instruments endpoint")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// replayBounds measures the parts of the replay that no implementation of
// the lake's layout can skip, each alone: decoding every raw body
// (replay_rawdecode), decoding them into one Parquet file per snapshot
// (replay_rawparquet: the replay without its events, runs and ledger), and
// the file system's share of the per-snapshot files (replay_files: two
// files per snapshot of the sizes the runs wrote, committed as the sink
// commits them, nothing encoded). As many snapshots at once as cores.
func (b *benchRun) replayBounds(ctx context.Context, archive string, raws []string, label string) error {
	rel := make([]string, len(raws))
	for i, r := range raws {
		p, err := filepath.Rel(archive, r)
		if err != nil {
			return err
		}
		rel[i] = p
	}
	slices.Sort(rel)
	var sizes []string
	for _, t := range []string{"instruments", "instrument_events"} {
		files, _ := filepath.Glob(filepath.Join(archive, t, "date=*", "*.parquet"))
		var sum int64
		for _, f := range files {
			if fi, err := os.Stat(f); err == nil {
				sum += fi.Size()
			}
		}
		if len(files) > 0 {
			sizes = append(sizes, strconv.FormatInt(sum/int64(len(files)), 10))
		}
	}
	workers := strconv.Itoa(runtime.GOMAXPROCS(0))
	out := filepath.Join(b.work, "bounds-out")
	defer os.RemoveAll(out)
	for _, part := range []struct {
		key, mode, what string
		args            []string
	}{
		{"replay_rawdecode", "rawdecode", "decode of every raw body", []string{"-archive", archive, "-files", strings.Join(rel, ",")}},
		{"replay_rawparquet", "rawparquet", "decode into one Parquet file per snapshot", []string{"-archive", archive, "-files", strings.Join(rel, ","), "-dest", out}},
		{"replay_files", "files", "the files alone", []string{"-out", out, "-n", strconv.Itoa(len(rel)), "-sizes", strings.Join(sizes, ",")}},
	} {
		m := b.rep.add(part.key, label, "optlake")
		for i := range b.cfg.runs {
			os.RemoveAll(out)
			res, err := measureChild(ctx, nil, part.mode, append(part.args, "-workers", workers)...)
			if err != nil {
				return fmt.Errorf("replay bound %s: %w", part.what, err)
			}
			m.Runs = append(m.Runs, res.Main)
			b.progress("replay bound, %s, run %d: %.2fs, CPU %.2fs", part.what, i+1, res.Main.Seconds, res.Main.CPUSeconds)
		}
		m.finish()
	}
	return nil
}
