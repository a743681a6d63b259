package compact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/optlake/optlake/storage"
)

// BucketStore is a lake in object storage (a storage.Store that is a
// bucket prefix; it works on any storage.Store). An object store has no
// rename, so a partition cannot be swapped in one step; a publish is:
//
//  1. the compacted files are uploaded (multipart, not yet completed:
//     invisible);
//  2. a journal object records the compaction's id, its files and the
//     inputs it replaces;
//  3. the uploads are completed: the compacted files become visible;
//  4. the inputs (per-snapshot files, the earlier compacted files, the
//     parked files consumed) are deleted, then the journal.
//
// The window: between 3 and the end of 4 a reader listing the partition
// sees the new files beside (some of) the old ones — rows twice, never
// missing. A crash before 3 leaves the partition as it was (the incomplete
// uploads are aborted by storage.CleanIncomplete at the next start); a
// crash in 3 or 4 is finished (every compacted file visible: the inputs go)
// or undone (some missing: the visible ones go) by Recover.
type BucketStore struct {
	St storage.Store
	// Tmp is the local folder under which the spilled sorted runs get a
	// folder of their own, made on first use ("" = the system's temp
	// folder). Only that folder is ever removed, never Tmp itself.
	Tmp string
	// Crash, when set, is called at each step of a publish (tests).
	Crash func(step string)

	spill string // the folder this store made for its spills ("" = none yet)
}

// BucketSteps are the steps of a bucket publish, in order; Crash is called
// after each ("visible" after the first compacted file is visible).
var BucketSteps = []string{"staged", "journal", "visible", "swap", "retire", "pending", "done"}

func (s *BucketStore) crash(step string) {
	if s.Crash != nil {
		s.Crash(step)
	}
}

// TempDir implements Lake: a folder of its own under Tmp, made on first
// use. When it cannot be made, the error says so: spilling into (and then
// removing) a folder optlake did not make is never the fallback.
func (s *BucketStore) TempDir() (string, error) {
	if s.spill == "" {
		dir, err := os.MkdirTemp(s.Tmp, "optlake-compact-")
		if err != nil {
			return "", fmt.Errorf("spill folder: %w", err)
		}
		s.spill = dir
	}
	return s.spill, nil
}

// Close removes the spill folder TempDir made, if any.
func (s *BucketStore) Close() error {
	if s.spill == "" {
		return nil
	}
	err := os.RemoveAll(s.spill)
	s.spill = ""
	return err
}

func (s *BucketStore) lake() reader { return reader{s.St} }

// Partitions implements Lake.
func (s *BucketStore) Partitions(ctx context.Context) ([]Partition, error) {
	return s.lake().Partitions(ctx)
}

// List implements Lake.
func (s *BucketStore) List(ctx context.Context, p Partition) ([]File, error) {
	return s.lake().List(ctx, p)
}

// Open implements Lake.
func (s *BucketStore) Open(ctx context.Context, p Partition, f File) (Input, error) {
	return s.lake().Open(ctx, p, f)
}

// Stage implements Lake.
func (s *BucketStore) Stage(ctx context.Context, p Partition) (Staged, error) {
	return &bucketStaged{s: s, p: p, ctx: ctx}, nil
}

type bucketStaged struct {
	s     *BucketStore
	p     Partition
	ctx   context.Context
	names []string
	ws    []storage.Writer
}

// held keeps the upload open until Publish: Close only ends the writing.
type held struct{ storage.Writer }

func (held) Close() error { return nil }

func (st *bucketStaged) Create(name string) (io.WriteCloser, error) {
	w, err := st.s.St.Create(st.ctx, partName(st.p)+name)
	if err != nil {
		return nil, err
	}
	st.names = append(st.names, name)
	st.ws = append(st.ws, w)
	return held{w}, nil
}

func (st *bucketStaged) Abort() error {
	for _, w := range st.ws {
		w.Abort()
	}
	st.ws = nil
	return nil
}

func (st *bucketStaged) Publish(ctx context.Context, id string, consumed []File) error {
	s, p := st.s, st.p
	s.crash("staged")
	j := journal{ID: id, Files: st.names}
	for _, f := range consumed {
		if f.Parked {
			j.Parked = append(j.Parked, f.Name)
		} else {
			j.Inputs = append(j.Inputs, f.Name)
		}
	}
	if err := s.lake().writeJournal(ctx, p, j); err != nil {
		return err
	}
	s.crash("journal")
	if err := ctx.Err(); err != nil {
		s.rollBack(context.WithoutCancel(ctx), p, j)
		return err
	}
	for i, w := range st.ws {
		if err := w.Commit(); err != nil {
			st.ws = st.ws[i+1:]
			s.rollBack(context.WithoutCancel(ctx), p, j)
			return fmt.Errorf("publish %s: %w", p, err)
		}
		if i == 0 {
			s.crash("visible")
		}
	}
	st.ws = nil
	s.crash("swap")
	return s.rollForward(ctx, p, j)
}

// rollForward deletes what the visible compacted files replace: the
// inputs, the parked files consumed, then the journal.
func (s *BucketStore) rollForward(ctx context.Context, p Partition, j journal) error {
	ours := map[string]bool{}
	for _, f := range j.Files {
		ours[f] = true
	}
	for _, name := range j.Inputs {
		if ours[name] {
			continue
		}
		if err := s.St.Delete(ctx, partName(p)+name); err != nil {
			return fmt.Errorf("retire %s: %w", p, err)
		}
	}
	s.crash("retire")
	for _, name := range j.Parked {
		if err := s.St.Delete(ctx, parkedName(p)+name); err != nil {
			return fmt.Errorf("remove parked %s: %w", name, err)
		}
	}
	s.crash("pending")
	if err := s.St.Delete(ctx, journalName(p)); err != nil {
		return fmt.Errorf("remove journal: %w", err)
	}
	s.crash("done")
	return nil
}

// rollBack undoes a publish not every file of which became visible: the
// visible ones are deleted, then the journal. The inputs were never
// touched.
func (s *BucketStore) rollBack(ctx context.Context, p Partition, j journal) error {
	for _, name := range j.Files {
		if err := s.St.Delete(ctx, partName(p)+name); err != nil {
			return err
		}
	}
	return s.St.Delete(ctx, journalName(p))
}

// Recover implements Lake: each journal left by a crash is finished when
// every compacted file it names is visible and undone otherwise; the local
// spills are deleted. (Incomplete uploads are storage.CleanIncomplete's.)
func (s *BucketStore) Recover(ctx context.Context) error {
	err := s.lake().journals(ctx, func(p Partition, j journal) error {
		for _, f := range j.Files {
			if _, err := s.St.Stat(ctx, partName(p)+f); errors.Is(err, storage.ErrNotExist) {
				return s.rollBack(ctx, p, j)
			} else if err != nil {
				return err
			}
		}
		return s.rollForward(ctx, p, j)
	})
	if err != nil {
		return err
	}
	return s.Close()
}
