package storage_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/optlake/optlake/storage"
)

// A file in folders that do not exist yet: each folder created is fsynced
// into its parent (a power loss keeps the file's path, not only its
// bytes), once; a second file in the same folder syncs only that folder.
// The same for a rename into a new folder.
func TestLocalNewFoldersSyncedIntoParent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "data")
	var synced []string
	st := storage.LocalSyncing(root, func(d string) {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			t.Fatal(err)
		}
		synced = append(synced, filepath.ToSlash(rel))
	})
	if err := st.Put(ctx, "raw/instruments/date=2026-12-07/a.json.zst", []byte("a")); err != nil {
		t.Fatal(err)
	}
	// The data directory itself is new too: its parent (..) is synced.
	want := []string{"..", ".", "raw", "raw/instruments"}
	for _, w := range want {
		if !slices.Contains(synced, w) {
			t.Errorf("folder %q created but not fsynced into its parent (synced: %v)", w, synced)
		}
	}
	synced = nil
	if err := st.Put(ctx, "raw/instruments/date=2026-12-07/b.json.zst", []byte("b")); err != nil {
		t.Fatal(err)
	}
	if len(synced) != 0 {
		t.Errorf("a file in an existing folder synced folders through the store's hook: %v", synced)
	}
	synced = nil
	if err := st.Put(ctx, "state/x.tmp", []byte("x")); err != nil {
		t.Fatal(err)
	}
	synced = nil
	if err := st.Rename(ctx, "state/x.tmp", "moved/deep/x"); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{".", "moved"} {
		if !slices.Contains(synced, w) {
			t.Errorf("rename: folder under %q created but not fsynced into it (synced: %v)", w, synced)
		}
	}
}
