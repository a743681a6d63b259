package iceberg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"

	iceio "github.com/optlake/optlake/third_party/iceberg-go/io"

	"github.com/optlake/optlake/storage"
)

// storeIO is iceberg-go's file system (io.IO, ReadFileIO, WriteFileIO) over
// the data directory's store: a location "<root>/<name>" is the object
// name of the store. Every write is whole or nothing (storage.Writer), so a
// manifest a crash cut short is never visible.
type storeIO struct {
	ctx  context.Context
	st   storage.Store
	root string            // the store's location: file:///folder, or scheme://bucket/prefix
	also []string          // other spellings of root in older metadata (rootSpellings)
	done func(name string) // called with each object written (the crash hook)
}

var (
	_ iceio.ReadFileIO  = (*storeIO)(nil)
	_ iceio.WriteFileIO = (*storeIO)(nil)
)

// name is the store's object name of a location; an error for a location
// outside the data directory.
func (s *storeIO) name(loc string) (string, error) {
	for _, r := range append([]string{s.root}, s.also...) {
		if rest, ok := strings.CutPrefix(loc, r+"/"); ok && rest != "" {
			return rest, nil
		}
	}
	return "", &fs.PathError{Op: "open", Path: loc, Err: fmt.Errorf("%w: not in the data directory %s", fs.ErrInvalid, s.root)}
}

// rootSpellings are the ways metadata may name a local folder root
// (file:///dir): as the URI, as Hadoop writes it (file:/dir), and as the
// bare path that optlake wrote before its locations were URIs.
func rootSpellings(root string) []string {
	dir, ok := strings.CutPrefix(root, "file://")
	if !ok {
		return nil
	}
	return []string{"file:" + dir, dir}
}

// location is the full location of the store's object name.
func (s *storeIO) location(name string) string { return s.root + "/" + name }

func (s *storeIO) Open(loc string) (iceio.File, error) {
	name, err := s.name(loc)
	if err != nil {
		return nil, err
	}
	r, err := s.st.Open(s.ctx, name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: loc, Err: err}
	}
	return &storeFile{Reader: r, name: name, sr: io.NewSectionReader(r, 0, r.Size())}, nil
}

func (s *storeIO) ReadFile(loc string) ([]byte, error) {
	name, err := s.name(loc)
	if err != nil {
		return nil, err
	}
	b, err := storage.ReadAll(s.ctx, s.st, name)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: loc, Err: err}
	}
	return b, nil
}

func (s *storeIO) Create(loc string) (iceio.FileWriter, error) {
	name, err := s.name(loc)
	if err != nil {
		return nil, err
	}
	w, err := s.st.Create(s.ctx, name)
	if err != nil {
		return nil, &fs.PathError{Op: "create", Path: loc, Err: err}
	}
	return &storeWriter{w: w, done: func() { s.done(name) }}, nil
}

func (s *storeIO) WriteFile(loc string, p []byte) error {
	name, err := s.name(loc)
	if err != nil {
		return err
	}
	if err := s.st.Put(s.ctx, name, p); err != nil {
		return &fs.PathError{Op: "write", Path: loc, Err: err}
	}
	s.done(name)
	return nil
}

func (s *storeIO) Remove(loc string) error {
	name, err := s.name(loc)
	if err != nil {
		return err
	}
	if err := s.st.Delete(s.ctx, name); err != nil {
		return &fs.PathError{Op: "remove", Path: loc, Err: err}
	}
	return nil
}

// storeFile is an open object: iceio.File (fs.File, ReadSeekCloser,
// ReaderAt) over a storage.Reader.
type storeFile struct {
	storage.Reader
	name string
	sr   *io.SectionReader
}

func (f *storeFile) Read(p []byte) (int, error)                { return f.sr.Read(p) }
func (f *storeFile) Seek(off int64, whence int) (int64, error) { return f.sr.Seek(off, whence) }
func (f *storeFile) ReadAt(p []byte, off int64) (int, error)   { return f.sr.ReadAt(p, off) }
func (f *storeFile) Stat() (fs.FileInfo, error)                { return fileInfo{f.name, f.Size()}, nil }
func (f *storeFile) Close() error                              { return f.Reader.Close() }
func (f *storeFile) ReadDir(int) ([]fs.DirEntry, error)        { return nil, errors.New("not a directory") }
func (f *storeFile) String() string                            { return f.name }
func (f *storeFile) WriteTo(w io.Writer) (int64, error)        { return io.Copy(w, f.sr) }

type fileInfo struct {
	name string
	size int64
}

func (i fileInfo) Name() string       { return path.Base(i.name) }
func (i fileInfo) Size() int64        { return i.size }
func (i fileInfo) Mode() fs.FileMode  { return 0o444 }
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return false }
func (i fileInfo) Sys() any           { return nil }

// storeWriter is an iceio.FileWriter: the object becomes visible whole at
// Close, and a failed write leaves nothing.
type storeWriter struct {
	w      storage.Writer
	failed bool
	done   func()
}

func (w *storeWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	if err != nil {
		w.failed = true
	}
	return n, err
}

func (w *storeWriter) ReadFrom(r io.Reader) (int64, error) {
	n, err := io.Copy(struct{ io.Writer }{w}, r)
	if err != nil {
		w.failed = true
	}
	return n, err
}

func (w *storeWriter) Close() error {
	if w.failed {
		return w.w.Abort()
	}
	if err := w.w.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	w.done()
	return nil
}
