package parquet

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/storage"
)

// fullDisk is a store whose disk holds free more bytes: a write past them
// fails with ENOSPC, as a file on a full filesystem does.
type fullDisk struct {
	storage.Store
	free int64
}

func (d *fullDisk) Create(ctx context.Context, name string) (storage.Writer, error) {
	w, err := d.Store.Create(ctx, name)
	if err != nil {
		return nil, err
	}
	return &fullWriter{Writer: w, d: d, name: name}, nil
}

type fullWriter struct {
	storage.Writer
	d    *fullDisk
	name string
}

func (w *fullWriter) Write(p []byte) (int, error) {
	if int64(len(p)) <= w.d.free {
		w.d.free -= int64(len(p))
		return w.Writer.Write(p)
	}
	n, _ := w.Writer.Write(p[:w.d.free])
	w.d.free = 0
	return n, &fs.PathError{Op: "write", Path: w.name, Err: syscall.ENOSPC}
}

// A full disk at any byte of a Parquet file is an error naming ENOSPC and
// the file, never a panic (arrow-go panics when it cannot write the file's
// magic number); nothing is left in the data directory, and the same load
// succeeds once there is space. Both writers: pqarrow's (one core) and the
// column writer (several).
func TestFullDiskIsAnError(t *testing.T) {
	rec := record(t, 3000)
	defer rec.Release()
	ctx := context.Background()
	load := func(st storage.Store) error {
		s, err := New(Options{Store: st})
		if err != nil {
			return err
		}
		w, err := s.Open(ctx, schema.Instruments, snap)
		if err != nil {
			return err
		}
		if err := w.Write(ctx, rec); err != nil {
			w.Abort()
			return err
		}
		_, err = w.Commit(ctx)
		return err
	}
	size := func() int64 {
		dir := t.TempDir()
		if err := load(storage.NewLocal(dir)); err != nil {
			t.Fatal(err)
		}
		files, err := filepath.Glob(filepath.Join(dir, "instruments", "*", "*.parquet"))
		if err != nil || len(files) != 1 {
			t.Fatal(files, err)
		}
		fi, err := os.Stat(files[0])
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}()
	for _, procs := range []int{1, 4} {
		prev := runtime.GOMAXPROCS(procs)
		for _, free := range []int64{0, 2, 4, 100, size / 3, size * 9 / 10} {
			dir := t.TempDir()
			err := load(&fullDisk{Store: storage.NewLocal(dir), free: free})
			rel := filepath.ToSlash(Path(schema.Instruments, snap))
			if err == nil || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "ENOSPC") || !strings.Contains(err.Error(), rel) {
				t.Errorf("GOMAXPROCS %d, %d bytes free: %v, want an error naming ENOSPC and %s", procs, free, err, rel)
			}
			if n := dirBytes(t, dir); n != 0 {
				t.Errorf("GOMAXPROCS %d, %d bytes free: %d bytes left behind", procs, free, n)
			}
			if err := load(storage.NewLocal(dir)); err != nil {
				t.Errorf("GOMAXPROCS %d: after space was freed: %v", procs, err)
			}
		}
		runtime.GOMAXPROCS(prev)
	}
}

// dirBytes is the size of the files under dir, hidden ones included.
func dirBytes(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		n += len(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
