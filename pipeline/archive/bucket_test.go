package archive

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/storage"
)

// bucketArchive is an archive on a prefix of a real S3-compatible server,
// and the folder where the server keeps that prefix's objects.
func bucketArchive(t *testing.T) (*Archive, string) {
	t.Helper()
	g := testenv.StartVersityGW(t, "lake")
	g.SetCredentials(t)
	st, err := storage.Open(context.Background(), g.URL("lake", "hist"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return OnStore(st), filepath.Join(g.Dir(), "lake", "hist")
}

// The same responses archived locally and on a bucket list, read and
// report the same: snapshots, chosen attempts, problems, days, bodies.
func TestBucketEqualsLocal(t *testing.T) {
	ctx := context.Background()
	onBucket, _ := bucketArchive(t)
	local := New(t.TempDir())
	for _, a := range []*Archive{local, onBucket} {
		for d := 0; d < 3; d++ {
			at := t0.Add(time.Duration(d) * 25 * time.Hour)
			for req := 0; req < 2; req++ {
				m := Meta{Endpoint: "instruments", SnapshotTime: at, RunID: fmt.Sprintf("run-%d", d), Source: "sim", Request: req, Requests: 2, Attempt: 1}
				put(t, a, m, []byte(fmt.Sprintf(`[{"instruments":[%d]}]`, d*10+req)), 200, true)
			}
			// A retried request: the answered 503, then the 200.
			m := Meta{Endpoint: "positions", SnapshotTime: at, RunID: fmt.Sprintf("run-%d", d), Source: "sim", Attempt: 1}
			put(t, a, m, []byte("busy"), 503, true)
			m.Attempt = 2
			put(t, a, m, []byte(`{"positions":[]}`), 200, true)
		}
		// A body cut off by the venue.
		m := Meta{Endpoint: "instruments", SnapshotTime: t0.Add(80 * time.Hour), RunID: "run-cut", Source: "sim", Attempt: 1}
		put(t, a, m, []byte(`[{"instr`), 200, false)
	}
	for _, eps := range [][]string{nil, {"instruments"}, {"positions"}} {
		want, err := local.List(ctx, eps, time.Time{}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := onBucket.List(ctx, eps, time.Time{}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if len(want) != 4 && eps == nil || !reflect.DeepEqual(strip(got), strip(want)) {
			t.Errorf("List(%v) on the bucket:\n%+v\nlocally:\n%+v", eps, got, want)
		}
	}
	from, to := t0.Add(20*time.Hour), t0.Add(60*time.Hour)
	w, _ := local.List(ctx, nil, from, to)
	g, err := onBucket.List(ctx, nil, from, to)
	if err != nil || len(w) != 2 || !reflect.DeepEqual(strip(g), strip(w)) {
		t.Errorf("List in [%s, %s): bucket %+v (%v), local %+v", from, to, g, err, w)
	}
	wd, _ := local.Days(ctx, "instruments")
	gd, err := onBucket.Days(ctx, "instruments")
	if err != nil || len(wd) != 4 || !reflect.DeepEqual(gd, wd) {
		t.Errorf("Days: bucket %v (%v), local %v", gd, err, wd)
	}
	snaps, _ := onBucket.List(ctx, []string{"positions"}, time.Time{}, time.Time{})
	if len(snaps) != 3 || len(snaps[0].Bodies) != 1 || snaps[0].Bodies[0].Attempt != 2 {
		t.Fatalf("positions on the bucket: %+v", snaps)
	}
	rc, err := onBucket.Open(ctx, snaps[0].Bodies[0].File)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != `{"positions":[]}` {
		t.Errorf("body read back from the bucket: %q", b)
	}
}

// strip drops what legitimately differs between two archives of the same
// responses: the fetch time of each body.
func strip(s []Snapshot) []Snapshot {
	out := make([]Snapshot, len(s))
	for i, x := range s {
		x.Bodies = append([]Meta(nil), x.Bodies...)
		for j := range x.Bodies {
			x.Bodies[j].FetchTime = time.Time{}
		}
		out[i] = x
	}
	return out
}

// A large body streams to the bucket (multipart upload) without being held
// in memory, and comes back byte for byte; an aborted body leaves no
// object.
func TestBucketLargeBodyAndAbort(t *testing.T) {
	ctx := context.Background()
	a, dir := bucketArchive(t)
	// Hex of random bytes: zstd halves it, so the object (~60 MiB) takes
	// several parts of a multipart upload. The heap holds a few parts and
	// the encoder's windows, not the body: it stays under 64 MiB for a body
	// twice that (it would grow with the body if anything buffered it).
	const size = 120 << 20
	rnd := rand.New(rand.NewPCG(1, 2))
	raw := make([]byte, 32<<10)
	chunk := make([]byte, hex.EncodedLen(len(raw)))
	next := func() []byte {
		for i := range raw {
			raw[i] = byte(rnd.Uint32())
		}
		hex.Encode(chunk, raw)
		return chunk
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	e, err := a.Create(ctx, Meta{Endpoint: "instruments", SnapshotTime: t0, RunID: "big", Source: "sim", Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	var peak uint64
	for n := 0; n < size; n += len(chunk) {
		c := next()
		e.Write(c)
		h.Write(c)
		if n%(8<<20) < len(chunk) {
			runtime.GC() // what is live, not garbage not yet collected
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
		}
	}
	m, err := e.Finish(200, "application/json", true, "")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, m.File)); err != nil || fi.Size() < 48<<20 {
		t.Fatalf("the object on the server: %v %v (want a compressed body over 48 MiB, several upload parts)", fi, err)
	}
	if grew := int64(peak) - int64(before.HeapInuse); grew > 64<<20 {
		t.Errorf("heap grew by %d MiB while streaming a %d MiB body", grew>>20, size>>20)
	}
	rc, err := a.Open(ctx, m.File)
	if err != nil {
		t.Fatal(err)
	}
	h2 := sha256.New()
	n, err := io.Copy(h2, rc)
	rc.Close()
	if err != nil || n != m.Bytes || !bytes.Equal(h.Sum(nil), h2.Sum(nil)) || fmt.Sprintf("%x", h.Sum(nil)) != m.SHA256 {
		t.Errorf("read back %d bytes (%v), want %d with the same hash", n, err, m.Bytes)
	}

	// Aborted after some data: no object, nothing the server shows.
	e, err = a.Create(ctx, Meta{Endpoint: "instruments", SnapshotTime: t0.Add(time.Minute), RunID: "gone", Source: "sim", Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		e.Write(next())
	}
	e.Abort()
	snaps, err := a.List(ctx, nil, time.Time{}, time.Time{})
	if err != nil || len(snaps) != 1 || snaps[0].RunID != "big" || len(snaps[0].Problems) != 0 {
		t.Errorf("after an abort the bucket lists %+v (%v)", snaps, err)
	}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(p, "gone") {
			t.Errorf("the aborted body is on the server: %s", p)
		}
		return nil
	})
}
