package archive

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// benchBody is a listing-like JSON body of about mb MiB (instruments with
// varying numbers, so that zstd compresses it about as much as a real one).
func benchBody(mb int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"instruments":[`)
	for i := 0; b.Len() < mb<<20; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"instrument_name":"BTC-%dDEC26-%d-C","strike":%d,"index_price":"%d.%d","mark_iv":%d.%03d,"open_interest":%d}`,
			i%28+1, 50000+i%400*500, 50000+i%400*500, 97000+i%977, i%10, 40+i%37, i%1000, i*7919%100003)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchMB is the body size of the archive benchmarks:
// OPTLAKE_ARCHIVE_BENCH_MB (default 128).
func benchMB() int {
	if n, err := strconv.Atoi(os.Getenv("OPTLAKE_ARCHIVE_BENCH_MB")); err == nil && n > 0 {
		return n
	}
	return 128
}

// BenchmarkArchive archives one large body as a run does (256 KiB reads
// teed into an Entry, then Finish) and reports the process CPU per body.
func BenchmarkArchive(b *testing.B) {
	body := benchBody(benchMB())
	dir := b.TempDir()
	a := New(dir)
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	cpu := cpuTime()
	for i := range b.N {
		e, err := a.Create(context.Background(), Meta{Endpoint: "instruments", SnapshotTime: t0.Add(time.Duration(i) * time.Second), RunID: "bench", Attempt: 1})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.CopyBuffer(e, struct{ io.Reader }{bytes.NewReader(body)}, make([]byte, 256<<10)); err != nil {
			b.Fatal(err)
		}
		if _, err := e.Finish(200, "application/json", true, ""); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric((cpuTime()-cpu).Seconds()/float64(b.N), "cpu-s/op")
	if fi, err := os.Stat(filepath.Join(dir, BodyPath(Meta{Endpoint: "instruments", SnapshotTime: t0, RunID: "bench", Attempt: 1}))); err == nil {
		b.ReportMetric(float64(fi.Size())/float64(len(body)), "object/body")
	}
}

// BenchmarkRead reads back one archived body of a replay's size
// (OPTLAKE_ARCHIVE_READ_MB, default 2 MiB of JSON) with Open and with
// OpenVerified (the object's sha256 checked first): the verify's cost.
func BenchmarkRead(b *testing.B) {
	mb := 2
	if n, err := strconv.Atoi(os.Getenv("OPTLAKE_ARCHIVE_READ_MB")); err == nil && n > 0 {
		mb = n
	}
	body := benchBody(mb)
	a := New(b.TempDir())
	e, err := a.Create(context.Background(), Meta{Endpoint: "instruments", SnapshotTime: t0, RunID: "bench", Attempt: 1})
	if err != nil {
		b.Fatal(err)
	}
	e.Write(body)
	m, err := e.Finish(200, "application/json", true, "")
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		open func() (io.ReadCloser, error)
	}{
		{"open", func() (io.ReadCloser, error) { return a.Open(context.Background(), m.File) }},
		{"verified", func() (io.ReadCloser, error) { return a.OpenVerified(context.Background(), m) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			cpu := cpuTime()
			for range b.N {
				rc, err := bc.open()
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, rc); err != nil {
					b.Fatal(err)
				}
				rc.Close()
			}
			b.ReportMetric((cpuTime()-cpu).Seconds()*1e3/float64(b.N), "cpu-ms/op")
		})
	}
}
