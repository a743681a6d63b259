package compact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	pq "github.com/optlake/optlake/sinks/parquet"

	"github.com/optlake/optlake/internal/datadir"
	"github.com/optlake/optlake/storage"
)

// Partition is one table's day: DATA/<Table>/date=<Date>/.
type Partition struct {
	Table string
	Date  string // YYYY-MM-DD
}

func (p Partition) String() string { return p.Table + "/date=" + p.Date }

// File is one Parquet file of a partition (or parked for it).
type File struct {
	Name   string // base name
	Size   int64
	Parked bool // parked by the sink (a replay of a compacted snapshot)
}

// Input is an open input file.
type Input interface {
	io.ReaderAt
	io.Seeker
	io.Closer
}

// Lake is where the lake lives. Compact reads partitions through it and
// publishes the compacted files with it; the local filesystem is one
// (LocalStore), object storage can be another. Every method is called
// with the data directory's lock held: no other writer is at work.
type Lake interface {
	// Partitions lists every table's date partitions that hold Parquet
	// files or have parked files.
	Partitions(ctx context.Context) ([]Partition, error)
	// List returns the partition's Parquet files (compacted ones and
	// per-snapshot ones) and the files parked for it (Parked set).
	List(ctx context.Context, p Partition) ([]File, error)
	// Open opens a file List returned.
	Open(ctx context.Context, p Partition, f File) (Input, error)
	// Stage starts the replacement of the partition: files created with
	// it are invisible to readers until Publish.
	Stage(ctx context.Context, p Partition) (Staged, error)
	// TempDir is a local folder for spilled sorted runs that the store
	// made and owns (emptied by Recover); an error when it cannot be made.
	TempDir() (string, error)
	// Recover finishes or undoes a Publish interrupted by a crash, and
	// deletes retired files past their grace period.
	Recover(ctx context.Context) error
	// Close removes the local files the store made (its spills).
	Close() error
}

// For is the compaction store of the data directory st: a local folder
// (storage.LocalDir) swaps a partition's folder in one rename; any other
// store publishes the compacted objects first and deletes the inputs
// after (BucketStore). crash is the tests' hook (nil: none), now the clock
// of the trash's grace (nil: time.Now).
func For(st storage.Store, crash func(step string), now func() time.Time) Lake {
	if dir := storage.LocalDir(st); dir != "" {
		return &LocalStore{Dir: dir, Crash: crash, Now: now}
	}
	return &BucketStore{St: st, Crash: crash}
}

// Staged is a partition's replacement under construction.
type Staged interface {
	// Create creates a file of the new partition.
	Create(name string) (io.WriteCloser, error)
	// Publish makes the staged files the partition's only files, in one
	// step a reader cannot observe halfway where the store allows it,
	// and retires the replaced files and the parked ones in consumed.
	// id identifies the compaction (the manifest's ID).
	Publish(ctx context.Context, id string, consumed []File) error
	// Abort drops the staged files.
	Abort() error
}

// LocalStore is a lake on the local filesystem under Dir. Its staging,
// journal, trash and spills live in Dir/.compact, outside every table
// folder, on the same filesystem (renames, not copies).
type LocalStore struct {
	Dir string
	// Grace is how long replaced files stay in .compact/trash before
	// Recover deletes them (for readers that still have them open or
	// want them back); 0 means DefaultGrace.
	Grace time.Duration
	// Crash, when set, is called at each step of a publish with the step's
	// name (tests kill the process there).
	Crash func(step string)
	Now   func() time.Time

	noExchange bool // tests: take the fallback as if the filesystem refused the exchange
}

// DefaultGrace is how long replaced files are kept.
const DefaultGrace = time.Hour

// Steps of a local publish, in order; Crash is called after each (and
// after "moved", between the two renames of the fallback swap).
var Steps = []string{"staged", "journal", "swap", "retire", "pending", "done"}

func (s *LocalStore) crash(step string) {
	if s.Crash != nil {
		s.Crash(step)
	}
}

