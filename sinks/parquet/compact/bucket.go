package compact

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	pq "github.com/optlake/optlake/sinks/parquet"
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

func (s *BucketStore) part(p Partition) string { return p.Table + "/date=" + p.Date + "/" }
func (s *BucketStore) pending(p Partition) string {
	return path.Join(pq.CompactDir, pq.PendingDir, p.Table, "date="+p.Date) + "/"
}
func (s *BucketStore) journal(p Partition) string {
	return path.Join(pq.CompactDir, "journal", p.Table+"@"+p.Date+".json")
}

// TempDir implements Store: a folder of its own under Tmp, made on first
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

// partitionOf parses TABLE/date=YYYY-MM-DD/NAME.parquet (rel to the lake or
// to the parked folder).
func partitionOf(rel string) (Partition, string, bool) {
	parts := strings.Split(rel, "/")
	if len(parts) != 3 {
		return Partition{}, "", false
	}
	table, day, name := parts[0], parts[1], parts[2]
	if table == "" || strings.HasPrefix(table, ".") || strings.HasPrefix(table, "_") || table == "raw" {
		return Partition{}, "", false
	}
	date, ok := strings.CutPrefix(day, "date=")
	if !ok {
		return Partition{}, "", false
	}
	if _, err := time.Parse(time.DateOnly, date); err != nil {
		return Partition{}, "", false
	}
	if !strings.HasSuffix(name, ".parquet") || strings.HasPrefix(name, ".") {
		return Partition{}, "", false
	}
	return Partition{Table: table, Date: date}, name, true
}

// Partitions implements Store. It lists the whole prefix (one paged LIST;
// the raw archive's objects are skipped, not read).
func (s *BucketStore) Partitions(ctx context.Context) ([]Partition, error) {
	objs, err := s.St.List(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	seen := map[Partition]bool{}
	var out []Partition
	parked := pq.CompactDir + "/" + pq.PendingDir + "/"
	for _, o := range objs {
		rel := o.Name
		if r, ok := strings.CutPrefix(rel, parked); ok {
			rel = r
		}
		p, _, ok := partitionOf(rel)
		if ok && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Table != out[j].Table {
			return out[i].Table < out[j].Table
		}
		return out[i].Date < out[j].Date
	})
	return out, ctx.Err()
}

// files lists the .parquet objects directly under prefix.
func (s *BucketStore) files(ctx context.Context, prefix string) ([]File, error) {
	objs, err := s.St.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	var out []File
	for _, o := range objs {
		name := strings.TrimPrefix(o.Name, prefix)
		if strings.Contains(name, "/") || !strings.HasSuffix(name, ".parquet") || strings.HasPrefix(name, ".") {
			continue
		}
		out = append(out, File{Name: name, Size: o.Size})
	}
	return out, nil
}

// List implements Store.
func (s *BucketStore) List(ctx context.Context, p Partition) ([]File, error) {
	list := func(prefix string) ([]File, error) { return s.files(ctx, prefix) }
	return listWithParked(p, list, s.part(p), s.pending(p))
}

// Open implements Store.
func (s *BucketStore) Open(ctx context.Context, p Partition, f File) (Input, error) {
	name := s.part(p) + f.Name
	if f.Pending {
		name = s.pending(p) + f.Name
	}
	r, err := s.St.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	return &bucketInput{SectionReader: io.NewSectionReader(r, 0, r.Size()), r: r}, nil
}

type bucketInput struct {
	*io.SectionReader
	r storage.Reader
}

func (in *bucketInput) Close() error { return in.r.Close() }

// Stage implements Store.
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

// bucketJournal is what a bucket publish records before any compacted file
// is visible.
type bucketJournal struct {
	ID      string   `json:"id"`
	Files   []string `json:"files"`   // the compacted files (names in the partition)
	Inputs  []string `json:"inputs"`  // the partition's files they replace
	Pending []string `json:"pending"` // parked files consumed
}

// held keeps the upload open until Publish: Close only ends the writing.
type held struct{ storage.Writer }

func (held) Close() error { return nil }

func (st *bucketStaged) Create(name string) (io.WriteCloser, error) {
	w, err := st.s.St.Create(st.ctx, st.s.part(st.p)+name)
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
	j := bucketJournal{ID: id, Files: st.names}
	for _, f := range consumed {
		if f.Pending {
			j.Pending = append(j.Pending, f.Name)
		} else {
			j.Inputs = append(j.Inputs, f.Name)
		}
	}
	b, _ := json.Marshal(j)
	if err := s.St.Put(ctx, s.journal(p), b); err != nil {
		return fmt.Errorf("publish %s: journal: %w", p, err)
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
func (s *BucketStore) rollForward(ctx context.Context, p Partition, j bucketJournal) error {
	ours := map[string]bool{}
	for _, f := range j.Files {
		ours[f] = true
	}
	for _, name := range j.Inputs {
		if ours[name] {
			continue
		}
		if err := s.St.Delete(ctx, s.part(p)+name); err != nil {
			return fmt.Errorf("retire %s: %w", p, err)
		}
	}
	s.crash("retire")
	for _, name := range j.Pending {
		if err := s.St.Delete(ctx, s.pending(p)+name); err != nil {
			return fmt.Errorf("remove parked %s: %w", name, err)
		}
	}
	s.crash("pending")
	if err := s.St.Delete(ctx, s.journal(p)); err != nil {
		return fmt.Errorf("remove journal: %w", err)
	}
	s.crash("done")
	return nil
}

// rollBack undoes a publish not every file of which became visible: the
// visible ones are deleted, then the journal. The inputs were never
// touched.
func (s *BucketStore) rollBack(ctx context.Context, p Partition, j bucketJournal) error {
	for _, name := range j.Files {
		if err := s.St.Delete(ctx, s.part(p)+name); err != nil {
			return err
		}
	}
	return s.St.Delete(ctx, s.journal(p))
}

// Recover implements Store: each journal left by a crash is finished when
// every compacted file it names is visible and undone otherwise; the local
// spills are deleted. (Incomplete uploads are storage.CleanIncomplete's.)
func (s *BucketStore) Recover(ctx context.Context) error {
	prefix := path.Join(pq.CompactDir, "journal") + "/"
	objs, err := s.St.List(ctx, prefix)
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	for _, o := range objs {
		name, ok := strings.CutSuffix(strings.TrimPrefix(o.Name, prefix), ".json")
		table, date, ok2 := strings.Cut(name, "@")
		if !ok || !ok2 {
			continue
		}
		p := Partition{Table: table, Date: date}
		b, err := storage.ReadAll(ctx, s.St, o.Name)
		var j bucketJournal
		if err == nil {
			err = json.Unmarshal(b, &j)
		}
		if err != nil {
			return fmt.Errorf("recover %s: journal: %w", p, err)
		}
		all := true
		for _, f := range j.Files {
			if _, err := s.St.Stat(ctx, s.part(p)+f); errors.Is(err, storage.ErrNotExist) {
				all = false
			} else if err != nil {
				return fmt.Errorf("recover %s: %w", p, err)
			}
		}
		if all {
			err = s.rollForward(ctx, p, j)
		} else {
			err = s.rollBack(ctx, p, j)
		}
		if err != nil {
			return fmt.Errorf("recover %s: %w", p, err)
		}
	}
	return s.Close()
}
