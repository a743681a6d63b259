package compact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/optlake/optlake/schema"
	pq "github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/storage"
)

// fullStore is a lake on a local folder whose disk has free bytes left for staged
// files: a write past them fails with ENOSPC.
type fullStore struct {
	*Folders
	free int64
}

func (s *fullStore) Stage(ctx context.Context, p Partition) (Staged, error) {
	st, err := s.Folders.Stage(ctx, p)
	if err != nil {
		return nil, err
	}
	return &fullStaged{Staged: st, s: s}, nil
}

type fullStaged struct {
	Staged
	s *fullStore
}

func (st *fullStaged) Create(name string) (io.WriteCloser, error) {
	w, err := st.Staged.Create(name)
	if err != nil {
		return nil, err
	}
	return &fullFile{WriteCloser: w, s: st.s, name: name}, nil
}

type fullFile struct {
	io.WriteCloser
	s    *fullStore
	name string
}

func (f *fullFile) Write(p []byte) (int, error) {
	if int64(len(p)) <= f.s.free {
		f.s.free -= int64(len(p))
		return f.WriteCloser.Write(p)
	}
	n, _ := f.WriteCloser.Write(p[:f.s.free])
	f.s.free = 0
	return n, &fs.PathError{Op: "write", Path: f.name, Err: syscall.ENOSPC}
}

// A full disk while compaction writes its file (at its first bytes, where
// arrow-go panics, or later) is an error naming ENOSPC and the file; the
// day is untouched, nothing is left in .compact/stage, and the compaction
// succeeds once there is space.
func TestCompactFullDiskIsAnError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := func() time.Time { return day1.AddDate(0, 0, 2) }
	for _, free := range []int64{0, 2, 100, 20_000} {
		t.Run(fmt.Sprintf("%d bytes free", free), func(t *testing.T) {
			t.Parallel() // each in its own lake
			dir := t.TempDir()
			for k := range 4 {
				writeSnap(t, dir, schema.Instruments, snapAt(day1, k), 500, 1)
			}
			part := filepath.Join(dir, "instruments", "date=2026-11-20")
			before, files := rows(t, filepath.Join(part, "*.parquet")), names(t, part)
			st := &fullStore{Folders: &Folders{St: storage.NewLocal(dir), Now: now}, free: free}
			_, err := Compact(ctx, Options{Target: st, Now: now})
			if err == nil || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "ENOSPC") || !strings.Contains(err.Error(), pq.CompactedPrefix) {
				t.Fatalf("%d bytes free: %v, want an error naming ENOSPC and the compacted file", free, err)
			}
			if got := names(t, part); !slices.Equal(got, files) {
				t.Errorf("%d bytes free: the day holds %v, had %v", free, got, files)
			}
			if ents, _ := os.ReadDir(filepath.Join(dir, ".compact", "stage", "instruments")); len(ents) != 0 {
				t.Errorf("%d bytes free: left in .compact/stage: %v", free, ents)
			}
			if _, err := Compact(ctx, Options{Target: localLake(dir), Now: now}); err != nil {
				t.Fatalf("%d bytes free, then space: %v", free, err)
			}
			onlyCompacted(t, part)
			sameRows(t, "after space was freed", rows(t, filepath.Join(part, "*.parquet")), before)
		})
	}
}
