package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/optlake/optlake/bench"
)

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("1m, 100k,250000,100K")
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{100_000, 250_000, 1_000_000}; !slices.Equal(got, want) {
		t.Errorf("parseSizes = %v, want %v", got, want)
	}
	for _, bad := range []string{"", "x", "-1k", "0"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q) did not fail", bad)
		}
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[int]string{100_000: "100k", 1_000_000: "1m", 1234: "1234"} {
		if got := sizeLabel(n); got != want {
			t.Errorf("sizeLabel(%d) = %s, want %s", n, got, want)
		}
	}
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567.4: "1,234,567", -4500: "-4,500"} {
		if got := thousands(v); got != want {
			t.Errorf("thousands(%v) = %s, want %s", v, got, want)
		}
	}
}

// The bounds add up the CPU of the parts measured alone, divide it by the
// cores and set DuckDB's time against it.
func TestBounds(t *testing.T) {
	r := &Report{Machine: Machine{NProc: 2}, Listings: []Listing{{Label: "1m/g200"}}}
	add := func(key, listing string, res bench.Result) {
		m := r.add(key, listing, "x")
		m.Runs = []bench.Result{res}
		m.finish()
	}
	add("decode", "1m/g200", bench.Result{Seconds: 0.5, CPUSeconds: 0.5})
	add("parquet1", "1m/g200", bench.Result{Seconds: 1.4, CPUSeconds: 1.4})
	add("archive", "1m/g200", bench.Result{Seconds: 0.6, CPUSeconds: 0.9})
	add("events", "1m/g200", bench.Result{Seconds: 0.5, CPUSeconds: 2, WorkCPUSeconds: 0.8})
	add("e2e_first", "1m/g200", bench.Result{Rows: 1, Seconds: 2.1, CPUSeconds: 3.7})
	add("duckdb_t1", "1m/g200", bench.Result{Rows: 1, Seconds: 1.6})
	add("replay", "150 snapshots", bench.Result{Rows: 1, Seconds: 0.9, CPUSeconds: 1.5})
	add("replay_rawparquet", "150 snapshots", bench.Result{Seconds: 0.6, CPUSeconds: 1.1})
	add("duckdb_replay_t2", "150 snapshots", bench.Result{Rows: 1, Seconds: 0.4})
	out := r.bounds()
	// 0.5 + (1.4 - 0.5) + 0.9 + 0.8 = 3.1 CPU-s, 1.55 s on 2 cores; 1.6 / 1.55
	if !strings.Contains(out, "| 1m/g200 | 0.50 | 0.90 | 0.90 | 0.80 | 3.10 | 1.55s | 2.10s (3.70) | 1.60s | 1.03× | ≥ 1.5× |") {
		t.Errorf("run bounds:\n%s", out)
	}
	// 1.1 CPU-s, 0.55 s on 2 cores; 0.4 / 0.55
	if !strings.Contains(out, "| 0.60s | 1.10 | 0.55s | 0.40s | 0.73× | ≥ 1.5× |") {
		t.Errorf("replay bounds:\n%s", out)
	}
}

// The paged run gets its own row, met by its peak RSS alone.
func TestPagedRow(t *testing.T) {
	for _, tc := range []struct {
		rss int64
		met string
	}{{240 << 20, "yes"}, {300 << 20, "**no**"}} {
		r := &Report{}
		m := r.add("e2e_paged", "1m/100 pages", "optlake")
		m.Runs = []bench.Result{{Rows: 1_000_000, Seconds: 80, PeakRSS: tc.rss}}
		m.finish()
		var found bool
		for _, row := range r.rows() {
			if row.Listing == "1m/100 pages" {
				found = true
				if row.Met != tc.met || row.Target != "peak RSS ≤ 256 MiB" {
					t.Errorf("RSS %d: met %q target %q, want %q", tc.rss, row.Met, row.Target, tc.met)
				}
			}
		}
		if !found {
			t.Errorf("no row for the paged run in %+v", r.rows())
		}
	}
}
