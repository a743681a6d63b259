package compact

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/optlake/optlake/internal/arrowpool"
)

// Review of the direct writer's dictionary columns from ids: units in
// memory (some sliced: offset != 0) and packed (as ids, or as strings
// when sliced or of too many distinct values) give the chunks their
// gathered strings give.
func TestReview81DirectDictMixedUnits(t *testing.T) {
	r := rand.New(rand.NewPCG(81, 2))
	pool := arrowpool.New(1 << 20)
	pf, err := newPackFile(pool, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer pf.remove()
	var units []directUnit
	var refs []rowRef
	var ld localDict
	for k := range 16 {
		n := 40 + r.IntN(200)
		full := idxRecord(r, k, n+7)
		defer full.Release()
		rec := full
		if k%3 == 1 {
			rec = full.NewSlice(5, int64(n+5))
			defer rec.Release()
		}
		u := directUnit{rows: int(rec.NumRows())}
		if k%2 == 0 {
			u.rec = rec
		} else {
			prec := &packedRec{rows: u.rows, cols: make([]packedCol, rec.NumCols())}
			for j := range int(rec.NumCols()) {
				off := pf.pos()
				pf.w.crc = 0
				dict := false
				if s, ok := rec.Column(j).(*array.String); ok && ld.encode(s) {
					ld.write(pf.w, s)
					dict = true
				} else {
					pf.w.array(rec.Column(j).Data())
				}
				prec.cols[j] = packedCol{off: off, n: pf.pos() - off, size: dataBytes(rec.Column(j).Data()), crc: pf.w.crc, dict: dict}
			}
			u.packed, u.file = prec, pf
		}
		units = append(units, u)
		for i := range u.rows {
			refs = append(refs, rowRef{int32(k), int32(i)})
		}
	}
	if err := pf.w.bw.Flush(); err != nil {
		t.Fatal(err)
	}
	r.Shuffle(len(refs), func(a, b int) { refs[a], refs[b] = refs[b], refs[a] })
	opts := idxOpts(t, 64<<10)
	want, got := idxDay(t, units, refs, opts, true, pool), idxDay(t, units, refs, opts, false, pool)
	if wantIdx := []bool{true, true, true, false}; !reflect.DeepEqual(got.indexed, wantIdx) {
		t.Fatalf("columns built from ids %v, want %v", got.indexed, wantIdx)
	}
	sameIdxChunks(t, got, want)
}

// Review: a byte changed inside a column packed as ids (packdict.go)
// fails the day's publish, direct or merged, with an error of the pack;
// the partition is left as it was.
func TestReview81DamagedDictPackFailsTheDay(t *testing.T) {
	for _, direct := range []bool{true, false} {
		for _, part := range []string{"ids", "values"} {
			t.Run(fmt.Sprintf("%s, direct %v", part, direct), func(t *testing.T) {
				ds, dir, path := packingDay(t, Options{ChunkBytes: 96 << 10, noDirect: !direct}, daySnaps(12, 150, 80, 23))
				d := ds.days[Partition{Table: "instruments", Date: day1.Format(time.DateOnly)}]
				var hit *packedCol
				for _, r := range d.runs {
					if g := r.packed; g != nil && hit == nil {
						for c := range g.runs[0].recs[0].cols {
							if pc := &g.runs[0].recs[0].cols[c]; pc.dict && pc.n > 40 {
								hit = pc
								break
							}
						}
					}
				}
				if hit == nil {
					t.Fatal("no column packed as ids")
				}
				f, err := os.OpenFile(path, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				at := hit.off + 12 // in the ids' node
				if part == "values" {
					at = hit.off + hit.n - 3
				}
				b := make([]byte, 1)
				if _, err := f.ReadAt(b, at); err != nil {
					t.Fatal(err)
				}
				b[0] ^= 0x01
				if _, err := f.WriteAt(b, at); err != nil {
					t.Fatal(err)
				}
				f.Close()
				flushFailsOnPack(t, ds, dir)
			})
		}
	}
}

// flushFailsOnPack: the day's publish fails with an error of the pack
// (damaged by the caller), no pack file is left, the sink closes, and
// the day's partition is not there.
func flushFailsOnPack(t *testing.T, ds *DaySink, dir string) {
	t.Helper()
	ctx := context.Background()
	err := ds.FlushDay(ctx, day1.Format(time.DateOnly))
	if err == nil || !strings.Contains(err.Error(), "pack") {
		t.Fatalf("FlushDay: %v, want an error of the pack", err)
	}
	if left := packFiles(t, dir); len(left) > 0 {
		t.Fatalf("left behind: %v", left)
	}
	if err := ds.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(partDir(dir, "instruments", day1)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the partition is there: %v", err)
	}
}
