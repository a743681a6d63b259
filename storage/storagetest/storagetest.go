// Package storagetest is the conformance suite every storage.Store passes:
// run against the local folder and against a real S3 server (versitygw).
package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/datadir"
	"github.com/optlake/optlake/storage"
)

// Run runs the suite; open returns a fresh, empty store for each subtest.
func Run(t *testing.T, open func(t *testing.T) storage.Store) {
	ctx := context.Background()
	tests := []struct {
		name string
		f    func(t *testing.T, s storage.Store)
	}{
		{"put and read back", func(t *testing.T, s storage.Store) {
			mustPut(t, s, "runs/run-1.json", []byte(`{"ok":true}`))
			if got := mustRead(t, s, "runs/run-1.json"); string(got) != `{"ok":true}` {
				t.Fatalf("read %q", got)
			}
			info, err := s.Stat(ctx, "runs/run-1.json")
			if err != nil || info.Size != 11 || info.Name != "runs/run-1.json" {
				t.Fatalf("stat = %+v, %v", info, err)
			}
		}},
		{"visible whole or not at all", func(t *testing.T, s storage.Store) {
			w, err := s.Create(ctx, "hist/date=2026-11-24/part-0.parquet")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write([]byte("first half ")); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Stat(ctx, "hist/date=2026-11-24/part-0.parquet"); !errors.Is(err, storage.ErrNotExist) {
				t.Fatalf("stat of an uncommitted object: %v, want ErrNotExist", err)
			}
			if l := mustList(t, s, ""); len(l) != 0 {
				t.Fatalf("list shows an in-flight object: %+v", l)
			}
			if _, err := w.Write([]byte("second half")); err != nil {
				t.Fatal(err)
			}
			if err := w.Commit(); err != nil {
				t.Fatal(err)
			}
			if got := mustRead(t, s, "hist/date=2026-11-24/part-0.parquet"); string(got) != "first half second half" {
				t.Fatalf("read %q", got)
			}
		}},
		{"overwrite replaces", func(t *testing.T, s storage.Store) {
			mustPut(t, s, "a/x", []byte("old old old"))
			w, err := s.Create(ctx, "a/x")
			if err != nil {
				t.Fatal(err)
			}
			w.Write([]byte("new"))
			if got := mustRead(t, s, "a/x"); string(got) != "old old old" {
				t.Fatalf("before commit read %q, want the old object", got)
			}
			if err := w.Commit(); err != nil {
				t.Fatal(err)
			}
			if got := mustRead(t, s, "a/x"); string(got) != "new" {
				t.Fatalf("read %q", got)
			}
			if l := mustList(t, s, "a/"); len(l) != 1 {
				t.Fatalf("list after overwrite: %+v", l)
			}
		}},
		{"abort leaves nothing", func(t *testing.T, s storage.Store) {
			w, err := s.Create(ctx, "t/date=2026-11-24/big.parquet")
			if err != nil {
				t.Fatal(err)
			}
			// More than one part, so a bucket has started a multipart upload.
			if _, err := w.Write(randBytes(storage.PartSize + 1000)); err != nil {
				t.Fatal(err)
			}
			if err := w.Abort(); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Stat(ctx, "t/date=2026-11-24/big.parquet"); !errors.Is(err, storage.ErrNotExist) {
				t.Fatalf("stat after abort: %v", err)
			}
			if l := mustList(t, s, ""); len(l) != 0 {
				t.Fatalf("list after abort: %+v", l)
			}
			if err := w.Commit(); err == nil {
				t.Fatal("commit after abort succeeded")
			}
		}},
		{"list by prefix with date folders", func(t *testing.T, s storage.Store) {
			names := []string{"hist/date=2026-11-23/a.parquet", "hist/date=2026-11-24/a.parquet",
				"hist/date=2026-11-24/b.parquet", "histx/c", "rejects/date=2026-11-24/r.jsonl"}
			for _, n := range names {
				mustPut(t, s, n, []byte(n))
			}
			got := names0(mustList(t, s, "hist/"))
			want := "[hist/date=2026-11-23/a.parquet hist/date=2026-11-24/a.parquet hist/date=2026-11-24/b.parquet]"
			if fmt.Sprint(got) != want {
				t.Fatalf("list hist/ = %v, want %v", got, want)
			}
			if got := names0(mustList(t, s, "hist/date=2026-11-24/")); len(got) != 2 {
				t.Fatalf("list one day = %v", got)
			}
			if got := names0(mustList(t, s, "hist")); len(got) != 4 {
				t.Fatalf("list prefix hist (no slash) = %v", got)
			}
			if got := mustList(t, s, ""); len(got) != len(names) {
				t.Fatalf("list all = %v", names0(got))
			}
			for _, i := range mustList(t, s, "rejects/") {
				if i.Size != int64(len(i.Name)) {
					t.Fatalf("size of %s = %d", i.Name, i.Size)
				}
			}
		}},
		{"delete is idempotent", func(t *testing.T, s storage.Store) {
			mustPut(t, s, "d/x", []byte("x"))
			for range 2 {
				if err := s.Delete(ctx, "d/x"); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Delete(ctx, "never/was"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Open(ctx, "d/x"); !errors.Is(err, storage.ErrNotExist) {
				t.Fatalf("open after delete: %v", err)
			}
		}},
		{"ranged reads", func(t *testing.T, s storage.Store) {
			data := randBytes(100000)
			mustPut(t, s, "r/obj", data)
			r, err := s.Open(ctx, "r/obj")
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if r.Size() != int64(len(data)) {
				t.Fatalf("size %d", r.Size())
			}
			buf := make([]byte, 1000)
			if n, err := r.ReadAt(buf, 5000); n != 1000 || err != nil || !bytes.Equal(buf, data[5000:6000]) {
				t.Fatalf("ReadAt middle: n=%d err=%v equal=%v", n, err, bytes.Equal(buf, data[5000:6000]))
			}
			// The Parquet footer: the last 8 bytes.
			if n, err := r.ReadAt(buf[:8], r.Size()-8); n != 8 || (err != nil && err != io.EOF) || !bytes.Equal(buf[:8], data[len(data)-8:]) {
				t.Fatalf("ReadAt tail: n=%d err=%v", n, err)
			}
			if n, err := r.ReadAt(buf, r.Size()-10); n != 10 || err != io.EOF {
				t.Fatalf("ReadAt past the end: n=%d err=%v, want 10, EOF", n, err)
			}
			all, err := io.ReadAll(r)
			if err != nil || !bytes.Equal(all, data) {
				t.Fatalf("Read all: %d bytes, %v", len(all), err)
			}
		}},
		{"large streamed object", func(t *testing.T, s storage.Store) {
			// > 2 parts of unknown total size, written in small pieces.
			data := randBytes(2*storage.PartSize + 3<<20)
			w, err := s.Create(ctx, "big/date=2026-11-24/listing.json")
			if err != nil {
				t.Fatal(err)
			}
			for off := 0; off < len(data); off += 64 << 10 {
				if _, err := w.Write(data[off:min(off+64<<10, len(data))]); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Commit(); err != nil {
				t.Fatal(err)
			}
			if got := mustRead(t, s, "big/date=2026-11-24/listing.json"); !bytes.Equal(got, data) {
				t.Fatalf("read back %d bytes, want %d equal", len(got), len(data))
			}
			r, err := s.Open(ctx, "big/date=2026-11-24/listing.json")
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("streamed read back %d bytes (%v), want %d equal", len(got), err, len(data))
			}
		}},
		{"create exclusive", func(t *testing.T, s storage.Store) {
			w, err := s.CreateExclusive(ctx, "lease")
			if err != nil {
				t.Fatal(err)
			}
			w.Write([]byte("one"))
			if err := w.Commit(); err != nil {
				t.Fatal(err)
			}
			w, err = s.CreateExclusive(ctx, "lease")
			if err == nil {
				w.Write([]byte("two"))
				err = w.Commit()
			}
			if !errors.Is(err, storage.ErrExist) {
				t.Fatalf("second exclusive create: %v, want ErrExist", err)
			}
			if got := mustRead(t, s, "lease"); string(got) != "one" {
				t.Fatalf("read %q", got)
			}
		}},
		{"lease refused while held, free after release", func(t *testing.T, s storage.Store) {
			a, err := storage.AcquireLease(ctx, s, "lake.lease", 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			_, err = storage.AcquireLease(ctx, s, "lake.lease", 30*time.Second)
			var le *datadir.LockedError
			if !errors.As(err, &le) || !errors.Is(err, datadir.ErrLocked) {
				t.Fatalf("second acquire: %v, want a LockedError", err)
			}
			if !strings.Contains(err.Error(), a.Holder()) || !strings.Contains(err.Error(), s.String()) {
				t.Fatalf("refusal %q does not name the holder %q and the store", err, a.Holder())
			}
			if err := a.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Stat(ctx, "lake.lease"); !errors.Is(err, storage.ErrNotExist) {
				t.Fatalf("lease object after release: %v", err)
			}
			b, err := storage.AcquireLease(ctx, s, "lake.lease", 30*time.Second)
			if err != nil {
				t.Fatalf("acquire after release: %v", err)
			}
			b.Release(ctx)
		}},
		{"lease of a dead holder is taken over after its TTL", func(t *testing.T, s storage.Store) {
			dead := `{"holder":"pid 1 on deadhost","token":"t0","expires":"` + time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano) + `"}`
			mustPut(t, s, "lake.lease", []byte(dead))
			l, err := storage.AcquireLease(ctx, s, "lake.lease", 30*time.Second)
			if err != nil {
				t.Fatalf("take over a stale lease: %v", err)
			}
			defer l.Release(ctx)
			if got := mustRead(t, s, "lake.lease"); !strings.Contains(string(got), l.Holder()) {
				t.Fatalf("lease object after takeover: %s", got)
			}
			// Not stale yet: refused.
			live := `{"holder":"pid 2 on livehost","token":"t1","expires":"` + time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano) + `"}`
			mustPut(t, s, "other.lease", []byte(live))
			if _, err := storage.AcquireLease(ctx, s, "other.lease", 30*time.Second); !errors.Is(err, datadir.ErrLocked) || !strings.Contains(err.Error(), "livehost") {
				t.Fatalf("acquire of a live lease: %v", err)
			}
		}},
		{"lease is renewed", func(t *testing.T, s storage.Store) {
			l, err := storage.AcquireLease(ctx, s, "lake.lease", 900*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			first := string(mustRead(t, s, "lake.lease"))
			for i := 0; string(mustRead(t, s, "lake.lease")) == first; i++ {
				if i > 600 {
					t.Fatal("lease object never renewed in 60s")
				}
				time.Sleep(100 * time.Millisecond)
			}
			select {
			case <-l.Lost():
				t.Fatalf("lease lost: %v", l.Err())
			default:
			}
			// Another writer takes it (as after a stale takeover): the
			// holder's next renewal notices and closes Lost.
			mustPut(t, s, "lake.lease", []byte(`{"holder":"pid 3 on thief","token":"t3","expires":"`+time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)+`"}`))
			select {
			case <-l.Lost():
			case <-time.After(60 * time.Second):
				t.Fatal("a taken-over lease was never reported lost")
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if got := mustRead(t, s, "lake.lease"); !strings.Contains(string(got), "thief") {
				t.Fatalf("release deleted or replaced another holder's lease: %s", got)
			}
		}},
		{"missing object", func(t *testing.T, s storage.Store) {
			_, err := s.Open(ctx, "no/such")
			if !errors.Is(err, storage.ErrNotExist) {
				t.Fatalf("open: %v", err)
			}
			if !bytes.Contains([]byte(err.Error()), []byte(s.String())) {
				t.Fatalf("error %q does not name the store %s", err, s)
			}
		}},
		{"delimiter listing: one level", func(t *testing.T, s storage.Store) {
			for _, n := range []string{"t1/date=2026-11-24/a.parquet", "t1/date=2026-11-25/b.parquet", "t1/top.json",
				"t2/x", "root.json", "raw/e/date=2026-11-24/y.json.zst"} {
				mustPut(t, s, n, []byte("12345"))
			}
			w, err := s.Create(ctx, "t1/in-flight.parquet")
			if err != nil {
				t.Fatal(err)
			}
			defer w.Abort()
			w.Write([]byte("not yet"))
			for _, tc := range []struct {
				dir  string
				want []string
			}{
				{"", []string{"raw/", "root.json", "t1/", "t2/"}},
				{"t1/", []string{"t1/date=2026-11-24/", "t1/date=2026-11-25/", "t1/top.json"}},
				{"t1/date=2026-11-24/", []string{"t1/date=2026-11-24/a.parquet"}},
				{"absent/", nil},
			} {
				l, err := s.ListDir(ctx, tc.dir)
				if err != nil {
					t.Fatalf("ListDir(%q): %v", tc.dir, err)
				}
				if got := names0(l); fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Fatalf("ListDir(%q) = %q, want %q", tc.dir, got, tc.want)
				}
				for _, in := range l {
					if want := int64(5); !strings.HasSuffix(in.Name, "/") && in.Size != want {
						t.Fatalf("ListDir(%q): %+v, want size %d", tc.dir, in, want)
					}
				}
			}
			if _, err := s.ListDir(ctx, "t1"); err == nil {
				t.Fatal(`ListDir("t1") (no trailing '/'): no error`)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, open(t)) })
	}
	t.Run("swapper", func(t *testing.T) { swap(t, open) })
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(n), 7))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func names0(l []storage.Info) []string {
	var out []string
	for _, i := range l {
		out = append(out, i.Name)
	}
	return out
}

func mustPut(t *testing.T, s storage.Store, name string, data []byte) {
	t.Helper()
	if err := s.Put(context.Background(), name, data); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, s storage.Store, name string) []byte {
	t.Helper()
	b, err := storage.ReadAll(context.Background(), s, name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustList(t *testing.T, s storage.Store, prefix string) []storage.Info {
	t.Helper()
	l, err := s.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
