package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"

	"github.com/optlake/optlake/bench"
	"github.com/optlake/optlake/schema"
)

// childCmd is the hidden first argument that makes the binary run one
// measurement and print its results as JSON on stdout: the parent re-execs
// itself so that each measurement has its own process and peak RSS.
const childCmd = "__measure"

// childOut is what a child prints: the measurement, and for chload the
// untimed second load into the scratch table.
type childOut struct {
	Main    bench.Result  `json:"main"`
	Decode  *bench.Result `json:"decode,omitempty"`  // chload: the pre-decode into memory
	Scratch *bench.Result `json:"scratch,omitempty"` // chload: the load into the scratch table
}

func child(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "optlake-bench: "+childCmd+" needs a mode: decode, parquet, simdjson, chload, archive, events, rawdecode, rawparquet, files")
		return 2
	}
	mode := args[0]
	fs := flag.NewFlagSet(childCmd+" "+mode, flag.ContinueOnError)
	file := fs.String("file", "", "listing JSON")
	out := fs.String("out", "", "output directory (parquet)")
	dsn := fs.String("dsn", "", "ClickHouse DSN (chload)")
	scratch := fs.String("scratch", "", "also load the rows into this table (chload; untimed)")
	batchRows := fs.Int("batch-rows", 0, "rows per record batch (0: optlake's default)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the measurement to this file")
	archiveDir := fs.String("archive", "", "data directory holding the raw archive (rawdecode, rawparquet)")
	files := fs.String("files", "", "raw bodies, comma separated, relative to -archive (rawdecode, rawparquet)")
	dest := fs.String("dest", "", "output data directory (rawparquet)")
	n := fs.Int("n", 0, "snapshots (files)")
	sizes := fs.String("sizes", "", "bytes of each snapshot's files, comma separated (files)")
	workers := fs.Int("workers", 1, "snapshots at once (rawdecode, rawparquet, files)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "optlake-bench %s: -cpuprofile: %v\n", mode, err)
			return 1
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	ctx := context.Background()
	var res childOut
	var err error
	switch mode {
	case "decode":
		res.Main, err = bench.Decode(ctx, *file, *batchRows)
	case "parquet":
		res.Main, err = bench.JSONToParquet(ctx, *file, *out, *batchRows)
	case "simdjson":
		res.Main, err = bench.SimdjsonTape(ctx, *file)
	case "archive":
		res.Main, err = bench.Archive(ctx, *file, *out)
	case "events":
		res.Main, err = bench.Events(ctx, *file, *out)
	case "rawdecode", "rawparquet":
		dst := ""
		if mode == "rawparquet" {
			dst = *dest
		}
		res.Main, err = bench.RawToParquet(ctx, *archiveDir, strings.Split(*files, ","), dst, *workers)
	case "files":
		var bs []int64
		for _, f := range splitComma(*sizes) {
			b, perr := strconv.ParseInt(f, 10, 64)
			if perr != nil {
				err = fmt.Errorf("-sizes: %w", perr)
			}
			bs = append(bs, b)
		}
		if err == nil {
			res.Main, err = bench.Files(ctx, *out, *n, bs, *workers)
		}
	case "chload":
		res, err = chload(ctx, *file, *dsn, *scratch, *batchRows)
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "optlake-bench %s: %v\n", mode, err)
		return 1
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// chload decodes the listing into Arrow records in memory, then times their
// insert through the ClickHouse sink into the instruments table; with
// scratch, it loads the same records into that table too (whose rows, in
// listing order, feed the clickhouse-client references).
func chload(ctx context.Context, file, dsn, scratch string, batchRows int) (childOut, error) {
	if dsn == "" {
		return childOut{}, errors.New("-dsn is required")
	}
	recs, dec, err := bench.DecodeRecords(ctx, file, batchRows)
	if err != nil {
		return childOut{}, err
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	out := childOut{Decode: &dec}
	out.Main, err = bench.ClickHouseLoad(ctx, dsn, schema.Instruments, recs)
	if err != nil {
		return childOut{}, fmt.Errorf("load: %w", err)
	}
	out.Main.InBytes = dec.InBytes
	if scratch != "" {
		t := *schema.Instruments
		t.Name = scratch
		s, err := bench.ClickHouseLoad(ctx, dsn, &t, recs)
		if err != nil {
			return childOut{}, fmt.Errorf("load %s: %w", scratch, err)
		}
		out.Scratch = &s
	}
	return out, nil
}
