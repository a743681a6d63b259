package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/optlake/optlake/internal/datadir"
)

// Local is a data directory on a local file system. Writes go to a hidden
// temporary file in the target's folder (".<name>.tmp-*", removed by
// datadir.CleanTemp after a crash), are fsynced, renamed into place, and the
// folder is fsynced. Files are 0644, folders 0755.
type Local struct {
	root string
	// sync fsyncs a folder (nil: datadir.SyncDir; tests record them).
	sync func(dir string) error
}

// NewLocal returns the store rooted at dir (created on first write).
func NewLocal(dir string) *Local { return &Local{root: filepath.Clean(dir)} }

// syncDir fsyncs the folder dir.
func (l *Local) syncDir(dir string) error {
	if l.sync != nil {
		return l.sync(dir)
	}
	return datadir.SyncDir(dir)
}

// mkdirAll creates dir and the missing folders above it, each fsynced
// into its parent (datadir.MkdirAll).
func (l *Local) mkdirAll(dir string) error { return datadir.MkdirAll(dir, l.syncDir) }

// LocalDir implements LocalFolder.
func (l *Local) LocalDir() string { return l.root }

func (l *Local) String() string { return l.root }

func (l *Local) Close() error { return nil }

func (l *Local) path(name string) (string, error) {
	if err := checkName(name); err != nil {
		return "", fmt.Errorf("%s: %w", l.root, err)
	}
	return filepath.Join(l.root, filepath.FromSlash(name)), nil
}

func checkName(name string) error {
	if name == "" || strings.HasPrefix(name, "/") || path.Clean(name) != name || name == ".." || strings.HasPrefix(name, "../") {
		return fmt.Errorf("invalid object name %q", name)
	}
	return nil
}

type localWriter struct {
	f         *os.File
	dst       string
	exclusive bool
	done      bool
}

func (l *Local) create(name string, exclusive bool) (Writer, error) {
	p, err := l.path(name)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(p)
	if err := l.mkdirAll(dir); err != nil {
		return nil, fmt.Errorf("create %s: %w", p, err)
	}
	f, err := datadir.CreateTemp(dir, "."+filepath.Base(p)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", p, err)
	}
	return &localWriter{f: f, dst: p, exclusive: exclusive}, nil
}

func (l *Local) Create(_ context.Context, name string) (Writer, error) { return l.create(name, false) }

func (l *Local) CreateExclusive(_ context.Context, name string) (Writer, error) {
	return l.create(name, true)
}

func (w *localWriter) Write(p []byte) (int, error) {
	if w.done {
		return 0, fmt.Errorf("write %s: writer closed", w.dst)
	}
	return w.f.Write(p)
}

func (w *localWriter) Commit() error {
	if w.done {
		return fmt.Errorf("commit %s: writer closed", w.dst)
	}
	w.done = true
	tmp := w.f.Name()
	if !w.exclusive {
		err := datadir.Publish(w.f, w.dst)
		if cerr := w.f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", w.dst, err)
		}
		return nil
	}
	err := w.f.Sync()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// link(2) fails if dst exists: an atomic create-if-absent.
		err = os.Link(tmp, w.dst)
		if errors.Is(err, fs.ErrExist) {
			os.Remove(tmp)
			return fmt.Errorf("create %s: %w", w.dst, ErrExist)
		}
		if err == nil {
			err = os.Remove(tmp)
		}
	}
	if err == nil {
		err = datadir.SyncDir(filepath.Dir(w.dst))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", w.dst, err)
	}
	return nil
}

func (w *localWriter) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	w.f.Close()
	if err := os.Remove(w.f.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("abort %s: %w", w.dst, err)
	}
	return nil
}

func (l *Local) Put(ctx context.Context, name string, data []byte) error {
	w, err := l.Create(ctx, name)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		w.Abort()
		return err
	}
	return w.Commit()
}

type localReader struct {
	*os.File
	size int64
}

func (r *localReader) Size() int64 { return r.size }

func (l *Local) Open(_ context.Context, name string) (Reader, error) {
	p, err := l.path(name)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", p, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open %s: %w", p, err)
	}
	if st.IsDir() {
		f.Close()
		return nil, fmt.Errorf("open %s: is a folder: %w", p, ErrNotExist)
	}
	return &localReader{File: f, size: st.Size()}, nil
}

func (l *Local) Stat(_ context.Context, name string) (Info, error) {
	p, err := l.path(name)
	if err != nil {
		return Info{}, err
	}
	st, err := os.Stat(p)
	if err == nil && st.IsDir() {
		err = fmt.Errorf("is a folder: %w", ErrNotExist)
	}
	if err != nil {
		return Info{}, fmt.Errorf("stat %s: %w", p, err)
	}
	return Info{Name: name, Size: st.Size(), ModTime: st.ModTime()}, nil
}

