package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/optlake/optlake/internal/testenv"
)

// bucketRows are the commands timed with the lake on a bucket (versitygw
// serving a hard-linked copy of it, through a proxy that counts the
// requests): the next run --compact (the first of the UTC day and a later
// one), status, history NAME and schema. Each row also keeps the requests
// the command sent and the CPU versitygw spent answering them.
var bucketRows = []string{"versitygw: run (first of the UTC day)", "versitygw: run (next)", "versitygw: status", "versitygw: history NAME", "versitygw: schema"}

// measureBucket times bucketRows on each lake, its runs against the
// venue of sims (by the lake's key). Without versitygw
// (scripts/deps.sh) they are left out.
func measureBucket(ctx context.Context, bin string, sims map[string]string, day1, dayN, inst string, cfg config, rep *Report) error {
	gw, err := testenv.VersityGWBin()
	if err != nil {
		progress("no versitygw (%v): no bucket rows", err)
		return nil
	}
	for _, l := range []struct{ key, dir string }{{"day1", day1}, {"dayN", dayN}} {
		if err := timeBucketRows(ctx, gw, bin, sims[l.key], l.key, l.dir, inst, bucketRows, cfg, rep); err != nil {
			return err
		}
	}
	return nil
}

// timeBucketRows times rows (the first and next run, status, history
// NAME, schema) on the lake dir served by versitygw, under key.
func timeBucketRows(ctx context.Context, gw, bin, sim, key, dir, inst string, rows []string, cfg config, rep *Report) error {
	progress("bucket rows on %s", dir)
	// Runs change the lake: each pair of runs has its own copy.
	for r := range cfg.runs {
		b, err := startBucket(ctx, gw, dir, lastSweptYesterday)
		if err != nil {
			return err
		}
		for _, row := range rows[:2] {
			p, err := b.timed(ctx, bin, "run", "--api-url", "http://"+sim, "--data-dir", b.url, "--endpoints", "instruments",
				"--source", source, "--compact", "--log-level", "warn")
			if err != nil {
				b.stop()
				return err
			}
			keep(rep, row, key, p, r == 0)
		}
		b.stop()
	}
	b, err := startBucket(ctx, gw, dir, nil)
	if err != nil {
		return err
	}
	defer b.stop()
	for i, args := range [][]string{{"status"}, {"history", inst, "--format", "csv"}, {"schema"}} {
		for r := range cfg.runs {
			p, err := b.timed(ctx, bin, append(args, "--data-dir", b.url)...)
			if err != nil {
				return err
			}
			keep(rep, rows[2+i], key, p, r == 0)
		}
	}
	return nil
}

// bucket is a versitygw serving a copy of a lake as the bucket "lake",
// behind a request counter.
type bucket struct {
	url  string
	dir  string // the bucket's folder
	pid  int
	reqs *testenv.RequestCounter
	stop func()
}

// startBucket serves a hard-linked copy of dir, prepared by prep (nil:
// as it is).
func startBucket(ctx context.Context, gw, dir string, prep func(string) error) (*bucket, error) {
	base := dir + ".versitygw"
	os.RemoveAll(base)
	lake := filepath.Join(base, "data", "lake")
	if err := os.MkdirAll(filepath.Dir(lake), 0o755); err != nil {
		return nil, err
	}
	if err := hardCopy(ctx, dir, lake); err != nil {
		return nil, err
	}
	if prep != nil {
		if err := prep(lake); err != nil {
			os.RemoveAll(base)
			return nil, err
		}
	}
	addr, pid, stopGW, err := startGW(ctx, gw, base)
	if err != nil {
		return nil, err
	}
	reqs, err := testenv.NewRequestCounter("http://" + addr)
	if err != nil {
		stopGW()
		return nil, err
	}
	return &bucket{
		url:  reqs.URL("lake", ""),
		dir:  lake,
		pid:  pid,
		reqs: reqs,
		stop: func() { reqs.Close(); stopGW() },
	}, nil
}

// timed is timed with the requests the command sent and versitygw's CPU
// meanwhile.
func (b *bucket) timed(ctx context.Context, bin string, args ...string) (Proc, error) {
	b.reqs.Reset()
	if requestLog != nil {
		fmt.Fprintf(requestLog, "# %s\n", strings.Join(args, " "))
		b.reqs.Log(func(method, uri string) { fmt.Fprintf(requestLog, "%s %s\n", method, uri) })
		defer b.reqs.Log(nil)
	}
	cpu0 := procCPU(b.pid)
	p, err := timed(ctx, bin, args...)
	p.ServerCPU = procCPU(b.pid) - cpu0
	for _, n := range b.reqs.Reset() {
		p.Requests += n
	}
	return p, err
}

// requestLog, when set (-bucket-requests), gets every request a timed
// command sends to the bucket, after a line naming the command.
var requestLog io.Writer

// procCPU is the user and system CPU seconds of process pid so far (0
// when /proc cannot say).
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command's name (which may hold spaces): state is
	// the 3rd field of the line, utime and stime the 14th and 15th.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / clockTicks
}

// clockTicks is Linux's USER_HZ, the unit of /proc's CPU times.
const clockTicks = 100

func printBucket(r Report) {
	if _, ok := r.Rows[bucketRows[0]]; ok {
		fmt.Printf("### The lake on a bucket (versitygw)\n\n")
		printBucketRows(r, bucketRows)
	}
	printIcebergBucket(r)
}

// printBucketRows prints the table of rows timed on a bucket.
func printBucketRows(r Report, rows []string) {
	fmt.Printf("| command | day 1 wall s | day %d wall s | ratio | day 1 CPU s | day %d CPU s | ratio | day 1 RSS MiB | day %d RSS MiB | requests day 1 / day %d | versitygw CPU s day 1 / day %d |\n", r.Days, r.Days, r.Days, r.Days, r.Days)
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, row := range rows {
		a, b := r.Rows[row]["day1"], r.Rows[row]["dayN"]
		fmt.Printf("| %s | %.3f | %.3f | %.2f× | %.3f | %.3f | %.2f× | %.1f | %.1f | %d / %d | %.2f / %.2f |\n", row, a.Wall, b.Wall, b.Wall/a.Wall, a.CPU, b.CPU, b.CPU/a.CPU,
			float64(a.PeakRSS)/(1<<20), float64(b.PeakRSS)/(1<<20), a.Requests, b.Requests, a.ServerCPU, b.ServerCPU)
	}
	fmt.Println()
}
