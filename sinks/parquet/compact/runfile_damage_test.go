package compact

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/internal/arrowpool"
)

// damageSchema has a column of each path of the run's format: strings and
// fixed widths gathered into the writer's scratch, booleans and lists
// through arrow-go's arrays (a list's child node).
var damageSchema = arrow.NewSchema([]arrow.Field{
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "t", Type: arrow.FixedWidthTypes.Timestamp_ms, Nullable: true},
	{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "l", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
}, nil)

// damageRecord is n rows of damageSchema, a null every seventh.
func damageRecord(n, seed int) arrow.Record {
	b := array.NewRecordBuilder(memory.DefaultAllocator, damageSchema)
	defer b.Release()
	for i := range n {
		if i%7 == 3 {
			for j := range damageSchema.NumFields() {
				b.Field(j).AppendNull()
			}
			continue
		}
		k := i*i + seed
		b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("BTC-%d-C", k))
		b.Field(1).(*array.Float64Builder).Append(float64(k) / 3)
		b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(k))
		b.Field(3).(*array.BooleanBuilder).Append(k%3 == 0)
		lb := b.Field(4).(*array.ListBuilder)
		lb.Append(true)
		for x := range i % 3 {
			lb.ValueBuilder().(*array.StringBuilder).Append(fmt.Sprint(x, k))
		}
	}
	return b.NewRecord()
}

// spillBytes writes batches of damageRecord's rows (sizes) as a run and
// returns its bytes.
func spillBytes(t testing.TB, pool *arrowpool.Pool, sizes ...int) []byte {
	t.Helper()
	w, err := newRunWriter(pool, damageSchema, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for k, n := range sizes {
		if err := w.write(damageRecord(n, k)); err != nil {
			t.Fatal(err)
		}
	}
	path, err := w.finish()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	return b
}

// readRun reads the run in data to its end, touching every value of
// every batch (arrow-go indexes its buffers unchecked), and returns the
// batches read or the first error; skipCRC lets damaged bytes reach the
// nodes' checks.
func readRun(pool *arrowpool.Pool, path string, data []byte, skipCRC bool) (batches int, err error) {
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return 0, err
	}
	c, err := openRun(pool, damageSchema, path)
	if err != nil {
		return 0, err
	}
	defer c.close()
	c.skipCRC = skipCRC
	for {
		rec, err := c.next()
		if err != nil || rec == nil {
			return batches, err
		}
		for _, col := range rec.Columns() {
			_ = col.String()
		}
		batches++
	}
}

// Every single-byte damage of a run (each byte flipped by three masks)
// is an error naming the file: no panic, no wrong rows read (the
// batches' checksums). Without the checksums (skipCRC), no damage panics
// either: each node is checked against its type before arrow-go sees it.
func TestRunFileDamaged(t *testing.T) {
	pool := arrowpool.New(1 << 20)
	good := spillBytes(t, pool, 40, 9)
	dir := t.TempDir()
	if n, err := readRun(pool, filepath.Join(dir, "good"), good, false); err != nil || n != 2 {
		t.Fatalf("the undamaged run: %d batches, %v", n, err)
	}
	for _, skipCRC := range []bool{false, true} {
		panics, silent := 0, 0
		for pos := range good {
			for _, x := range []byte{0x01, 0x80, 0xff} {
				bad := slices.Clone(good)
				bad[pos] ^= x
				path := filepath.Join(dir, fmt.Sprintf("run-%d-%x", pos, x))
				func() {
					defer func() {
						if r := recover(); r != nil {
							panics++
							if panics <= 3 {
								t.Errorf("skipCRC %v: byte %d ^ %#x: panic: %v", skipCRC, pos, x, r)
							}
						}
					}()
					_, err := readRun(pool, path, bad, skipCRC)
					switch {
					case err == nil:
						silent++
					case !strings.Contains(err.Error(), path):
						t.Errorf("byte %d ^ %#x: %v does not name the file", pos, x, err)
					}
				}()
			}
		}
		if panics > 0 {
			t.Errorf("skipCRC %v: %d of %d damaged runs panic", skipCRC, panics, 3*len(good))
		}
		if !skipCRC && silent > 0 {
			t.Errorf("%d of %d damaged runs read without an error", silent, 3*len(good))
		}
		t.Logf("skipCRC %v: %d damaged runs of %d bytes, %d read without an error", skipCRC, 3*len(good), len(good), silent)
	}
}

// A length in a damaged run allocates no more than the bytes left in the
// file: a buffer's length of 2 GiB in a file of a few hundred bytes is an
// error before any buffer is taken from the pool.
func TestRunFileLengthCapped(t *testing.T) {
	pool := arrowpool.New(1 << 20)
	// rows 1; node: length 1, nulls 0, offset 0, 3 buffers; buffer: raw, 2^31 bytes
	data := []byte{1, 1, 0, 0, 3, bufRaw, 0x80, 0x80, 0x80, 0x80, 0x08}
	_, err := readRun(pool, filepath.Join(t.TempDir(), "run"), data, false)
	if err == nil || !strings.Contains(err.Error(), "left in the file") {
		t.Fatalf("err = %v, want a buffer longer than the file", err)
	}
}

// Strings gathered past int32's range are an error, not wrapped offsets
// (a 2 GiB column is too large for a test: the check itself).
func TestStringsFit(t *testing.T) {
	for _, c := range []struct {
		pos, n int
		ok     bool
	}{
		{0, 0, true},
		{math.MaxInt32 - 10, 10, true},
		{math.MaxInt32 - 10, 11, false},
		{math.MaxInt32, 1, false},
		{1 << 30, 1 << 30, false}, // int32(pos+n) is negative
	} {
		if err := stringsFit(c.pos, c.n); (err == nil) != c.ok {
			t.Errorf("stringsFit(%d, %d) = %v, want ok %v", c.pos, c.n, err, c.ok)
		}
	}
}

// A panic in a day's merge on its goroutine is the day's error: it does
// not end the process (a run with no schema panics in the merge).
func TestDayMergePanicIsError(t *testing.T) {
	d := &dayRows{runs: []*dayRun{{}, {}}}
	d.mu.Lock()
	d.startMerge()
	d.wait()
	err := d.err
	d.mu.Unlock()
	if err == nil || !strings.Contains(err.Error(), "panic") {
		t.Fatalf("err = %v, want the merge's panic", err)
	}
}

// FuzzRunFile reads arbitrary bytes as a run of damageSchema: an error or
// batches whose every value arrow-go can read, never a panic. The
// checksums are skipped (a fuzzed batch would never reach the nodes'
// checks), then kept.
func FuzzRunFile(f *testing.F) {
	pool := arrowpool.New(1 << 20)
	f.Add(spillBytes(f, pool, 40))
	f.Add(spillBytes(f, pool, 3, 0, 20))
	f.Add(spillBytes(f, pool, 1))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, skipCRC := range []bool{true, false} {
			readRun(pool, filepath.Join(dir, "run"), data, skipCRC)
		}
	})
}
