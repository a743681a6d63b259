package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/optlake/optlake/pipeline/archive"
	"github.com/optlake/optlake/pipeline/events"
	"github.com/optlake/optlake/pipeline/transform"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/storage"
)

// The stages of `optlake run` measured alone, each in its own process, so
// that the report can add up the CPU a whole run cannot do without and
// divide it by the cores: the least wall time any scheduling of the same
// work could reach on the machine (bench/cmd/optlake-bench, "bounds").

// bodyChunk is the size of the reads the archive gets: one Read of an HTTP
// response body through the runner's buffer.
const bodyChunk = 256 << 10

// Archive measures the raw archive of the listing at path alone, as a run
// archives a body: chunks teed to archive.Entry (zstd in its goroutine,
// the sha256 of the compressed object as it is written), then Finish (the file fsynced and renamed, its metadata
// written) into the data directory dir.
func Archive(ctx context.Context, path, dir string) (Result, error) {
	start := time.Now()
	f, err := os.Open(path)
	if err != nil {
		return Result{}, err
	}
	defer f.Close()
	snap := snapshot()
	e, err := archive.New(dir).Create(ctx, archive.Meta{
		Endpoint: snap.Endpoint, Requests: 1, Attempt: 1, URL: "http://bench/v1/public/get_instruments",
		SnapshotTime: snap.Time, RunID: snap.RunID, Source: snap.Source, FetchTime: snap.Time,
	})
	if err != nil {
		return Result{}, err
	}
	// struct{ io.Reader } hides os.File's WriteTo, whose copy would not
	// use bodyChunk reads.
	n, err := io.CopyBuffer(e, struct{ io.Reader }{f}, make([]byte, bodyChunk))
	if err != nil {
		e.Abort()
		return Result{}, err
	}
	m, err := e.Finish(200, "application/json", true, "")
	if err != nil {
		return Result{}, err
	}
	res := Result{InBytes: n, Seconds: time.Since(start).Seconds()}
	if fi, err := os.Stat(filepath.Join(dir, m.File)); err == nil {
		res.OutBytes = fi.Size()
	}
	return res, nil
}

// Events measures the instrument events of the listing at path alone, as
// a first snapshot's (every instrument listed): the rows are decoded first
// (untimed, held in memory), then observed, compared with the empty state,
// emitted (discarded) and the next state saved into dir. WorkCPUSeconds is
// the CPU of that part alone.
func Events(ctx context.Context, path, dir string) (Result, error) {
	recs, dec, err := DecodeRecords(ctx, path, 0)
	if err != nil {
		return Result{}, err
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	cpu0 := processCPU()
	start := time.Now()
	d, err := events.NewDiffer(nil, snapshot(), events.Options{TempDir: events.StateDir(dir)})
	if err != nil {
		return Result{}, err
	}
	for _, r := range recs {
		if err := d.Observe(r); err != nil {
			return Result{}, err
		}
	}
	st, next, err := d.Finish(func(*schema.Table, arrow.Record) error { return nil })
	if err != nil {
		return Result{}, err
	}
	defer next.Close()
	if err := next.Save(dir); err != nil {
		return Result{}, err
	}
	res := Result{Rows: dec.Rows, InBytes: dec.InBytes, Seconds: time.Since(start).Seconds(), WorkCPUSeconds: processCPU() - cpu0}
	if st.Events != dec.Rows {
		return Result{}, fmt.Errorf("events: %d for %d new instruments", st.Events, dec.Rows)
	}
	return res, nil
}

// RawToParquet measures what replay does of an archive but the events:
// every raw body (files, the archive's *.json.zst under dataDir)
// decompressed, decoded and written as its snapshot's Parquet file under
// out (one file per snapshot, as the lake's layout has it), workers bodies
// at once. With out "", the rows are decoded and discarded.
func RawToParquet(ctx context.Context, dataDir string, files []string, out string, workers int) (Result, error) {
	start := time.Now()
	arc := archive.New(dataDir) // its zstd decoders are reused, as replay's are
	res, err := forEach(len(files), workers, func(i int) (Result, error) {
		return rawToParquet(ctx, arc, files[i], out, i)
	})
	if err != nil {
		return Result{}, err
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// forEach runs do(i) for every i in [0, n), workers at once, and adds up
// the rows and bytes of their results; the first error is returned.
func forEach(n, workers int, do func(i int) (Result, error)) (Result, error) {
	var (
		mu   sync.Mutex
		res  Result
		ferr error
		wg   sync.WaitGroup
	)
	next := make(chan int)
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				r, err := do(i)
				mu.Lock()
				res.Rows += r.Rows
				res.InBytes += r.InBytes
				res.OutBytes += r.OutBytes
				if err != nil && ferr == nil {
					ferr = err
				}
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return res, ferr
}

func rawToParquet(ctx context.Context, arc *archive.Archive, file, out string, i int) (Result, error) {
	rc, err := arc.Open(ctx, file)
	if err != nil {
		return Result{}, err
	}
	defer rc.Close()
	snap := snapshot()
	snap.Time = snap.Time.Add(time.Duration(i) * time.Minute) // a file per body
	if out != "" {
		res, err := toParquet(ctx, rc, out, snap, 0)
		if err != nil {
			return Result{}, fmt.Errorf("%s: %w", file, err)
		}
		return res, nil
	}
	cr := &countingReader{r: rc}
	dec := transform.NewInstrumentDecoder(transform.Options{})
	defer dec.Release()
	st, err := dec.Decode(ctx, cr, snap, func(*schema.Table, arrow.Record) error { return nil })
	if err != nil {
		return Result{}, fmt.Errorf("decode %s: %w", file, err)
	}
	return Result{Rows: st.Rows, InBytes: cr.n}, nil
}

// Files measures the file system's share of writing n snapshots' files
// alone: per snapshot one file of each of sizes, written whole and
// committed as the Parquet sink commits one (a hidden temporary file,
// fsync, rename, fsync of the folder), workers snapshots at once, into
// dir. Nothing is encoded: it is what one file per table and snapshot
// costs whatever is in the files.
func Files(ctx context.Context, dir string, n int, sizes []int64, workers int) (Result, error) {
	st := storage.NewLocal(dir)
	var big int64
	for _, s := range sizes {
		big = max(big, s)
	}
	data := make([]byte, big)
	start := time.Now()
	res, err := forEach(n, workers, func(i int) (Result, error) {
		var r Result
		for t, size := range sizes {
			name := fmt.Sprintf("t%d/date=2026-11-20/snapshot-%05d.parquet", t, i)
			if err := st.Put(ctx, name, data[:size]); err != nil {
				return r, err
			}
			r.Rows++ // files
			r.OutBytes += size
		}
		return r, nil
	})
	if err != nil {
		return Result{}, err
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// processCPU is the process's user+sys CPU time so far, in seconds.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
