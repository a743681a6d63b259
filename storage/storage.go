// Package storage is the data directory as a store of named objects: a local
// folder or a bucket prefix on S3, GCS or Azure (issue 14). Every object is
// visible whole or not at all: a Writer shows nothing until Commit, and Abort
// (or a crash) leaves nothing visible.
//
// Names are slash-separated paths relative to the store's root
// ("hist/date=2026-11-24/part-0.parquet"). Hidden temporary files of the
// local store (".<name>.tmp-*") are never listed.
package storage

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"time"
)

// ErrNotExist is matched (errors.Is) by the errors of Open, Stat and Put-less
// reads of a name that is absent.
var ErrNotExist = fs.ErrNotExist

// ErrExist is matched by the error of CreateExclusive when the name exists.
var ErrExist = fs.ErrExist

// Store is the data directory.
type Store interface {
	// Create starts a new object name, streamed: nothing is visible until
	// Commit, which replaces an older object of that name.
	Create(ctx context.Context, name string) (Writer, error)
	// CreateExclusive is Create whose Commit fails with ErrExist when name
	// already exists (If-None-Match: * on a bucket).
	CreateExclusive(ctx context.Context, name string) (Writer, error)
	// Put writes a small object whole.
	Put(ctx context.Context, name string, data []byte) error
	// Open opens name for reading (ranged reads on a bucket).
	Open(ctx context.Context, name string) (Reader, error)
	// Stat describes name.
	Stat(ctx context.Context, name string) (Info, error)
	// List returns the objects whose names start with prefix, sorted by name.
	List(ctx context.Context, prefix string) ([]Info, error)
	// ListDir lists one level below dir ("" or a name ending in '/'),
	// sorted by name: the objects directly in it, and its sub-folders as
	// names ending in '/' (Size 0), the common prefixes of a delimiter
	// listing. An absent dir lists nothing. A local folder may also list
	// an empty sub-folder, which a bucket cannot hold.
	ListDir(ctx context.Context, dir string) ([]Info, error)
	// Delete removes name; deleting an absent name is not an error.
	Delete(ctx context.Context, name string) error
	// String names the store (a path, or scheme://bucket/prefix), never a
	// secret.
	String() string
	Close() error
}

// LocalFolder is the optional ability of a store whose objects are files
// under one local folder (name is LocalDir()/name): such a store can be
// locked with a flock and lend files for random access in place (its
// folder moves are the Swapper ability). Callers ask through LocalDir,
// never by the store's type.
type LocalFolder interface {
	LocalDir() string
}

// LocalDir is the local folder of s, "" when its objects are not local
// files (a bucket prefix).
func LocalDir(s Store) string {
	if l, ok := s.(LocalFolder); ok {
		return l.LocalDir()
	}
	return ""
}

// Writer streams one object.
type Writer interface {
	io.Writer
	// Commit makes the object visible whole.
	Commit() error
	// Abort drops it; nothing becomes visible. Abort after Commit is a no-op.
	Abort() error
}

// Reader reads one object: io.ReaderAt and Size, as Parquet readers need.
type Reader interface {
	io.ReaderAt
	io.Reader
	Size() int64
	Close() error
}

// Info describes one object (or, from ListDir, a folder: Name ends in
// '/').
type Info struct {
	Name    string
	Size    int64
	ModTime time.Time
}

// ListedOpener is the optional ability of a store to open an object a
// listing (List, ListDir) described without asking for its size again:
// a bucket's Open sends a HEAD for it, one request a file.
type ListedOpener interface {
	OpenListed(ctx context.Context, o Info) (Reader, error)
}

// OpenListed opens the object o that a listing of s returned: on a bucket
// without a request of its own (its reads fail when the object changed
// size since), elsewhere as Open does.
func OpenListed(ctx context.Context, s Store, o Info) (Reader, error) {
	if lo, ok := s.(ListedOpener); ok {
		return lo.OpenListed(ctx, o)
	}
	return s.Open(ctx, o.Name)
}

// allReader is the optional ability of a store to read a whole object in
// one request (a bucket: a GET, no HEAD before it).
type allReader interface {
	ReadAll(ctx context.Context, name string) ([]byte, error)
}

// ReadAll reads the whole object name.
func ReadAll(ctx context.Context, s Store, name string) ([]byte, error) {
	if ar, ok := s.(allReader); ok {
		return ar.ReadAll(ctx, name)
	}
	r, err := s.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b := make([]byte, r.Size())
	if _, err := r.ReadAt(b, 0); err != nil && !(errors.Is(err, io.EOF) && len(b) == 0) {
		if !errors.Is(err, io.EOF) {
			return nil, err
		}
	}
	return b, nil
}
