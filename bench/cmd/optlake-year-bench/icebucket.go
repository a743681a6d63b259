package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/storage"
)

var icebergBucketOnly = flag.Bool("iceberg-bucket-only", false, "time only the Iceberg lakes' rows on a bucket (versitygw)")

// icebergBucketRows are bucketRows on the Iceberg lakes on a bucket.
var icebergBucketRows = []string{"versitygw, Iceberg: run (first of the UTC day)", "versitygw, Iceberg: run (next)",
	"versitygw, Iceberg: status", "versitygw, Iceberg: history NAME", "versitygw, Iceberg: schema"}

// icebergBucketDir is the bucket "lake" of the Iceberg lake of the Parquet
// lake dir on versitygw, as generated (each measurement serves a
// hard-linked copy of it); its metadata names s3://lake/ locations.
func icebergBucketDir(dir string) string { return dir + "-iceberg-bucket.pristine" }

// ensureIcebergBuckets synthesises the Iceberg lakes of the Parquet
// lakes on a bucket (ensureIcebergBucket) when their rows are timed;
// fresh is true when one was made.
func ensureIcebergBuckets(ctx context.Context, cfg config, lakes ...string) (fresh bool, err error) {
	if !*icebergYear || *icebergOnly || cfg.bucketOnly {
		return false, nil
	}
	gw, err := testenv.VersityGWBin()
	if err != nil {
		return false, nil // no rows (measureIcebergBucket says so)
	}
	for _, dir := range lakes {
		f, err := ensureIcebergBucket(ctx, gw, dir)
		if err != nil {
			return false, fmt.Errorf("iceberg lake of %s on versitygw: %w", dir, err)
		}
		fresh = fresh || f
	}
	return fresh, nil
}

// ensureIcebergBucket synthesises the Iceberg lake of the Parquet lake dir
// on a bucket unless a finished generation left it (fresh false):
// versitygw serves a hard-linked copy of the Parquet lake (its day files,
// raw archive, ledger and events state) and the days are registered
// through the bucket's URL, as ensureIcebergLake registers them in a
// folder (registerIceberg); the bucket's folder is then kept
// (hard-linked) in icebergBucketDir(dir).
func ensureIcebergBucket(ctx context.Context, gw, dir string) (bool, error) {
	pristine := icebergBucketDir(dir)
	done := pristine + ".generated"
	if _, err := os.Stat(done); err == nil {
		progress("reusing %s", pristine)
		return false, nil
	}
	progress("synthesising the Iceberg lake of %s on versitygw", dir)
	start := time.Now()
	os.RemoveAll(pristine)
	b, err := startBucket(ctx, gw, dir, asIceberg)
	if err != nil {
		return false, err
	}
	defer b.stop()
	st, err := storage.Open(ctx, b.url)
	if err != nil {
		return false, err
	}
	days, err := registerIceberg(ctx, st, dir)
	if err != nil {
		return false, err
	}
	reqs := sum(b.reqs.Reset())
	if err := hardCopy(ctx, b.dir, pristine); err != nil {
		return false, err
	}
	// versitygw's temporary folder (made again when it starts).
	if err := os.RemoveAll(filepath.Join(pristine, ".sgwtmp")); err != nil {
		return false, err
	}
	j, _ := json.Marshal(map[string]any{"days": days, "seconds": time.Since(start).Seconds(), "requests": reqs})
	progress("%s", j)
	return true, os.WriteFile(done, append(j, '\n'), 0o644)
}

// measureIcebergBucket times icebergBucketRows on the Iceberg lakes of
// day1 and dayN on versitygw. Without versitygw they are left out.
func measureIcebergBucket(ctx context.Context, bin string, sims map[string]string, day1, dayN, inst string, cfg config, rep *Report) error {
	if !*icebergYear {
		return nil
	}
	gw, err := testenv.VersityGWBin()
	if err != nil {
		progress("no versitygw (%v): no Iceberg bucket rows", err)
		return nil
	}
	for _, l := range []struct{ key, dir string }{{"day1", day1}, {"dayN", dayN}} {
		if err := timeBucketRows(ctx, gw, bin, sims[l.key], l.key, icebergBucketDir(l.dir), inst, icebergBucketRows, cfg, rep); err != nil {
			return err
		}
	}
	return nil
}

func sum(m map[string]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}

func printIcebergBucket(r Report) {
	if _, ok := r.Rows[icebergBucketRows[0]]; !ok {
		return
	}
	fmt.Printf("### The Iceberg lakes on a bucket (versitygw)\n\n")
	printBucketRows(r, icebergBucketRows)
}
