// Command optlake-bench is optlake's benchmark (`make bench`): it generates
// listings with the simulator, measures optlake's instrument path stage by
// stage — each optlake measurement in a subprocess of its own, for its peak
// RSS — and, in the same run on the same files, the references: DuckDB
// (via node and @duckdb/node-api from tools/duckdb) converting the JSON to
// zstd Parquet, and clickhouse-client ingesting the same rows as TSV and
// Native into a real clickhouse-server. It prints one markdown table with
// every optlake figure as a ratio to its reference.
//
//	go run ./bench/cmd/optlake-bench [-sizes 100k,1m] [-skip duckdb,clickhouse,e2e] [-keep DIR] [-json FILE] [-runs N]
//
// Progress goes to stderr, the report to stdout.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/optlake/optlake/bench"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == childCmd {
		os.Exit(child(os.Args[2:]))
	}
	os.Exit(parent())
}

// parts that -skip can name.
var skippable = []string{"decode", "simdjson", "parquet", "parquet1", "duckdb", "clickhouse", "e2e", "paged", "replay", "bounds", "iceberg"}

type config struct {
	sizes     []int
	skip      map[string]bool
	keep      string
	jsonOut   string
	runs      int
	repo      string
	batchRows int
	profile   string
	snapshots int
}

func parent() int {
	var cfg config
	sizes := flag.String("sizes", "100k,1m", "listing sizes (instruments), comma separated: 100k, 1m, 250000 …; each gets 200 per outer group, the largest also 3 huge groups")
	skip := flag.String("skip", "", "parts to skip, comma separated: "+strings.Join(skippable, ", ")+" (parquet1 = the GOMAXPROCS=1 JSON→Parquet run; bounds = the run's and the replay's stages measured alone)")
	flag.StringVar(&cfg.keep, "keep", "", "keep the generated files (listings, outputs, ClickHouse data) in this directory instead of a temp dir removed at exit")
	flag.StringVar(&cfg.jsonOut, "json", "", "also write the report as JSON to this file")
	flag.IntVar(&cfg.runs, "runs", 2, "runs of each timed measurement (the fastest is reported; peak RSS is the highest seen)")
	flag.StringVar(&cfg.repo, "repo", "", "optlake repository root (default: found from the working directory)")
	flag.StringVar(&cfg.profile, "profile", "", "write a CPU profile of every optlake measurement into this directory (pprof)")
	flag.IntVar(&cfg.snapshots, "snapshots", 150, "snapshots of the realistic listing taken (one `optlake run` each) and replayed")
	flag.IntVar(&cfg.batchRows, "batch-rows", 0, "rows per Arrow record batch for the optlake measurements (0: optlake's default)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: optlake-bench [flags]\n\nMeasures optlake's instrument path against DuckDB and clickhouse-client on the same listings, in one run.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	var err error
	if cfg.sizes, err = parseSizes(*sizes); err != nil {
		return usage(err)
	}
	cfg.skip = map[string]bool{}
	for _, s := range splitComma(*skip) {
		if !contains(skippable, s) {
			return usage(fmt.Errorf("-skip: unknown part %q (one of %s)", s, strings.Join(skippable, ", ")))
		}
		cfg.skip[s] = true
	}
	if cfg.runs < 1 {
		return usage(errors.New("-runs must be at least 1"))
	}
	if cfg.repo == "" {
		if cfg.repo, err = findRepo(); err != nil {
			return usage(err)
		}
	}
	if cfg.profile != "" {
		if cfg.profile, err = filepath.Abs(cfg.profile); err == nil {
			err = os.MkdirAll(cfg.profile, 0o755)
		}
		if err != nil {
			return usage(fmt.Errorf("-profile: %w", err))
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := runBench(ctx, cfg)
	if rep != nil {
		fmt.Print(rep.Markdown())
		if cfg.jsonOut != "" {
			if werr := writeJSON(cfg.jsonOut, rep); werr != nil && err == nil {
				err = werr
			}
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "optlake-bench: %v\n", err)
		return 1
	}
	return 0
}

func usage(err error) int {
	fmt.Fprintf(os.Stderr, "optlake-bench: %v\n", err)
	return 2
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func splitComma(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.ToLower(strings.TrimSpace(p)); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// parseSizes parses "100k,1m,250000" into ascending, distinct sizes.
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, p := range splitComma(s) {
		mult := 1
		switch {
		case strings.HasSuffix(p, "k"):
			mult, p = 1_000, strings.TrimSuffix(p, "k")
		case strings.HasSuffix(p, "m"):
			mult, p = 1_000_000, strings.TrimSuffix(p, "m")
		}
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || f <= 0 {
			return nil, fmt.Errorf("-sizes: bad size %q", p)
		}
		n := int(f * float64(mult))
		if !containsInt(out, n) {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("-sizes: no size given")
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out, nil
}

func containsInt(list []int, n int) bool {
	for _, x := range list {
		if x == n {
			return true
		}
	}
	return false
}

// sizeLabel renders 100000 as "100k" and 1000000 as "1m".
func sizeLabel(n int) string {
	switch {
	case n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "m"
	case n%1_000 == 0:
		return strconv.Itoa(n/1_000) + "k"
	}
	return strconv.Itoa(n)
}

// findRepo walks up from the working directory to optlake's go.mod.
func findRepo() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/optlake/optlake\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the optlake repository (pass -repo)")
		}
		dir = parent
	}
}

// ---- the run ---------------------------------------------------------------------

// Listing is one generated listing file.
type Listing struct {
	Label        string  `json:"label"` // "1m/g200"
	Instruments  int     `json:"instruments"`
	GroupSize    int     `json:"group_size"`
	Groups       int     `json:"groups"`
	Path         string  `json:"path"`
	Bytes        int64   `json:"bytes"`
	GenerateSecs float64 `json:"generate_seconds"`
	// Huge is the 3-huge-groups shape.
	Huge bool `json:"huge"`
}

type benchRun struct {
	// runProfiles: `optlake run` has --cpuprofile (used with -profile).
	runProfiles bool
	cfg         config
	work        string
	start       time.Time
	rep         *Report
}

func (b *benchRun) progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(b.start).Seconds(), fmt.Sprintf(format, args...))
}

func runBench(ctx context.Context, cfg config) (*Report, error) {
	b := &benchRun{cfg: cfg, start: time.Now()}
	b.rep = &Report{Started: b.start.UTC(), Machine: machineInfo(), Sizes: cfg.sizes, Runs: cfg.runs}
	for _, s := range skippable {
		if cfg.skip[s] {
			b.rep.Skipped = append(b.rep.Skipped, s)
		}
	}
	if cfg.keep != "" {
		if err := os.MkdirAll(cfg.keep, 0o755); err != nil {
			return nil, err
		}
		b.work, _ = filepath.Abs(cfg.keep)
	} else {
		dir, err := os.MkdirTemp("", "optlake-bench-")
		if err != nil {
			return nil, err
		}
		b.work = dir
		defer os.RemoveAll(dir)
	}
	b.progress("working in %s (repo %s; %d run(s) per measurement)", b.work, cfg.repo, cfg.runs)
	err := b.all(ctx)
	b.rep.Machine.LoadAvgEnd = loadAvg()
	b.rep.TookSeconds = time.Since(b.start).Seconds()
	b.progress("done in %s", time.Since(b.start).Round(time.Second))
	return b.rep, err
}

func (b *benchRun) all(ctx context.Context) error {
	var optlakeBin string
	if !b.cfg.skip["e2e"] || !b.cfg.skip["paged"] || !b.cfg.skip["replay"] || !b.cfg.skip["iceberg"] {
		optlakeBin = filepath.Join(b.work, "optlake")
		b.progress("building %s", optlakeBin)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", optlakeBin, "./cmd/optlake")
		cmd.Dir = b.cfg.repo
		if _, err := runProc(ctx, cmd, ""); err != nil {
			b.fail("e2e", fmt.Errorf("build optlake: %w", err))
			optlakeBin = ""
		} else if out, err := exec.CommandContext(ctx, optlakeBin, "run", "--help").CombinedOutput(); err == nil {
			b.runProfiles = strings.Contains(string(out), "--cpuprofile")
		}
	}
	if err := b.generate(); err != nil {
		return err
	}
	for _, l := range b.rep.Listings {
		if err := b.fileStages(ctx, l); err != nil {
			return err
		}
	}
	if !b.cfg.skip["clickhouse"] {
		if err := b.clickhouse(ctx); err != nil {
			b.fail("clickhouse", err)
		}
	}
	if optlakeBin != "" {
		for _, l := range b.rep.Listings {
			if b.cfg.skip["e2e"] {
				break
			}
			if err := b.e2e(ctx, optlakeBin, l); err != nil {
				b.fail("e2e "+l.Label, err)
			}
		}
		for _, l := range b.rep.Listings {
			if b.cfg.skip["iceberg"] || l.Huge {
				continue
			}
			if err := b.iceberg(ctx, optlakeBin, l); err != nil {
				b.fail("iceberg "+l.Label, err)
			}
		}
		if !b.cfg.skip["paged"] {
			if err := b.paged(ctx, optlakeBin); err != nil {
				b.fail("paged", err)
			}
		}
		if !b.cfg.skip["replay"] {
			if err := b.replayPart(ctx, optlakeBin); err != nil {
				b.fail("replay", err)
			}
		}
	}
	if len(b.rep.Errors) > 0 {
		return fmt.Errorf("%d part(s) failed: %s", len(b.rep.Errors), strings.Join(b.rep.Errors, "; "))
	}
	return nil
}

// fail records a part that failed; the other parts still run and the
// report says what is missing.
func (b *benchRun) fail(part string, err error) {
	msg := part + ": " + strings.Join(strings.Fields(err.Error()), " ")
	b.rep.Errors = append(b.rep.Errors, msg)
	b.progress("FAILED %s", msg)
}

// generate writes every listing: each size with 200 instruments per outer
// group, and the largest size also in 3 huge groups.
func (b *benchRun) generate() error {
	type spec struct {
		n, group int
		huge     bool
	}
	var specs []spec
	for _, n := range b.cfg.sizes {
		specs = append(specs, spec{n, 200, false})
	}
	largest := b.cfg.sizes[len(b.cfg.sizes)-1]
	specs = append(specs, spec{largest, (largest + 2) / 3, true})
	for _, s := range specs {
		label := fmt.Sprintf("%s/g%d", sizeLabel(s.n), s.group)
		if s.huge {
			label = sizeLabel(s.n) + "/3 groups"
		}
		name := fmt.Sprintf("instruments-%d-g%d.json", s.n, s.group)
		path := filepath.Join(b.work, name)
		start := time.Now()
		size, err := bench.GenerateListing(path, s.n, s.group)
		if err != nil {
			return fmt.Errorf("generate %s: %w", label, err)
		}
		l := Listing{Label: label, Instruments: s.n, GroupSize: s.group, Groups: (s.n + s.group - 1) / s.group,
			Path: path, Bytes: size, GenerateSecs: time.Since(start).Seconds(), Huge: s.huge}
		b.rep.Listings = append(b.rep.Listings, l)
		b.progress("generated %s: %s in %.1fs (%s)", label, mib(size), l.GenerateSecs, name)
	}
	return nil
}

// fileStages measures, on one listing file: optlake decode, JSON → Parquet
// (default GOMAXPROCS and GOMAXPROCS=1), and DuckDB at threads 1 and 2. The
// runs are interleaved (run 1 of everything, then run 2, …) so that a busy
// neighbour on the machine weighs on optlake and the references alike.
func (b *benchRun) fileStages(ctx context.Context, l Listing) error {
	type stage struct {
		key, what, tool string
		run             func(i int) (bench.Result, error)
		m               *Measurement
	}
	var stages []*stage
	optlakeStage := func(key, what, mode string, env []string, extra func(i int) []string) {
		stages = append(stages, &stage{key: key, what: what, tool: "optlake", run: func(i int) (bench.Result, error) {
			args := []string{"-file", l.Path}
			if b.cfg.batchRows > 0 {
				args = append(args, "-batch-rows", strconv.Itoa(b.cfg.batchRows))
			}
			if b.cfg.profile != "" {
				args = append(args, "-cpuprofile", b.profilePath(key, l.Label, i))
			}
			if extra != nil {
				args = append(args, extra(i)...)
			}
			out, err := measureChild(ctx, env, mode, args...)
			return out.Main, err
		}})
	}
	if !b.cfg.skip["decode"] {
		optlakeStage("decode", "optlake decode+flatten", "decode", nil, nil)
	}
	if !b.cfg.skip["simdjson"] {
		stages = append(stages, &stage{key: "simdjson", what: "simdjson-go tape parse (warm)", tool: "simdjson-go", run: func(int) (bench.Result, error) {
			out, err := measureChild(ctx, nil, "simdjson", "-file", l.Path)
			return out.Main, err
		}})
	}
	pqOut := filepath.Join(b.work, "parquet-out")
	pqArgs := func(int) []string {
		os.RemoveAll(pqOut)
		return []string{"-out", pqOut}
	}
	if !b.cfg.skip["parquet"] {
		optlakeStage("parquet", "optlake JSON→Parquet", "parquet", nil, pqArgs)
		if !b.cfg.skip["parquet1"] {
			optlakeStage("parquet1", "optlake JSON→Parquet GOMAXPROCS=1", "parquet", []string{"GOMAXPROCS=1"}, pqArgs)
		}
	}
	if !b.cfg.skip["bounds"] {
		// The run's other stages alone (see Report.bounds).
		boundsOut := filepath.Join(b.work, "bounds-out")
		boundsArgs := func(int) []string {
			os.RemoveAll(boundsOut)
			return []string{"-out", boundsOut}
		}
		optlakeStage("archive", "optlake raw archive alone", "archive", nil, boundsArgs)
		optlakeStage("events", "optlake events alone", "events", nil, boundsArgs)
	}
	if !b.cfg.skip["duckdb"] {
		for _, threads := range []int{1, 2} {
			stages = append(stages, &stage{key: fmt.Sprintf("duckdb_t%d", threads), what: fmt.Sprintf("DuckDB threads=%d", threads), tool: "duckdb",
				run: func(int) (bench.Result, error) {
					res, version, err := b.duckdb(ctx, l, threads)
					if err == nil {
						b.rep.Machine.DuckDB = version
					}
					return res, err
				}})
		}
	}
	for _, st := range stages {
		st.m = b.rep.add(st.key, l.Label, st.tool)
	}
	for i := range b.cfg.runs {
		for _, st := range stages {
			if st.m.failed {
				continue
			}
			res, err := st.run(i)
			if err != nil {
				if st.tool == "optlake" {
					return fmt.Errorf("%s %s: %w", st.what, l.Label, err)
				}
				st.m.failed = true
				b.fail(st.what+" "+l.Label, err)
				continue
			}
			st.m.Runs = append(st.m.Runs, res)
			msg := fmt.Sprintf("%s %s run %d: %s, CPU %.2fs", st.what, l.Label, i+1, rate(res), res.CPUSeconds)
			if st.key == "events" {
				msg += fmt.Sprintf(" (events alone %.2fs)", res.WorkCPUSeconds)
			} else if st.key != "decode" && st.key != "simdjson" && st.key != "archive" {
				msg += fmt.Sprintf(", peak RSS %s, %s of Parquet", mib(res.PeakRSS), mib(res.OutBytes))
			}
			b.progress("%s", msg)
		}
	}
	if b.cfg.keep == "" {
		os.RemoveAll(pqOut)
	}
	for _, st := range stages {
		st.m.finish()
	}
	return nil
}

// profilePath names the CPU profile of one optlake measurement.
func (b *benchRun) profilePath(key, listing string, run int) string {
	slug := strings.NewReplacer("/", "-", " ", "").Replace(listing)
	return filepath.Join(b.cfg.profile, fmt.Sprintf("%s-%s-r%d.pprof", key, slug, run+1))
}

// duckdb runs tools/duckdb/bench.mjs on the listing.
func (b *benchRun) duckdb(ctx context.Context, l Listing, threads int) (bench.Result, string, error) {
	maxObject := ""
	if l.Huge {
		// One outer element is a whole third of the listing.
		maxObject = strconv.FormatInt(max(l.Bytes, 16<<20), 10)
	}
	return b.duckdbJSON(ctx, l.Path, int64(l.Instruments), l.Bytes, threads, maxObject)
}

func rate(r bench.Result) string {
	return fmt.Sprintf("%d rows in %.2fs = %s rows/s, %.0f MB/s", r.Rows, r.Seconds, thousands(r.RowsPerSec()), r.MBPerSec())
}

// ---- machine info ----------------------------------------------------------------

// Machine describes where the benchmark ran.
type Machine struct {
	NProc        int     `json:"nproc"`
	CPU          string  `json:"cpu"`
	MemTotal     int64   `json:"mem_total"`
	Kernel       string  `json:"kernel"`
	Go           string  `json:"go"`
	Node         string  `json:"node,omitempty"`
	ClickHouse   string  `json:"clickhouse,omitempty"`
	DuckDB       string  `json:"duckdb,omitempty"`
	LoadAvgStart float64 `json:"loadavg_start"`
	LoadAvgEnd   float64 `json:"loadavg_end"`
}

func machineInfo() Machine {
	m := Machine{NProc: runtime.NumCPU(), Go: runtime.Version(), LoadAvgStart: loadAvg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				m.MemTotal = kb * 1024
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.Command("node", "--version").Output(); err == nil {
		m.Node = strings.TrimSpace(string(out))
	}
	return m
}

func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
