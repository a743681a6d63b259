package compact

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/storage"
)

// When the spill folder cannot be made (here TMPDIR names a file, so
// MkdirTemp fails as on ENOSPC or EMFILE), the compaction fails and leaves
// the lake as it was; Recover and Close then remove nothing outside the
// folders optlake made: the temp folder's stand-in and its neighbour stay.
func TestSpillFolderNotMade(t *testing.T) {
	base := t.TempDir()
	notADir := filepath.Join(base, "tmp")
	neighbour := filepath.Join(base, "neighbour")
	for _, f := range []string{notADir, neighbour} {
		if err := os.WriteFile(f, []byte("not optlake's"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("TMPDIR", notADir)

	dir := filepath.Join(base, "lake")
	for k := range 3 {
		writeSnap(t, dir, schema.Instruments, snapAt(day1, k), 50, 1)
	}
	part := filepath.Join(dir, "instruments", "date=2026-11-20")
	before := names(t, part)
	bs := &Folders{St: notLocal{storage.NewLocal(dir)}}
	now := func() time.Time { return day1.AddDate(0, 0, 2) }
	if _, err := Compact(context.Background(), Options{Target: bs, Now: now}); err == nil {
		t.Fatal("compaction without a spill folder succeeded")
	}
	if err := bs.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := bs.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{notADir, neighbour} {
		if b, err := os.ReadFile(f); err != nil || string(b) != "not optlake's" {
			t.Fatalf("%s touched: %q %v", f, b, err)
		}
	}
	if got := names(t, part); !slices.Equal(got, before) {
		t.Fatalf("partition changed: %v, was %v", got, before)
	}
}
