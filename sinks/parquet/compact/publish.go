package compact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/optlake/optlake/lake/layout"
	pq "github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/storage"
)

// Folders is the Target of the parquet table format: each partition is
// the data directory's folder TABLE/date=YYYY-MM-DD/, read and replaced
// through its storage.Store, a local folder or a bucket prefix alike.
// Compaction's own folders are under .compact/, outside every table
// folder.
//
// A publish writes one journal and is recovered one way on every store;
// how its new files become visible is the store's:
//
//   - A store that moves folders in one step (storage.Swapper: a local
//     folder) gets the new partition in .compact/stage/ and trades it with
//     the partition's folder in one exchange: a reader lists the old files
//     or the new ones, never neither or both. Where the file system cannot
//     exchange, the partition goes to the trash and the stage into its
//     place: between the two renames ("moved") a reader finds the day
//     missing. The replaced files stay in .compact/trash/ for Grace.
//   - Any other store (a bucket, which has no rename) gets the new files
//     under their final names as uploads held open, invisible until the
//     publish completes them, and the inputs are deleted after. The
//     window: from the first new file visible to the last input deleted a
//     reader sees rows twice; never a row missing. The incomplete uploads
//     of a crash are storage.CleanIncomplete's.
//
// The steps of a publish (Crash is called after each: Steps, BucketSteps):
// the files staged; the journal written (the compaction's id, its files,
// the inputs they replace, the parked files consumed); the new files
// visible ("swap"); the replaced files retired; the parked ones deleted;
// the journal deleted. Recover finishes a publish whose new files are all
// visible in the partition and undoes any other.
type Folders struct {
	St storage.Store
	// Crash, when set, is called at each step of a publish with the step's
	// name (tests kill the process there).
	Crash func(step string)
	// Now is the trash's clock (nil: time.Now).
	Now func() time.Time
	// Grace is how long replaced files stay in the trash before Recover
	// deletes them (for readers that still have them open or want them
	// back); 0 means DefaultGrace.
	Grace time.Duration

	spill string // the folder TempDir made ("" = none yet)
}

// For is the lake of the data directory st. crash is the tests' hook (nil:
// none), now the trash's clock (nil: time.Now).
func For(st storage.Store, crash func(step string), now func() time.Time) Target {
	return &Folders{St: st, Crash: crash, Now: now}
}

// DefaultGrace is how long replaced files are kept.
const DefaultGrace = time.Hour

// Steps of a publish on a storage.Swapper, in order; Crash is called
// after each (and after "moved", between the two renames of the fallback
// swap).
var Steps = []string{"staged", "journal", "swap", "retire", "parked", "done"}

// BucketSteps are the steps of a publish on any other store ("visible"
// after the first compacted file is visible, "swap" after the last).
var BucketSteps = []string{"staged", "journal", "visible", "swap", "retire", "parked", "done"}

const (
	stageDir = layout.StageDir
	trashDir = layout.TrashDir
	spillDir = layout.SpillDir
)

// stageName is the folder a Swapper's new partition is written in.
func stageName(p Partition) string { return stageDir + "/" + folderName(p) }

func (l *Folders) crash(step string) {
	if l.Crash != nil {
		l.Crash(step)
	}
}

// swapper is the store's ability to move folders, nil without it.
func (l *Folders) swapper() storage.Swapper {
	sw, _ := l.St.(storage.Swapper)
	return sw
}

func (l *Folders) trash(sw storage.Swapper) storage.Trash {
	grace := l.Grace
	if grace == 0 {
		grace = DefaultGrace
	}
	return storage.Trash{St: sw, Dir: trashDir, Grace: grace, Now: l.Now}
}

// TempDir implements Target: a folder of its own, made on first use, under
// the lake's .compact/tmp on a local folder (same file system) and under
// the system's temp folder otherwise. When it cannot be made, the error
// says so: spilling into (and then removing) a folder optlake did not make
// is never the fallback.
func (l *Folders) TempDir() (string, error) {
	if l.spill == "" {
		base := ""
		if dir := storage.LocalDir(l.St); dir != "" {
			base = filepath.Join(dir, filepath.FromSlash(spillDir))
			if err := os.MkdirAll(base, 0o755); err != nil {
				return "", fmt.Errorf("spill folder: %w", err)
			}
		}
		dir, err := os.MkdirTemp(base, "optlake-compact-")
		if err != nil {
			return "", fmt.Errorf("spill folder: %w", err)
		}
		l.spill = dir
	}
	return l.spill, nil
}

