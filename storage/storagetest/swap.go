package storagetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/optlake/optlake/storage"
)

// swap checks the optional storage.Swapper: folders moved and traded whole,
// never replacing, removed whole, and the trash's grace. A store without it
// (a bucket) reports it unsupported.
func swap(t *testing.T, open func(t *testing.T) storage.Store) {
	ctx := context.Background()
	if _, ok := open(t).(storage.Swapper); !ok {
		t.Skip("storage.Swapper not supported: folders are not moved in one step")
	}
	// objects lists the names under dir, relative to it.
	objects := func(t *testing.T, s storage.Store, dir string) string {
		t.Helper()
		var out []string
		for _, in := range mustList(t, s, dir+"/") {
			out = append(out, in.Name[len(dir)+1:])
		}
		return fmt.Sprint(out)
	}
	tests := []struct {
		name string
		f    func(t *testing.T, s storage.Swapper)
	}{
		{"rename moves a folder whole", func(t *testing.T, s storage.Swapper) {
			mustPut(t, s, "stage/t/date=1/a", []byte("a"))
			mustPut(t, s, "stage/t/date=1/sub/b", []byte("b"))
			mustPut(t, s, "stage/t/date=10/c", []byte("c"))
			if err := s.Rename(ctx, "stage/t/date=1", "new/parent/date=1"); err != nil {
				t.Fatal(err)
			}
			if got := objects(t, s, "new/parent/date=1"); got != "[a sub/b]" {
				t.Fatalf("moved folder holds %s", got)
			}
			if got := objects(t, s, "stage/t"); got != "[date=10/c]" {
				t.Fatalf("left behind %s, want only the neighbour date=10", got)
			}
		}},
		{"rename never replaces", func(t *testing.T, s storage.Swapper) {
			mustPut(t, s, "a/x", []byte("a"))
			mustPut(t, s, "b/y", []byte("b"))
			mustPut(t, s, "obj", []byte("o"))
			for _, to := range []string{"b", "obj"} {
				if err := s.Rename(ctx, "a", to); !errors.Is(err, storage.ErrExist) {
					t.Fatalf("rename onto existing %s: %v, want ErrExist", to, err)
				}
			}
			if err := s.Rename(ctx, "absent", "c"); !errors.Is(err, storage.ErrNotExist) {
				t.Fatalf("rename of an absent folder: %v, want ErrNotExist", err)
			}
			if a, b := objects(t, s, "a"), objects(t, s, "b"); a != "[x]" || b != "[y]" {
				t.Fatalf("after refused renames: a %s, b %s", a, b)
			}
			if got := mustRead(t, s, "obj"); string(got) != "o" {
				t.Fatalf("obj replaced: %q", got)
			}
		}},
		{"exchange trades two folders", func(t *testing.T, s storage.Swapper) {
			mustPut(t, s, "stage/p/new-1", []byte("n"))
			mustPut(t, s, "stage/p/new-2", []byte("n"))
			mustPut(t, s, "lake/p/old", []byte("o"))
			err := s.Exchange(ctx, "stage/p", "lake/p")
			if errors.Is(err, errors.ErrUnsupported) {
				t.Skipf("this file system cannot exchange: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			if l, st := objects(t, s, "lake/p"), objects(t, s, "stage/p"); l != "[new-1 new-2]" || st != "[old]" {
				t.Fatalf("after exchange: lake %s, stage %s", l, st)
			}
			// An absent b is made: a's objects take its place, a is left empty.
			mustPut(t, s, "stage/q/new", []byte("n"))
			if err := s.Exchange(ctx, "stage/q", "lake/q"); err != nil {
				t.Fatal(err)
			}
			if l, st := objects(t, s, "lake/q"), objects(t, s, "stage/q"); l != "[new]" || st != "[]" {
				t.Fatalf("exchange with an absent folder: lake %s, stage %s", l, st)
			}
			if err := s.Exchange(ctx, "absent", "lake/p"); !errors.Is(err, storage.ErrNotExist) {
				t.Fatalf("exchange of an absent folder: %v, want ErrNotExist", err)
			}
		}},
		{"remove all of one folder", func(t *testing.T, s storage.Swapper) {
			for _, n := range []string{"d/x", "d/e/y", "de/z", "d.json"} {
				mustPut(t, s, n, []byte("1"))
			}
			if err := s.RemoveAll(ctx, "d"); err != nil {
				t.Fatal(err)
			}
			if err := s.RemoveAll(ctx, "absent"); err != nil {
				t.Fatalf("remove an absent folder: %v", err)
			}
			if got := names0(mustList(t, s, "")); fmt.Sprint(got) != "[d.json de/z]" {
				t.Fatalf("left %q, want the neighbours only", got)
			}
			if err := s.RemoveAll(ctx, ""); err == nil {
				t.Fatal(`RemoveAll("") (the whole store): no error`)
			}
		}},
		{"trash keeps for the grace period", func(t *testing.T, s storage.Swapper) {
			now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
			tr := storage.Trash{St: s, Dir: "x/trash", Grace: time.Hour, Now: func() time.Time { return now }}
			mustPut(t, s, "t/date=1/old", []byte("o"))
			mustPut(t, s, "x/trash/not-a-time/keep", []byte("k"))
			if err := tr.Put(ctx, "t/date=1", "id1/t/date=1"); err != nil {
				t.Fatal(err)
			}
			if err := tr.Put(ctx, "t/date=1", "id2/t/date=1"); !errors.Is(err, storage.ErrNotExist) {
				t.Fatalf("trash an absent folder: %v, want ErrNotExist", err)
			}
			if got := objects(t, s, "x/trash"); got != "[20261124T100000Z-id1/t/date=1/old not-a-time/keep]" {
				t.Fatalf("trash holds %s", got)
			}
			now = now.Add(time.Hour - time.Second)
			if err := tr.Empty(ctx); err != nil {
				t.Fatal(err)
			}
			if got := objects(t, s, "x/trash"); got != "[20261124T100000Z-id1/t/date=1/old not-a-time/keep]" {
				t.Fatalf("emptied before the grace ended: %s", got)
			}
			now = now.Add(time.Second)
			if err := tr.Empty(ctx); err != nil {
				t.Fatal(err)
			}
			if got := objects(t, s, "x/trash"); got != "[not-a-time/keep]" {
				t.Fatalf("after the grace: %s", got)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, open(t).(storage.Swapper)) })
	}
}
