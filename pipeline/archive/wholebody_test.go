package archive

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// inMemory is what a reader of OpenVerified's bodies may ask for: the body
// whole (jsontok.InMemory).
type inMemory interface {
	InMemory() ([]byte, bool)
}

// A verified body of at most decodeWholeMax bytes is decoded whole and can
// be handed over in memory; either way (in memory or read) it is exactly the
// body archived, also when the pooled buffers go from one body to the next,
// and also when its metadata's size is wrong (it is then streamed); a closed
// body hands over nothing more.
func TestOpenVerifiedWhole(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := New(dir)
	var metas []Meta
	var bodies [][]byte
	for i := range 4 {
		body := bytes.Repeat([]byte(fmt.Sprintf(`{"instrument_name":"BTC-%d","n":%d},`, i, i*i)), 3000-500*i)
		m := put(t, a, Meta{Endpoint: "instruments", SnapshotTime: t0.Add(time.Duration(i) * time.Second), RunID: "run-1", Attempt: 1}, body, 200, true)
		metas, bodies = append(metas, m), append(bodies, body)
	}
	for round := range 2 {
		for i, m := range metas {
			rc, err := a.OpenVerified(ctx, m)
			if err != nil {
				t.Fatal(err)
			}
			var got []byte
			if round == 0 {
				b, ok := rc.(inMemory).InMemory()
				if !ok {
					t.Fatalf("body %d (%d bytes) not in memory", i, m.Bytes)
				}
				got = b
				if n, err := rc.Read(make([]byte, 10)); n != 0 || err != io.EOF {
					t.Fatalf("body %d: a read after InMemory: %d, %v, want the end", i, n, err)
				}
			} else if got, err = io.ReadAll(rc); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, bodies[i]) {
				t.Fatalf("round %d: body %d: %d bytes back, want the %d archived", round, i, len(got), len(bodies[i]))
			}
			if err := rc.Close(); err != nil {
				t.Fatal(err)
			}
			if _, ok := rc.(inMemory).InMemory(); ok {
				t.Fatal("a closed body handed over in memory")
			}
			if _, err := rc.Read(make([]byte, 10)); err == nil {
				t.Fatal("a closed body read on")
			}
		}
	}
	for _, size := range []int64{metas[1].Bytes - 1, metas[1].Bytes + 1, 1} {
		m := metas[1]
		m.Bytes = size
		rc, err := a.OpenVerified(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := rc.(inMemory).InMemory(); ok {
			t.Fatalf("metadata bytes %d, body %d: handed over in memory", size, len(bodies[1]))
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, bodies[1]) {
			t.Fatalf("metadata bytes %d: %d bytes back (%v), want the %d archived", size, len(got), err, len(bodies[1]))
		}
	}
}

// A body whose frame is corrupt, in an object that matches its metadata
// (as if written so), reads back as the streaming decoder reads it: what
// it decodes, then its error.
func TestOpenVerifiedWholeCorrupt(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := New(dir)
	body := bytes.Repeat([]byte(`{"instrument_name":"BTC-27DEC26-100000-C","n":7},`), 3000)
	for _, at := range []int{20, 200, -40} {
		m := put(t, a, Meta{Endpoint: "instruments", SnapshotTime: t0, RunID: fmt.Sprint("run", at), Attempt: 1}, body, 200, true)
		file := filepath.Join(dir, m.File)
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		b[(at+len(b))%len(b)] ^= 0x5a
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		m.ObjectSHA256 = fileSHA256(t, file)
		rc, err := a.OpenVerified(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		got, gerr := io.ReadAll(rc)
		rc.Close()
		zr, err := a.decode(io.NopCloser(bytes.NewReader(b)), trusted)
		var want []byte
		if err == nil {
			want, err = io.ReadAll(zr)
			zr.Close()
		}
		if !bytes.Equal(got, want) || (gerr == nil) != (err == nil) {
			t.Fatalf("byte %d flipped: %d bytes (%v), the streaming decoder %d (%v)", at, len(got), gerr, len(want), err)
		}
	}
}
