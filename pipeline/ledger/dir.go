package ledger

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/optlake/optlake/internal/datadir"
)

// dirStore keeps the objects as files under a folder.
type dirStore struct{ root string }

var _ Store = dirStore{}

// DirStore returns the Store of the ledger in a data directory on disk:
// DATA/_ledger. Objects are files written with datadir.WriteFile (temp
// file, fsync, rename, fsync of the folder).
func DirStore(dataDir string) Store { return dirStore{filepath.Join(dataDir, Dir)} }

// Open returns the ledger of a data directory on disk.
func Open(dataDir string) *Ledger { return New(DirStore(dataDir), nil) }

func (d dirStore) path(name string) string { return filepath.Join(d.root, filepath.FromSlash(name)) }

func (d dirStore) Put(name string, data []byte) error {
	p := d.path(name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return datadir.WriteFile(p, data)
}

func (d dirStore) Get(name string) ([]byte, error) { return os.ReadFile(d.path(name)) }

func (d dirStore) List(prefix string) ([]string, error) {
	var out []string
	start := filepath.Dir(d.path(prefix + "x")) // only the folder the prefix names
	err := filepath.WalkDir(start, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			return nil // hidden: a temporary file in flight
		}
		rel, err := filepath.Rel(d.root, p)
		if err != nil {
			return err
		}
		if name := filepath.ToSlash(rel); strings.HasPrefix(name, prefix) {
			out = append(out, name)
		}
		return nil
	})
	return out, err
}

func (d dirStore) Delete(name string) error {
	err := os.Remove(d.path(name))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err == nil {
		return datadir.SyncDir(filepath.Dir(d.path(name)))
	}
	return nil
}
