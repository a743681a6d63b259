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
	// Hex of random bytes: zstd halves it, so each object takes several
	// parts of a multipart upload. The heap holds a few parts in flight and
	// the encoder's windows, whatever the body's size: streaming a body
	// three times larger must not grow it by more than noise. Buffering
	// the body, or its compressed object, would add at least 48 MiB (half
	// of the 96 MiB difference). (An absolute bound was flaky: the parts in
	// flight and the windows alone come near 64 MiB.)
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
	// stream archives a body of size bytes as the run named id, checks it
	// on the server and read back, and returns the live heap's peak while
	// it streamed.
	stream := func(id string, size int) int64 {
		e, err := a.Create(ctx, Meta{Endpoint: "instruments", SnapshotTime: t0, RunID: id, Source: "sim", Attempt: 1})
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
		if fi, err := os.Stat(filepath.Join(dir, m.File)); err != nil || fi.Size() < int64(size)*2/5 {
			t.Fatalf("the object on the server: %v %v (want a compressed body over %d MiB, several upload parts)", fi, err, size*2/5>>20)
		}
		if got := fileSHA256(t, filepath.Join(dir, m.File)); got != m.ObjectSHA256 {
			t.Errorf("object_sha256 %s, the object on the server hashes to %s", m.ObjectSHA256, got)
		}
		rc, err := a.OpenVerified(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		h2 := sha256.New()
		n, err := io.Copy(h2, rc)
		rc.Close()
		if err != nil || n != m.Bytes || !bytes.Equal(h.Sum(nil), h2.Sum(nil)) {
			t.Errorf("read back %d bytes (%v), want %d with the same hash", n, err, m.Bytes)
		}
		return int64(peak)
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	small := stream("small", 48<<20) - int64(before.HeapInuse)
	big := stream("big", 144<<20) - int64(before.HeapInuse)
	t.Logf("live heap above the start: %d MiB at most streaming 48 MiB, %d MiB streaming 144 MiB", small>>20, big>>20)
	if big-small > 32<<20 {
		t.Errorf("live heap above the start: %d MiB streaming a 144 MiB body, %d MiB streaming a 48 MiB one: it grows with the body", big>>20, small>>20)
	}

	// Aborted after some data: no object, nothing the server shows.
	e, err := a.Create(ctx, Meta{Endpoint: "instruments", SnapshotTime: t0.Add(time.Minute), RunID: "gone", Source: "sim", Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		e.Write(next())
	}
	e.Abort()
	snaps, err := a.List(ctx, nil, time.Time{}, time.Time{})
	if err != nil || len(snaps) != 2 || len(snaps[0].Problems)+len(snaps[1].Problems) != 0 || snaps[0].RunID == "gone" || snaps[1].RunID == "gone" {
		t.Errorf("after an abort the bucket lists %+v (%v)", snaps, err)
	}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(p, "gone") {
			t.Errorf("the aborted body is on the server: %s", p)
		}
		return nil
	})
}
