package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// BlockFolder moves the folder dir aside and puts a file in its place, so
// that nothing can be read from or written under it (a fault of the data
// directory); unblock puts the folder back.
func BlockFolder(t testing.TB, dir string) (unblock func()) {
	t.Helper()
	aside := filepath.Join(t.TempDir(), filepath.Base(dir))
	if err := os.Rename(dir, aside); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("in the way"), 0o644); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if err := os.Remove(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(aside, dir); err != nil {
			t.Fatal(err)
		}
	}
}
