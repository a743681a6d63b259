package archive

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 22, 10, 15, 0, 250_000_000, time.UTC)

// put archives body as one response and returns its metadata.
func put(t *testing.T, a *Archive, m Meta, body []byte, status int, complete bool) Meta {
	t.Helper()
	e, err := a.Create(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	for chunk := range slices.Chunk(body, 1000) { // as a body streams in
		if _, err := e.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	errMsg := ""
	if !complete {
		errMsg = "unexpected EOF"
	}
	got, err := e.Finish(status, "application/json", complete, errMsg)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func read(t *testing.T, dir, file string) []byte {
	t.Helper()
	rc, err := Open(dir, file)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A body comes back byte for byte; its sidecar says how much, its hash and
// where; nothing temporary is left.
func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	a := New(dir)
	body := bytes.Repeat([]byte(`{"instrument_name":"BTC-27DEC26-100000-C","index_price":"97000.5"},`), 5000)
	m := put(t, a, Meta{Endpoint: "instruments", SnapshotTime: t0, RunID: "run-1", Source: "sim", Attempt: 1, URL: "http://venue/x"}, body, 200, true)
	if m.Bytes != int64(len(body)) || m.ObjectSHA256 != fileSHA256(t, filepath.Join(dir, m.File)) || m.SHA256 != "" || !m.Complete || m.Compression != "zstd" {
		t.Fatalf("meta %+v", m)
	}
	want := filepath.Join("raw", "instruments", "date=2026-11-22", "20261122T101500.250Z-run-1-r000-a1.json.zst")
	if m.File != want {
		t.Fatalf("file %s, want %s", m.File, want)
	}
	if got := read(t, dir, m.File); !bytes.Equal(got, body) {
		t.Fatalf("read back %d bytes, archived %d", len(got), len(body))
	}
	st, err := os.Stat(filepath.Join(dir, m.File))
	if err != nil || st.Size() >= int64(len(body))/4 {
		t.Errorf("body file is %v bytes (%v): not compressed", st.Size(), err)
	}
	back, err := ReadMeta(filepath.Join(dir, MetaPath(m.File)))
	if err != nil || back.ObjectSHA256 != m.ObjectSHA256 || back.RunID != "run-1" || !back.SnapshotTime.Equal(t0) {
		t.Fatalf("sidecar %+v (%v)", back, err)
	}
	ents, _ := os.ReadDir(filepath.Join(dir, filepath.Dir(m.File)))
	if len(ents) != 2 {
		t.Errorf("day folder holds %v, want the body and its sidecar", ents)
	}
}

// A body being written is hidden from List; an aborted one leaves nothing.
func TestInFlightAndAbort(t *testing.T) {
	dir := t.TempDir()
	a := New(dir)
	e, err := a.Create(context.Background(), Meta{Endpoint: "instruments", SnapshotTime: t0, RunID: "run-1", Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	e.Write([]byte(`[{"instruments":[]}]`))
	snaps, err := List(dir, nil, time.Time{}, time.Time{})
	if err != nil || len(snaps) != 0 {
		t.Fatalf("List during the write: %+v (%v)", snaps, err)
	}
	e.Abort()
	e.Abort() // twice is fine
	var left []string
	filepath.WalkDir(filepath.Join(dir, "raw"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, p)
		}
		return nil
	})
	if len(left) != 0 {
		t.Fatalf("abort left %v", left)
	}
	if _, err := e.Finish(200, "", true, ""); err == nil {
		t.Error("Finish after Abort succeeded")
	}
}

// List groups bodies by snapshot (oldest first), keeps per request the last
// attempt answered 2xx, names what cannot be replayed, and honours the
// endpoint filter and the [from, to) range.
func TestList(t *testing.T) {
	dir := t.TempDir()
	a := New(dir)
	t1, t2, t3 := t0, t0.Add(5*time.Minute), t0.Add(24*time.Hour)
	// Snapshot 1: a 503 then a 200 for request 0; request 1 answered at once.
	put(t, a, Meta{Endpoint: "instruments", SnapshotTime: t1, RunID: "a", Request: 0, Requests: 2, Attempt: 1}, []byte("busy"), 503, true)
	put(t, a, Meta{Endpoint: "instruments", SnapshotTime: t1, RunID: "a", Request: 0, Requests: 2, Attempt: 2}, []byte("[]"), 200, true)
	put(t, a, Meta{Endpoint: "instruments", SnapshotTime: t1, RunID: "a", Request: 1, Requests: 2, Attempt: 1}, []byte("[1]"), 200, true)
	put(t, a, Meta{Endpoint: "account_summary", Account: "main", SnapshotTime: t1, RunID: "a", Attempt: 1}, []byte("{}"), 200, true)
	// Snapshot 2: a body cut off, and one whose sidecar is missing (a crash).
	put(t, a, Meta{Endpoint: "instruments", SnapshotTime: t2, RunID: "b", Attempt: 1}, []byte("[{"), 200, false)
	lost := put(t, a, Meta{Endpoint: "account_summary", SnapshotTime: t2, RunID: "b", Attempt: 1}, []byte("{}"), 200, true)
	if err := os.Remove(filepath.Join(dir, MetaPath(lost.File))); err != nil {
		t.Fatal(err)
	}
	// Snapshot 3, the next day.
	put(t, a, Meta{Endpoint: "instruments", SnapshotTime: t3, RunID: "c", Attempt: 1}, []byte("[]"), 200, true)

	snaps, err := List(dir, nil, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) != 3 || snaps[0].RunID != "a" || snaps[1].RunID != "b" || snaps[2].RunID != "c" {
		t.Fatalf("snapshots %+v", snaps)
	}
	var got []string
	for _, m := range snaps[0].Bodies {
		got = append(got, fmt.Sprintf("%s/%d/a%d", m.Endpoint, m.Request, m.Attempt))
	}
	if want := []string{"account_summary/0/a1", "instruments/0/a2", "instruments/1/a1"}; !slices.Equal(got, want) {
		t.Errorf("snapshot a bodies %v, want %v", got, want)
	}
	if len(snaps[0].Problems) != 0 {
		t.Errorf("snapshot a problems %v", snaps[0].Problems)
	}
	if len(snaps[1].Bodies) != 0 || len(snaps[1].Problems) != 2 ||
		!strings.Contains(strings.Join(snaps[1].Problems, "\n"), "body cut off (unexpected EOF)") ||
		!strings.Contains(strings.Join(snaps[1].Problems, "\n"), "no metadata") {
		t.Errorf("snapshot b: bodies %+v, problems %q", snaps[1].Bodies, snaps[1].Problems)
	}

	// Endpoint filter and range: to is exclusive.
	snaps, err = List(dir, []string{"instruments"}, t1, t3)
	if err != nil || len(snaps) != 2 || snaps[0].RunID != "a" || len(snaps[0].Bodies) != 2 || snaps[1].RunID != "b" {
		t.Fatalf("instruments in [t1, t3): %+v (%v)", snaps, err)
	}
	snaps, err = List(dir, nil, t2.Add(time.Millisecond), time.Time{})
	if err != nil || len(snaps) != 1 || snaps[0].RunID != "c" {
		t.Fatalf("after t2: %+v (%v)", snaps, err)
	}
	if snaps, err := List(t.TempDir(), nil, time.Time{}, time.Time{}); err != nil || len(snaps) != 0 {
		t.Fatalf("empty data directory: %+v (%v)", snaps, err)
	}
}

// Names from the venue or the config cannot leave the archive's folder.
func TestNamesStayInside(t *testing.T) {
	for _, m := range []Meta{
		{Endpoint: "../../etc", RunID: "x", SnapshotTime: t0},
		{Endpoint: "instruments", RunID: "../../../passwd", SnapshotTime: t0},
		{Endpoint: "", RunID: "", SnapshotTime: t0},
	} {
		p := BodyPath(m)
		if !filepath.IsLocal(p) || !strings.HasPrefix(p, "raw"+string(filepath.Separator)) || strings.Count(p, string(filepath.Separator)) != 3 {
			t.Errorf("BodyPath(%q, %q) = %s", m.Endpoint, m.RunID, p)
		}
	}
}

// One Archive reads many bodies with reused decoders: each comes back whole
// and exact, also after a body that was left half read, after a corrupt
// one, and from several goroutines at once; a closed body reads no more.
func TestOpenReusesDecodersSafely(t *testing.T) {
	dir := t.TempDir()
	a := New(dir)
	var files []string
	var bodies [][]byte
	for i := range 8 {
		body := bytes.Repeat([]byte(fmt.Sprintf(`{"instrument_name":"BTC-%d","n":%d},`, i, i*i)), 2000+1000*i)
		m := put(t, a, Meta{Endpoint: "instruments", SnapshotTime: t0.Add(time.Duration(i) * time.Second), RunID: fmt.Sprintf("run-%d", i), Source: "sim", Attempt: 1}, body, 200, true)
		files, bodies = append(files, m.File), append(bodies, body)
	}
	corrupt := filepath.Join(dir, files[3])
	raw, err := os.ReadFile(corrupt)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 0xff
	if err := os.WriteFile(corrupt, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	readAll := func(i int) ([]byte, error) {
		rc, err := a.Open(context.Background(), files[i])
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return io.ReadAll(rc)
	}
	for round := range 2 {
		for i := range files {
			if i == 5 { // half read, then closed
				rc, err := a.Open(context.Background(), files[i])
				if err != nil {
					t.Fatal(err)
				}
				if _, err := io.ReadFull(rc, make([]byte, 100)); err != nil {
					t.Fatal(err)
				}
				if err := rc.Close(); err != nil {
					t.Fatal(err)
				}
				if _, err := rc.Read(make([]byte, 10)); err == nil {
					t.Fatal("a closed body read on")
				}
			}
			got, err := readAll(i)
			if i == 3 {
				if err == nil && bytes.Equal(got, bodies[i]) {
					t.Fatalf("round %d: the corrupt body read back whole", round)
				}
				continue
			}
			if err != nil || !bytes.Equal(got, bodies[i]) {
				t.Fatalf("round %d: body %d: %d bytes (%v), want %d", round, i, len(got), err, len(bodies[i]))
			}
		}
	}
	errs := make(chan error, len(files))
	for i := range files {
		go func() {
			got, err := readAll(i)
			if i != 3 && (err != nil || !bytes.Equal(got, bodies[i])) {
				err = fmt.Errorf("body %d read concurrently: %d bytes (%v)", i, len(got), err)
			} else {
				err = nil
			}
			errs <- err
		}()
	}
	for range files {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// An attempt cut off (or left without its metadata by a crash) is a
// problem of its snapshot only when no later attempt of the same request
// (and page) was archived whole: a retried page is not reported.
func TestListRetriedAttemptsAreNoProblem(t *testing.T) {
	dir := t.TempDir()
	a := New(dir)
	body := []byte(`{"data":[{"instrument_name":"BTC-1"}]}`)
	page := func(p, attempt int, complete bool) Meta {
		return put(t, a, Meta{Endpoint: "instruments", SnapshotTime: t0, RunID: "run-1", Source: "sim", Page: p, Attempt: attempt, LastPage: p == 3}, body, 200, complete)
	}
	// Pages 1 and 2 cut off once each, then answered whole; page 3 whole.
	page(1, 1, false)
	page(1, 2, true)
	cut := page(2, 1, false)
	if err := os.Remove(filepath.Join(dir, MetaPath(cut.File))); err != nil {
		t.Fatal(err)
	}
	page(2, 2, true)
	page(3, 1, true)
	// Another snapshot whose only attempt was cut off: a problem.
	lone := put(t, a, Meta{Endpoint: "instruments", SnapshotTime: t0.Add(time.Minute), RunID: "run-2", Source: "sim", Attempt: 1}, body, 200, false)
	snaps, err := a.List(context.Background(), []string{"instruments"}, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) != 2 {
		t.Fatalf("%d snapshots, want 2", len(snaps))
	}
	if s := snaps[0]; len(s.Problems) != 0 || len(s.Bodies) != 3 || s.Bodies[0].Attempt != 2 || s.Bodies[1].Attempt != 2 {
		t.Errorf("retried snapshot: problems %q, %d bodies %+v", s.Problems, len(s.Bodies), s.Bodies)
	}
	if s := snaps[1]; len(s.Problems) != 1 || !strings.Contains(s.Problems[0], filepath.Base(lone.File)+": body cut off") {
		t.Errorf("cut-off snapshot: problems %q", s.Problems)
	}
}