// IsTemp reports whether a base name is a hidden temporary file of an
// in-flight or crashed write.
func IsTemp(base string) bool {
	return strings.HasPrefix(base, ".") && strings.Contains(base, ".tmp-")
}

func (l *Local) List(_ context.Context, prefix string) ([]Info, error) {
	var out []Info
	// Walk from the deepest folder the prefix names.
	start := l.root
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		start = filepath.Join(l.root, filepath.FromSlash(prefix[:i]))
	}
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || IsTemp(d.Name()) {
			return nil
		}
		rel, err := filepath.Rel(l.root, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		if !strings.HasPrefix(name, prefix) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		out = append(out, Info{Name: name, Size: info.Size(), ModTime: info.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s/%s: %w", l.root, prefix, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (l *Local) ListDir(_ context.Context, dir string) ([]Info, error) {
	if err := checkDir(dir); err != nil {
		return nil, fmt.Errorf("%s: %w", l.root, err)
	}
	ents, err := os.ReadDir(filepath.Join(l.root, filepath.FromSlash(dir)))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s/%s: %w", l.root, dir, err)
	}
	var out []Info
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, Info{Name: dir + e.Name() + "/"})
			continue
		}
		if IsTemp(e.Name()) {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list %s/%s: %w", l.root, dir, err)
		}
		out = append(out, Info{Name: dir + e.Name(), Size: info.Size(), ModTime: info.ModTime()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// checkDir accepts the dir of ListDir: "" or a relative name ending in '/'.
func checkDir(dir string) error {
	if dir == "" {
		return nil
	}
	if !strings.HasSuffix(dir, "/") {
		return fmt.Errorf("list dir %q: want \"\" or a name ending in '/'", dir)
	}
	return checkName(strings.TrimSuffix(dir, "/"))
}

func (l *Local) Delete(_ context.Context, name string) error {
	p, err := l.path(name)
	if err != nil {
		return err
	}
	err = os.Remove(p)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil
	}
	if err == nil {
		err = l.syncDir(filepath.Dir(p)) // the removal survives a crash
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", p, err)
	}
	return nil
}

var _ io.ReaderAt = (*localReader)(nil)

var _ Swapper = (*Local)(nil)

// Rename implements Swapper with renameat2(RENAME_NOREPLACE). Where the
// file system refuses the flag, it checks that to is absent, then renames
// (not atomic against a second writer; callers hold the lock).
func (l *Local) Rename(_ context.Context, from, to string) error {
	src, dst, err := l.paths(from, to)
	if err != nil {
		return err
	}
	if err := l.mkdirAll(filepath.Dir(dst)); err != nil {
		return fmt.Errorf("rename %s: %w", from, err)
	}
	err = renameNoReplace(src, dst)
	if errors.Is(err, errors.ErrUnsupported) {
		if _, err = os.Lstat(dst); err == nil {
			err = fs.ErrExist
		} else if errors.Is(err, fs.ErrNotExist) {
			err = os.Rename(src, dst)
		}
	}
	if err == nil {
		err = l.syncDirs(src, dst)
	}
	if err != nil {
		return fmt.Errorf("rename %s to %s: %w", from, to, err)
	}
	return nil
}

// Exchange implements Swapper with renameat2(RENAME_EXCHANGE).
func (l *Local) Exchange(_ context.Context, a, b string) error {
	pa, pb, err := l.paths(a, b)
	if err != nil {
		return err
	}
	if _, err := os.Stat(pa); err != nil {
		return fmt.Errorf("exchange %s: %w", a, err)
	}
	if err := l.mkdirAll(pb); err != nil {
		return fmt.Errorf("exchange %s: %w", b, err)
	}
	err = exchange(pa, pb)
	if err == nil {
		err = l.syncDirs(pa, pb)
	}
	if err != nil {
		return fmt.Errorf("exchange %s and %s: %w", a, b, err)
	}
	return nil
}

// RemoveAll implements Swapper.
func (l *Local) RemoveAll(_ context.Context, dir string) error {
	p, err := l.path(dir)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(p); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}

func (l *Local) paths(a, b string) (string, string, error) {
	pa, err := l.path(a)
	if err != nil {
		return "", "", err
	}
	pb, err := l.path(b)
	return pa, pb, err
}

// syncDirs fsyncs the folders holding a and b (once when the same).
func (l *Local) syncDirs(a, b string) error {
	if err := l.syncDir(filepath.Dir(a)); err != nil {
		return err
	}
	if filepath.Dir(b) == filepath.Dir(a) {
		return nil
	}
	return l.syncDir(filepath.Dir(b))
}
