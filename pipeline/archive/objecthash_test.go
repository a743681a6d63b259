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
