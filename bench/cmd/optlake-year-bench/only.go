package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/optlake/optlake/venuesim"
)

// -only measures the runs of a day (the first of the UTC day and the
// next) and the catch-up row alone, alternating the binaries of -optlake
// and -optlake-alt run by run (a shared machine's load drifts; a ratio of
// two builds within one alternation is what holds), each command's CPU
// profile kept with -profiles.
var (
	onlyRows    = flag.Bool("only-runs", false, "measure only the runs of a day and the catch-up row (both lakes), then stop")
	onlyAlt     = flag.String("optlake-alt", "", "with -only-runs: a second binary, run alternately with -optlake")
	onlyProfile = flag.String("profiles", "", "with -only-runs: write each command's CPU profile in this folder")
	onlyCompact = flag.Bool("only-compact", false, "with -only-runs: also compact of one day (today's per-snapshot files)")
	onlyStrace  = flag.Bool("strace", false, "with -only-runs and -profiles: run each command under strace -f -c (its syscall counts beside the profile; the times are strace's)")
)

// measureOnly is -only-runs: each row on day 1 and day N, -runs times,
// alternating the binaries; every measurement is printed (no fastest).
func measureOnly(ctx context.Context, bins []string, day1, dayN string, cfg config) error {
	addrs := map[string]string{}
	for dir, days := range map[string]int{day1: 1, dayN: cfg.days} {
		addr, stop, err := serveSimAfter(cfg, days)
		if err != nil {
			return err
		}
		defer stop()
		addrs[dir] = addr
	}
	if *onlyProfile != "" {
		if err := os.MkdirAll(*onlyProfile, 0o755); err != nil {
			return err
		}
	}
	bases := map[string]string{}
	for _, l := range []string{day1, dayN} {
		b, err := catchUpBase(ctx, l, cfg)
		if err != nil {
			return fmt.Errorf("catch-up lake: %w", err)
		}
		bases[l] = b
	}
	fmt.Println("| binary | lake | row | run | wall s | CPU s | RSS MiB |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for r := range cfg.runs {
		for bi, bin := range bins {
			for _, l := range []struct{ key, dir string }{{"day1", day1}, {"dayN", dayN}} {
				prof := func(row string) []string {
					if *onlyProfile == "" {
						return nil
					}
					return []string{"--cpuprofile", filepath.Join(*onlyProfile, fmt.Sprintf("%d-%s-%s-%d.pprof", bi, l.key, row, r))}
				}
				show := func(row string, p Proc) {
					fmt.Printf("| %d | %s | %s | %d | %.3f | %.3f | %.1f |\n", bi, l.key, row, r, p.Wall, p.CPU, float64(p.PeakRSS)/(1<<20))
				}
				addr := addrs[l.dir]
				cp := l.dir + ".run"
				if err := hardCopy(ctx, l.dir, cp); err != nil {
					return err
				}
				if err := lastSweptYesterday(cp); err != nil {
					return err
				}
				for _, row := range []string{"first", "next"} {
					args := []string{"run", "--api-url", "http://" + addr, "--data-dir", cp, "--endpoints", "instruments",
						"--source", source, "--compact", "--log-level", "warn"}
					p, err := traced(ctx, bin, row, l.key, bi, r, append(args, prof(row)...)...)
					if err != nil {
						return err
					}
					show(row, p)
				}
				os.RemoveAll(cp)
				cp = l.dir + ".catchup-run"
				if err := hardCopy(ctx, bases[l.dir], cp); err != nil {
					return err
				}
				if err := leavePending(ctx, cp, cfg); err != nil {
					return fmt.Errorf("pending snapshots: %w", err)
				}
				if err := lastSweptYesterday(cp); err != nil {
					return err
				}
				args := []string{"run", "--api-url", "http://" + addr, "--data-dir", cp, "--endpoints", "instruments",
					"--source", source, "--log-level", "warn"}
				p, err := traced(ctx, bin, "catchup", l.key, bi, r, append(args, prof("catchup")...)...)
				if err != nil {
					return err
				}
				show("catchup", p)
				os.RemoveAll(cp)
				if *onlyCompact {
					if p, err = compactDay(ctx, bin, l.dir, openDayDir(dayN, cfg)); err != nil {
						return err
					}
					show("compact", p)
				}
			}
		}
	}
	return nil
}

// onlyBins are the binaries -only-runs alternates.
func onlyBins(bin string) []string {
	if *onlyAlt == "" {
		return []string{bin}
	}
	return []string{bin, strings.TrimSpace(*onlyAlt)}
}

// traced is timed, under strace -c with -strace.
func traced(ctx context.Context, bin, row, key string, bi, r int, args ...string) (Proc, error) {
	if !*onlyStrace || *onlyProfile == "" {
		return timed(ctx, bin, args...)
	}
	out := filepath.Join(*onlyProfile, fmt.Sprintf("%d-%s-%s-%d.strace", bi, key, row, r))
	opts := []string{"-f", "-c"}
	if o := os.Getenv("YEAR_BENCH_STRACE"); o != "" {
		opts = strings.Fields(o) // e.g. "-f -e trace=openat": each call, not counts
	}
	return timed(ctx, "strace", append(append(opts, "-o", out, bin), args...)...)
}

// compactDay times compact of today's per-snapshot files (open: where
// ensureOpenDay wrote them) added to a copy of lake.
func compactDay(ctx context.Context, bin, lake, open string) (Proc, error) {
	today := time.Now().UTC().Truncate(24 * time.Hour)
	cp := lake + ".compact"
	defer os.RemoveAll(cp)
	part := filepath.Join("instruments", "date="+today.Format(time.DateOnly))
	if err := hardCopy(ctx, lake, cp); err != nil {
		return Proc{}, err
	}
	if err := hardCopy(ctx, filepath.Join(open, part), filepath.Join(cp, part)); err != nil {
		return Proc{}, err
	}
	return timed(ctx, bin, "compact", "--data-dir", cp, "--from", today.Format(time.DateOnly),
		"--to", today.AddDate(0, 0, 1).Format(time.DateOnly), "--tables", "instruments")
}

// serveSimAfter serves the simulated venue of a lake of days closed days,
// frozen at its next snapshot: the generator's venue (started days ago,
// a tick a snapshot) continued to today, so that the next listing differs
// from the lake's events state as much as on any day (a venue started
// today differs from a year-old one's: a first run on the year emitted
// 2,810 events against 136 on day 1).
func serveSimAfter(cfg config, days int) (string, func(), error) {
	today := time.Now().UTC().Truncate(24 * time.Hour)
	sim := venuesim.New(venuesim.Config{Seed: 1, Instruments: cfg.instruments, Start: today.AddDate(0, 0, -days), TickEvery: cfg.every})
	sim.Advance(days * int(24*time.Hour/cfg.every))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: sim.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return ln.Addr().String(), func() { srv.Close() }, nil
}
