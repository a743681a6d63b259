package archive

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fileSHA256 is the hex sha256 of the file at path, as sha256sum prints it.
func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// randomBody is n bytes that zstd cannot compress (an object as large as
// the body).
func randomBody(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// meta.json's object_sha256 is the sha256 of the stored .json.zst file
// (what sha256sum prints); OpenVerified reads the body back, and refuses,
// before decoding anything, an object changed by one byte.
func TestObjectSHA256(t *testing.T) {
	sha256sum, _ := exec.LookPath("sha256sum")
	for _, tc := range []struct {
		name string
		m    Meta
		body []byte
	}{
		{"small", Meta{Endpoint: "instruments"}, bytes.Repeat([]byte(`{"instrument_name":"BTC-27DEC26-100000-C"},`), 3000)},
		{"empty", Meta{Endpoint: "instruments"}, nil},
		{"page", Meta{Endpoint: "trades", Page: 2}, bytes.Repeat([]byte(`{"trade_id":"1","price":97000.5},`), 500)},
		{"object read twice", Meta{Endpoint: "instruments"}, randomBody(verifyInMemory + 1<<20)}, // above what is hashed in memory
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			a := New(dir)
			tc.m.SnapshotTime, tc.m.RunID, tc.m.Attempt = t0, "run-1", 1
			m := put(t, a, tc.m, tc.body, 200, true)
			file := filepath.Join(dir, m.File)
			back, err := ReadMeta(filepath.Join(dir, MetaPath(m.File)))
			if err != nil {
				t.Fatal(err)
			}
			if want := fileSHA256(t, file); back.ObjectSHA256 != want || back.SHA256 != "" {
				t.Fatalf("meta.json object_sha256 %q sha256 %q, want object_sha256 %s (the file's) and no body hash", back.ObjectSHA256, back.SHA256, want)
			}
			if sha256sum != "" {
				out, err := exec.Command(sha256sum, file).Output()
				if err != nil || !strings.HasPrefix(string(out), back.ObjectSHA256+" ") {
					t.Errorf("sha256sum: %q (%v), meta.json: %s", out, err, back.ObjectSHA256)
				}
			}
			if got := readVerified(t, a, back); !bytes.Equal(got, tc.body) {
				t.Fatalf("read back %d bytes, archived %d", len(got), len(tc.body))
			}

			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 1
			if err := os.WriteFile(file, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if rc, err := a.OpenVerified(ctx, back); !errors.Is(err, ErrObjectHash) {
				if rc != nil {
					rc.Close()
				}
				t.Fatalf("one byte flipped: OpenVerified error %v, want %v", err, ErrObjectHash)
			}
		})
	}
}

// Metadata written before object_sha256 (the body's sha256 only) still
// opens and reads back.
func TestObjectSHA256OldMeta(t *testing.T) {
	dir := t.TempDir()
	a := New(dir)
	body := bytes.Repeat([]byte(`{"instrument_name":"BTC-27DEC26-100000-C"},`), 3000)
	m := put(t, a, Meta{Endpoint: "instruments", SnapshotTime: t0, RunID: "run-1", Attempt: 1}, body, 200, true)
	sum := sha256.Sum256(body)
	m.ObjectSHA256, m.SHA256 = "", hex.EncodeToString(sum[:])
	if got := readVerified(t, a, m); !bytes.Equal(got, body) {
		t.Fatalf("old meta: read back %d bytes, archived %d", len(got), len(body))
	}
}

func readVerified(t *testing.T, a *Archive, m Meta) []byte {
	t.Helper()
	rc, err := a.OpenVerified(context.Background(), m)
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

// The frame's content checksum (its last 4 bytes) is checked whenever the
// bytes decoded are not the ones hashed against object_sha256: by Open,
// for metadata with the body's hash only, and for an object too large to
// be decoded from the bytes hashed. OpenVerified decodes an object it read
// whole without checking it again (the object's hash was checked on those
// very bytes). Decoders of both kinds are pooled: a trusted one never
// serves a checked read.
func TestFrameChecksumWhereNotVerified(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := New(dir)
	small := bytes.Repeat([]byte(`{"instrument_name":"BTC-27DEC26-100000-C"},`), 3000)
	large := randomBody(verifyInMemory + 1<<20)
	// stored archives body, changes its frame checksum, and returns its
	// metadata with the changed object's hash (as if written so).
	stored := func(i int, body []byte) Meta {
		m := put(t, a, Meta{Endpoint: "instruments", SnapshotTime: t0.Add(time.Duration(i) * time.Second), RunID: "run-1", Attempt: 1}, body, 200, true)
		file := filepath.Join(dir, m.File)
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)-1] ^= 0x40
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		m.ObjectSHA256 = fileSHA256(t, file)
		return m
	}
	mSmall, mLarge := stored(0, small), stored(1, large)
	old := mSmall
	sum := sha256.Sum256(small)
	old.ObjectSHA256, old.SHA256 = "", hex.EncodeToString(sum[:])
	readBack := func(open func() (io.ReadCloser, error)) ([]byte, error) {
		rc, err := open()
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return io.ReadAll(rc)
	}
	for round := range 2 {
		if got := readVerified(t, a, mSmall); !bytes.Equal(got, small) {
			t.Fatalf("round %d: verified object: read back %d bytes, archived %d", round, len(got), len(small))
		}
		for _, tc := range []struct {
			name string
			open func() (io.ReadCloser, error)
		}{
			{"Open", func() (io.ReadCloser, error) { return a.Open(ctx, mSmall.File) }},
			{"body hash only", func() (io.ReadCloser, error) { return a.OpenVerified(ctx, old) }},
			{"object read twice", func() (io.ReadCloser, error) { return a.OpenVerified(ctx, mLarge) }},
		} {
			if got, err := readBack(tc.open); err == nil {
				t.Fatalf("round %d: %s: a changed frame checksum read back %d bytes without an error", round, tc.name, len(got))
			}
		}
	}
}