// Close implements Target: it removes the spill folder TempDir made, if any.
func (l *Folders) Close() error {
	if l.spill == "" {
		return nil
	}
	err := os.RemoveAll(l.spill)
	l.spill = ""
	return err
}

// Stage implements Target.
func (l *Folders) Stage(ctx context.Context, p Partition) (Staged, error) {
	s := &staged{l: l, p: p, ctx: ctx, sw: l.swapper(), dir: partName(p)}
	if s.sw != nil {
		s.dir = stageName(p) + "/"
		if err := s.sw.RemoveAll(ctx, stageName(p)); err != nil {
			return nil, fmt.Errorf("stage %s: %w", p, err)
		}
	}
	return s, nil
}

type staged struct {
	l   *Folders
	p   Partition
	ctx context.Context
	sw  storage.Swapper // nil: the files are uploads held at their final names
	dir string          // where the files are created

	names     []string
	ws        []storage.Writer
	journaled bool // from here a failed publish is Recover's
}

// committed commits its file on Close: a stage's files are whole and
// durable before the journal names them.
type committed struct{ storage.Writer }

func (w committed) Close() error { return w.Commit() }

// held keeps the upload open until Publish: Close only ends the writing.
type held struct{ storage.Writer }

func (held) Close() error { return nil }

func (s *staged) Create(name string) (io.WriteCloser, error) {
	w, err := s.l.St.Create(s.ctx, s.dir+name)
	if err != nil {
		return nil, err
	}
	s.names = append(s.names, name)
	s.ws = append(s.ws, w)
	if s.sw != nil {
		return committed{w}, nil
	}
	return held{w}, nil
}

// Abort implements Staged: the uploads not completed are aborted; the
// stage is removed unless a journal names it (then Recover decides).
func (s *staged) Abort() error {
	for _, w := range s.ws {
		w.Abort()
	}
	s.ws = nil
	if s.sw == nil || s.journaled {
		return nil
	}
	return s.sw.RemoveAll(context.WithoutCancel(s.ctx), stageName(s.p))
}

func (s *staged) Publish(ctx context.Context, id string, consumed []File) error {
	l, p := s.l, s.p
	l.crash("staged")
	j := journal{ID: id, Files: s.names}
	for _, f := range consumed {
		if f.Parked {
			j.Parked = append(j.Parked, f.Name)
		} else {
			j.Inputs = append(j.Inputs, f.Name)
		}
	}
	if err := l.writeJournal(ctx, p, j); err != nil {
		return err
	}
	s.journaled = true
	l.crash("journal")
	if err := ctx.Err(); err != nil {
		// Nothing visible changed yet: undo.
		l.rollBack(context.WithoutCancel(ctx), p, j)
		return err
	}
	if err := s.show(ctx, j); err != nil {
		return fmt.Errorf("publish %s: %w", p, err)
	}
	l.crash("swap")
	return l.rollForward(ctx, p, j)
}

// show makes the staged files visible: the stage and the partition
// exchanged on a Swapper, the held uploads completed elsewhere (undone
// when one fails).
func (s *staged) show(ctx context.Context, j journal) error {
	if s.sw != nil {
		return s.l.swap(ctx, s.sw, s.p, j.ID)
	}
	for i, w := range s.ws {
		if err := w.Commit(); err != nil {
			s.ws = s.ws[i+1:]
			s.l.rollBack(context.WithoutCancel(ctx), s.p, j)
			return err
		}
		if i == 0 {
			s.l.crash("visible")
		}
	}
	s.ws = nil
	return nil
}