func (s *LocalStore) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// lake reads the partitions through the folder's storage.Store, as a
// bucket's are read; only the publish is the folder's own.
func (s *LocalStore) lake() reader { return reader{storage.NewLocal(s.Dir)} }

func (s *LocalStore) local(name string) string { return filepath.Join(s.Dir, filepath.FromSlash(name)) }
func (s *LocalStore) root() string             { return filepath.Join(s.Dir, pq.CompactDir) }
func (s *LocalStore) part(p Partition) string  { return s.local(partName(p)) }
func (s *LocalStore) pending(p Partition) string {
	return s.local(parkedName(p))
}
func (s *LocalStore) stage(p Partition) string {
	return filepath.Join(s.root(), "stage", p.Table, "date="+p.Date)
}

// Close implements Lake: the spills are in the lake's .compact/tmp,
// emptied by Recover.
func (s *LocalStore) Close() error { return nil }

// TempDir implements Lake.
func (s *LocalStore) TempDir() (string, error) { return s.tmp(), nil }

func (s *LocalStore) tmp() string { return filepath.Join(s.root(), "tmp") }

// Partitions implements Lake.
func (s *LocalStore) Partitions(ctx context.Context) ([]Partition, error) {
	return s.lake().Partitions(ctx)
}

// List implements Lake.
func (s *LocalStore) List(ctx context.Context, p Partition) ([]File, error) {
	return s.lake().List(ctx, p)
}

// Open implements Lake.
func (s *LocalStore) Open(ctx context.Context, p Partition, f File) (Input, error) {
	return s.lake().Open(ctx, p, f)
}

// Stage implements Lake.
func (s *LocalStore) Stage(_ context.Context, p Partition) (Staged, error) {
	dir := s.stage(p)
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("stage %s: %w", p, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("stage %s: %w", p, err)
	}
	return &localStaged{s: s, p: p, dir: dir}, nil
}

type localStaged struct {
	s     *LocalStore
	p     Partition
	dir   string
	files []string
}

func (st *localStaged) Create(name string) (io.WriteCloser, error) {
	f, err := os.OpenFile(filepath.Join(st.dir, name), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	st.files = append(st.files, name)
	return &syncCloser{f}, nil
}

// syncCloser fsyncs a file before closing it.
type syncCloser struct{ *os.File }

func (f *syncCloser) Close() error {
	err := f.File.Sync()
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	return err
}

func (st *localStaged) Abort() error { return os.RemoveAll(st.dir) }

func (st *localStaged) Publish(ctx context.Context, id string, consumed []File) error {
	s, p := st.s, st.p
	if err := datadir.SyncDir(st.dir); err != nil {
		return fmt.Errorf("publish %s: %w", p, err)
	}
	s.crash("staged")
	j := journal{ID: id, Trash: filepath.Join(s.root(), "trash", s.now().UTC().Format("20060102T150405Z")+"-"+id, p.Table, "date="+p.Date)}
	for _, f := range consumed {
		if f.Parked {
			j.Parked = append(j.Parked, f.Name)
		}
	}
	if err := s.lake().writeJournal(ctx, p, j); err != nil {
		return err
	}
	s.crash("journal")
	if err := ctx.Err(); err != nil {
		// Nothing visible changed yet: undo.
		s.rollBack(context.WithoutCancel(ctx), p)
		return err
	}
	if err := s.swap(p, j); err != nil {
		return fmt.Errorf("publish %s: %w", p, err)
	}
	return s.rollForward(ctx, p, j)
}

// swap puts the staged folder in the partition's place. With
// renameat2(RENAME_EXCHANGE) the two folders trade places in one step: a
// reader lists either the old files or the new ones, never neither or
// both. Where the filesystem refuses the exchange, the partition is first
// moved to the trash, then the stage renamed into place (a reader listing
// in between finds the partition missing; Recover finishes it after a
// crash).
func (s *LocalStore) swap(p Partition, j journal) error {
	part, stage := s.part(p), s.stage(p)
	if err := os.MkdirAll(part, 0o755); err != nil { // only parked files: no folder yet
		return err
	}
	var err error = unix.EINVAL
	if !s.noExchange {
		err = unix.Renameat2(unix.AT_FDCWD, stage, unix.AT_FDCWD, part, unix.RENAME_EXCHANGE)
	}
	if err == nil {
		s.crash("swap")
		return nil
	}
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("exchange %s: %w", p, err)
	}
	if err := os.MkdirAll(filepath.Dir(j.Trash), 0o755); err != nil {
		return err
	}
	if err := os.Rename(part, j.Trash); err != nil {
		return fmt.Errorf("retire %s: %w", p, err)
	}
	s.crash("moved") // fallback only: the day is missing until the next rename
	if err := os.Rename(stage, part); err != nil {
		return fmt.Errorf("place %s: %w", p, err)
	}
	s.crash("swap")
	return datadir.SyncDir(filepath.Dir(part))
}

