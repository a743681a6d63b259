package storage

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"
)

// Swapper is the optional ability of a store to move folders of objects in
// one step: a local folder has it (rename(2), renameat2(2)); a bucket,
// which has no rename, does not. Callers ask with a type assertion on this
// interface, never on the store's type.
//
// Names are folders (or objects) of the store, without a trailing '/'.
// Guarantees:
//
//   - Atomic: a reader listing the store sees a moved folder's objects
//     under its old name or its new one, never both, never some of them.
//   - Durable: when a call returns, the change survives a crash (the
//     folders involved are fsynced).
//   - Never replacing: Rename does not overwrite what it would replace.
//
// What it does not give: isolation from a reader that listed just before a
// move and opens a file after it (the open fails; it should list again),
// nor from a second writer (callers hold the data directory's lock).
type Swapper interface {
	Store
	// Rename moves the folder or object from to the name to, making to's
	// parent folders. It fails with ErrExist when to exists (never
	// replacing it: RENAME_NOREPLACE) and with ErrNotExist when from does
	// not.
	Rename(ctx context.Context, from, to string) error
	// Exchange trades the folders a and b in one step (RENAME_EXCHANGE): a
	// reader listing either sees its old objects or its new ones, never
	// neither, never both. An absent b is made (empty) first. Where the
	// file system cannot exchange, it fails with errors.ErrUnsupported and
	// changes nothing; a caller may then move b away and a into its place
	// with two Renames, between which b is missing.
	Exchange(ctx context.Context, a, b string) error
	// RemoveAll deletes the folder dir and everything in it; an absent dir
	// is not an error.
	RemoveAll(ctx context.Context, dir string) error
}

// Trash keeps folders retired from a Swapper's store for a grace period
// before it deletes them: for readers that still have their files open,
// and for an operator who wants them back. Each entry is the folder
// Dir/<UTC time put, 20060102T150405Z>-<tag>.
type Trash struct {
	St    Swapper
	Dir   string // the trash folder in St
	Grace time.Duration
	Now   func() time.Time // nil: time.Now
}

const trashStamp = "20060102T150405Z"

func (t Trash) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

// Put moves the folder name into the trash in one Rename, as
// Dir/<now>-<as> (as may hold '/': the entry is then its first element).
// An absent name is ErrNotExist.
func (t Trash) Put(ctx context.Context, name, as string) error {
	to := path.Join(t.Dir, t.now().UTC().Format(trashStamp)+"-"+as)
	if err := t.St.Rename(ctx, name, to); err != nil {
		return fmt.Errorf("trash %s: %w", name, err)
	}
	return nil
}

// Empty deletes the entries put more than Grace ago. Entries whose names
// do not start with a time are left alone.
func (t Trash) Empty(ctx context.Context) error {
	ents, err := t.St.ListDir(ctx, t.Dir+"/")
	if err != nil {
		return fmt.Errorf("trash: %w", err)
	}
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return err
		}
		name := strings.TrimSuffix(strings.TrimPrefix(e.Name, t.Dir+"/"), "/")
		stamp, _, _ := strings.Cut(name, "-")
		put, err := time.Parse(trashStamp, stamp)
		if err != nil || t.now().Sub(put) < t.Grace {
			continue
		}
		if err := t.St.RemoveAll(ctx, path.Join(t.Dir, name)); err != nil {
			return fmt.Errorf("trash: %w", err)
		}
	}
	return nil
}