// swap puts the stage in the partition's place in one exchange; where the
// file system cannot exchange, the partition goes to the trash first and
// the stage is renamed into its place (Recover finishes it after a crash
// between the two).
func (l *Folders) swap(ctx context.Context, sw storage.Swapper, p Partition, id string) error {
	err := sw.Exchange(ctx, stageName(p), folderName(p))
	if !errors.Is(err, errors.ErrUnsupported) {
		return err
	}
	if err := l.trash(sw).Put(ctx, folderName(p), id+"/"+folderName(p)); err != nil && !errors.Is(err, storage.ErrNotExist) {
		return err
	}
	l.crash("moved") // the day is missing until the next rename
	return sw.Rename(ctx, stageName(p), folderName(p))
}

// rollForward finishes a publish whose new files are visible: the replaced
// files are retired (on a Swapper the stage holds them since the exchange:
// it goes to the trash; elsewhere the inputs are deleted), the parked
// files consumed are deleted, then the journal.
func (l *Folders) rollForward(ctx context.Context, p Partition, j journal) error {
	if sw := l.swapper(); sw != nil {
		err := l.trash(sw).Put(ctx, stageName(p), j.ID+"/"+folderName(p))
		if err != nil && !errors.Is(err, storage.ErrNotExist) { // none after the fallback swap
			return fmt.Errorf("retire %s: %w", p, err)
		}
	} else {
		ours := map[string]bool{}
		for _, f := range j.Files {
			ours[f] = true
		}
		for _, name := range j.Inputs {
			if ours[name] {
				continue
			}
			if err := l.St.Delete(ctx, partName(p)+name); err != nil {
				return fmt.Errorf("retire %s: %w", p, err)
			}
		}
	}
	l.crash("retire")
	for _, name := range j.Parked {
		if err := l.St.Delete(ctx, parkedName(p)+name); err != nil {
			return fmt.Errorf("remove parked %s: %w", name, err)
		}
	}
	l.crash("parked")
	if err := l.St.Delete(ctx, journalName(p)); err != nil {
		return fmt.Errorf("remove journal: %w", err)
	}
	l.crash("done")
	return nil
}

// rollBack undoes a publish whose new files are not all visible: the
// stage is dropped on a Swapper, the visible ones deleted elsewhere; then
// the journal. The inputs were never touched.
func (l *Folders) rollBack(ctx context.Context, p Partition, j journal) error {
	if sw := l.swapper(); sw != nil {
		if err := sw.RemoveAll(ctx, stageName(p)); err != nil {
			return err
		}
	} else {
		for _, name := range j.Files {
			if err := l.St.Delete(ctx, partName(p)+name); err != nil {
				return err
			}
		}
	}
	return l.St.Delete(ctx, journalName(p))
}

// Recover implements Target: each journal left by a crash is finished when
// every compacted file it names is visible in the partition and undone
// otherwise. Then stages without a journal (never visible), the spills,
// and trash past its grace period are deleted.
func (l *Folders) Recover(ctx context.Context) error {
	sw := l.swapper()
	err := l.journals(ctx, func(p Partition, j journal) error {
		if sw != nil {
			// A fallback swap stopped between its renames left the day
			// missing: the stage takes its place (a no-op when the day is
			// there, never replacing it).
			err := sw.Rename(ctx, stageName(p), folderName(p))
			if err != nil && !errors.Is(err, storage.ErrExist) && !errors.Is(err, storage.ErrNotExist) {
				return err
			}
		}
		files := j.Files
		if len(files) == 0 {
			files = []string{pq.CompactedName(j.ID, 0)}
		}
		for _, f := range files {
			if _, err := l.St.Stat(ctx, partName(p)+f); errors.Is(err, storage.ErrNotExist) {
				return l.rollBack(ctx, p, j)
			} else if err != nil {
				return err
			}
		}
		return l.rollForward(ctx, p, j)
	})
	if err != nil {
		return err
	}
	if dir := storage.LocalDir(l.St); dir != "" {
		if err := os.RemoveAll(filepath.Join(dir, filepath.FromSlash(spillDir))); err != nil {
			return fmt.Errorf("recover: %w", err)
		}
	}
	if sw != nil {
		if err := sw.RemoveAll(ctx, stageDir); err != nil {
			return fmt.Errorf("recover: %w", err)
		}
		if err := l.trash(sw).Empty(ctx); err != nil {
			return err
		}
	}
	return l.Close()
}