// rollForward finishes a publish whose new files are in place: the
// replaced files (now in the stage folder) go to the trash, the parked
// files consumed are deleted, then the journal.
func (s *LocalStore) rollForward(ctx context.Context, p Partition, j journal) error {
	if err := datadir.SyncDir(filepath.Dir(s.part(p))); err != nil {
		return err
	}
	stage := s.stage(p)
	if _, err := os.Stat(stage); err == nil {
		if err := os.MkdirAll(filepath.Dir(j.Trash), 0o755); err != nil {
			return err
		}
		if err := os.Rename(stage, j.Trash); err != nil {
			return fmt.Errorf("retire %s: %w", p, err)
		}
	}
	s.crash("retire")
	for _, name := range j.Parked {
		if err := os.Remove(filepath.Join(s.pending(p), name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove parked %s: %w", name, err)
		}
	}
	os.Remove(s.pending(p)) // when empty
	s.crash("pending")
	if err := s.lake().st.Delete(ctx, journalName(p)); err != nil {
		return fmt.Errorf("remove journal: %w", err)
	}
	s.crash("done")
	return nil
}

// rollBack undoes a publish that had not swapped: the stage is dropped.
func (s *LocalStore) rollBack(ctx context.Context, p Partition) error {
	if err := os.RemoveAll(s.stage(p)); err != nil {
		return err
	}
	return s.lake().st.Delete(ctx, journalName(p))
}

// Recover implements Lake: for each journal left by a crash, the publish
// is finished when the partition already holds the new files (the first
// compacted file of the journal's id, or the partition is missing after a
// fallback swap's first rename) and undone otherwise. Stages without a
// journal, spills, and trash past its grace period are deleted.
func (s *LocalStore) Recover(ctx context.Context) error {
	err := s.lake().journals(ctx, func(p Partition, j journal) error { return s.recoverOne(ctx, p, j) })
	if err != nil {
		return err
	}
	// Stages without a journal never became visible.
	if err := os.RemoveAll(filepath.Join(s.root(), "stage")); err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	if err := os.RemoveAll(s.tmp()); err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	return s.emptyTrash(ctx)
}

func (s *LocalStore) recoverOne(ctx context.Context, p Partition, j journal) error {
	part := s.part(p)
	if _, err := os.Stat(part); errors.Is(err, fs.ErrNotExist) {
		// A fallback swap stopped between its two renames.
		if err := os.Rename(s.stage(p), part); err != nil {
			return err
		}
		return s.rollForward(ctx, p, j)
	}
	if _, err := os.Stat(filepath.Join(part, pq.CompactedName(j.ID, 0))); err == nil {
		return s.rollForward(ctx, p, j)
	}
	return s.rollBack(ctx, p)
}

// emptyTrash deletes retired partitions older than the grace period (the
// trash folder names start with the time they were retired).
func (s *LocalStore) emptyTrash(ctx context.Context) error {
	grace := s.Grace
	if grace == 0 {
		grace = DefaultGrace
	}
	dir := filepath.Join(s.root(), "trash")
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("trash: %w", err)
	}
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return err
		}
		stamp, _, _ := strings.Cut(e.Name(), "-")
		t, err := time.Parse("20060102T150405Z", stamp)
		if err != nil || s.now().Sub(t) < grace {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("trash: %w", err)
		}
	}
	return nil
}
