package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/pipeline/archive"
	"github.com/optlake/optlake/schema"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func writeListing(tb testing.TB, n, group int) (string, int64) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), fmt.Sprintf("instruments-%d-g%d.json", n, group))
	size, err := GenerateListing(path, n, group)
	if err != nil {
		tb.Fatal(err)
	}
	return path, size
}

func TestStages(t *testing.T) {
	ctx := context.Background()
	const n = 2000
	path, size := writeListing(t, n, 200)
	dec, err := Decode(ctx, path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if dec.Rows != n || dec.Rejects != 0 || dec.InBytes != size {
		t.Errorf("Decode: %+v, want %d rows of %d bytes", dec, n, size)
	}
	pq, err := JSONToParquet(ctx, path, t.TempDir(), 500)
	if err != nil {
		t.Fatal(err)
	}
	if pq.Rows != n || pq.OutBytes == 0 {
		t.Errorf("JSONToParquet: %+v, want %d rows and a file", pq, n)
	}
	recs, res, err := DecodeRecords(ctx, path, 500)
	if err != nil {
		t.Fatal(err)
	}
	var rows int64
	for _, r := range recs {
		rows += r.NumRows()
		r.Release()
	}
	if rows != n || res.Rows != n || len(recs) != n/500 {
		t.Errorf("DecodeRecords: %d records of %d rows (%+v)", len(recs), rows, res)
	}
}

func TestDuckDBColumns(t *testing.T) {
	cols := DuckDBColumns()
	if !strings.HasPrefix(cols, "STRUCT(base_currency VARCHAR, ") || !strings.HasSuffix(cols, ", tick_size DOUBLE)[]") {
		t.Errorf("DuckDBColumns() = %s", cols)
	}
	for _, want := range []string{"index_price VARCHAR", "creation_timestamp BIGINT", "is_active BOOLEAN", "strike DOUBLE"} {
		if !strings.Contains(cols, want) {
			t.Errorf("DuckDBColumns() lacks %q: %s", want, cols)
		}
	}
	if got := strings.Count(cols, ", ") + 1; got != 25 {
		t.Errorf("DuckDBColumns() has %d fields, want the 25 venue fields", got)
	}
}

func TestClickHouseLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("needs clickhouse-server")
	}
	ctx := context.Background()
	c := testenv.SharedClickHouse(t)
	db := testenv.FreshDatabase(t, c)
	dsn := c.DSN(db)
	if err := Migrate(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	path, _ := writeListing(t, 1500, 200)
	recs, _, err := DecodeRecords(ctx, path, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	res, err := ClickHouseLoad(ctx, dsn, schema.Instruments, recs)
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Query(ctx, "SELECT count() FROM "+db+".instruments")
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 1500 || out != "1500" {
		t.Errorf("loaded %d rows, table has %s, want 1500", res.Rows, out)
	}
}

// The benchmarks measure the stages of the command on a 100,000-instrument
// listing in both shapes; MB/s is JSON bytes, rows/s a custom metric.

var shapes = []struct {
	name  string
	group int
}{{"groups200", 200}, {"groups3", 33334}}

func benchStage(b *testing.B, stage func(path string) (Result, error)) {
	for _, sh := range shapes {
		b.Run(sh.name, func(b *testing.B) {
			path, size := writeListing(b, 100_000, sh.group)
			b.SetBytes(size)
			b.ReportAllocs()
			var rows int64
			for b.Loop() {
				r, err := stage(path)
				if err != nil {
					b.Fatal(err)
				}
				rows += r.Rows
			}
			b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkDecode is decode+flatten into Arrow batches, read from a file.
func BenchmarkDecode(b *testing.B) {
	benchStage(b, func(path string) (Result, error) { return Decode(context.Background(), path, 0) })
}

// BenchmarkJSONToParquet is the runner's JSON → zstd Parquet path.
func BenchmarkJSONToParquet(b *testing.B) {
	benchStage(b, func(path string) (Result, error) {
		return JSONToParquet(context.Background(), path, b.TempDir(), 0)
	})
}

// BenchmarkArrowToClickHouse inserts 100,000 pre-decoded rows through the
// ClickHouse sink (a fresh table per iteration, outside the timer).
func BenchmarkArrowToClickHouse(b *testing.B) {
	ctx := context.Background()
	c := testenv.SharedClickHouse(b)
	db := testenv.FreshDatabase(b, c)
	dsn := c.DSN(db)
	if err := Migrate(ctx, dsn); err != nil {
		b.Fatal(err)
	}
	if err := c.Exec(ctx, fmt.Sprintf("CREATE TABLE %[1]s.shape AS %[1]s.instruments", db)); err != nil {
		b.Fatal(err)
	}
	path, size := writeListing(b, 100_000, 200)
	recs, _, err := DecodeRecords(ctx, path, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	b.SetBytes(size)
	b.ReportAllocs()
	var rows int64
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		if err := c.Exec(ctx, fmt.Sprintf("DROP TABLE %[1]s.instruments; CREATE TABLE %[1]s.instruments AS %[1]s.shape", db)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		r, err := ClickHouseLoad(ctx, dsn, schema.Instruments, recs)
		if err != nil {
			b.Fatalf("iteration %d: %v", i, err)
		}
		rows += r.Rows
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
}

// TestSimdjsonTapeCounts: the reference parses the listing and counts its
// instruments in both shapes.
func TestSimdjsonTapeCounts(t *testing.T) {
	for _, group := range []int{200, 700} {
		path, _ := writeListing(t, 1500, group)
		res, err := SimdjsonTape(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		if res.Rows != 1500 || res.Seconds <= 0 {
			t.Errorf("group %d: %+v, want 1500 rows", group, res)
		}
	}
}

// The bounds' stages do the work they stand for: the archive holds the
// body whole, the events list every instrument of a first snapshot, the raw
// bodies decode into one Parquet file each, and Files commits its files.
func TestBoundStages(t *testing.T) {
	ctx := context.Background()
	const n = 1500
	path, size := writeListing(t, n, 200)
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	arc, err := Archive(ctx, path, dir)
	if err != nil {
		t.Fatal(err)
	}
	if arc.InBytes != size || arc.OutBytes == 0 || arc.OutBytes >= size {
		t.Errorf("Archive: %+v, want %d bytes in and a smaller file", arc, size)
	}
	raws, _ := filepath.Glob(filepath.Join(dir, "raw", "instruments", "date=*", "*.json.zst"))
	if len(raws) != 1 {
		t.Fatalf("archive files %v, want one", raws)
	}
	rel, _ := filepath.Rel(dir, raws[0])
	rc, err := archive.Open(dir, rel)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("archived body: %d bytes (%v), want the %d of the listing", len(got), err, len(body))
	}
	meta, err := archive.ReadMeta(filepath.Join(dir, archive.MetaPath(rel)))
	stored, _ := os.ReadFile(raws[0])
	if sum := sha256.Sum256(stored); err != nil || meta.ObjectSHA256 != hex.EncodeToString(sum[:]) || !meta.Complete {
		t.Errorf("archive meta %+v (%v), want complete with the stored object's sha256", meta, err)
	}

	ev, err := Events(ctx, path, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if ev.Rows != n || ev.WorkCPUSeconds <= 0 {
		t.Errorf("Events: %+v, want %d rows and their CPU", ev, n)
	}

	files := []string{rel, rel, rel}
	dec, err := RawToParquet(ctx, dir, files, "", 2)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	pq, err := RawToParquet(ctx, dir, files, out, 2)
	if err != nil {
		t.Fatal(err)
	}
	written, _ := filepath.Glob(filepath.Join(out, "instruments", "date=*", "*.parquet"))
	if dec.Rows != 3*n || pq.Rows != 3*n || pq.OutBytes == 0 || len(written) != 3 {
		t.Errorf("RawToParquet: %+v decoding, %+v and %d files writing; want %d rows and 3 files", dec, pq, len(written), 3*n)
	}

	fs, err := Files(ctx, out, 4, []int64{1000, 10}, 2)
	if err != nil {
		t.Fatal(err)
	}
	committed, _ := filepath.Glob(filepath.Join(out, "t*", "date=*", "*.parquet"))
	if fs.Rows != 8 || fs.OutBytes != 4*1010 || len(committed) != 8 {
		t.Errorf("Files: %+v and %d files, want 8 files of 4,040 bytes", fs, len(committed))
	}
}
