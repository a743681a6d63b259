package compact

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/optlake/optlake/lake/layout"
	"github.com/optlake/optlake/storage"
)

// Partition is one table's day: DATA/<Table>/date=<Date>/ (layout.Day).
type Partition struct {
	Table string
	Date  string // YYYY-MM-DD
}

func (p Partition) String() string { return layout.Day(p.Table, p.Date) }

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

// Target is the lake as compaction works on it: Compact reads partitions
// through it and publishes the compacted files with it. Folders is the
// parquet table format's (the day folders of any storage.Store); a table
// format with its own metadata (lake/iceberg) has its own. Every method is called with the data
// directory's lock held: no other writer is at work.
type Target interface {
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

// folderName is the partition's folder: TABLE/date=YYYY-MM-DD.
func folderName(p Partition) string { return layout.Day(p.Table, p.Date) }

// partName is the prefix of the partition's files: TABLE/date=YYYY-MM-DD/.
func partName(p Partition) string { return folderName(p) + "/" }

// parkedName is the folder of the files parked for the partition.
func parkedName(p Partition) string { return layout.Parked(p.Table, p.Date) }

func journalName(p Partition) string { return layout.Journal(p.Table, p.Date) }

// journal is what a publish records before it changes anything a reader
// sees, so that Recover can finish or undo it after a crash. (A journal
// of an earlier version, written on a local folder, names no files: its
// first compacted file is CompactedName(ID, 0).)
type journal struct {
	ID     string   `json:"id"`
	Files  []string `json:"files,omitempty"`  // the compacted files
	Inputs []string `json:"inputs,omitempty"` // the partition's files they replace
	Parked []string `json:"pending"`          // parked files consumed (the key's name is the one lakes have always had)
}

func (l *Folders) writeJournal(ctx context.Context, p Partition, j journal) error {
	b, err := json.Marshal(j)
	if err == nil {
		err = l.St.Put(ctx, journalName(p), b)
	}
	if err != nil {
		return fmt.Errorf("publish %s: journal: %w", p, err)
	}
	return nil
}

// Journal names a compaction journal a crash left behind: the partition
// whose publish it records, and its object name in the data directory
// (.compact/journal/<table>@<date>.json). The next Recover finishes or
// undoes it.
type Journal struct {
	Partition
	Name string
}

// Journals lists the compaction journals of the data directory st, in name
// order: the one parser of their names (read by Recover and by status).
func Journals(ctx context.Context, st storage.Store) ([]Journal, error) {
	objs, err := st.List(ctx, layout.JournalDir)
	if err != nil && !errors.Is(err, storage.ErrNotExist) {
		return nil, fmt.Errorf("compaction journals: %w", err)
	}
	var out []Journal
	for _, o := range objs {
		table, date, ok := layout.JournalOf(o.Name)
		if !ok {
			continue
		}
		out = append(out, Journal{Partition: Partition{Table: table, Date: date}, Name: o.Name})
	}
	return out, nil
}

// journals calls fn with each journal a crash left, in name order.
func (l *Folders) journals(ctx context.Context, fn func(Partition, journal) error) error {
	js, err := Journals(ctx, l.St)
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	for _, jn := range js {
		p := jn.Partition
		b, err := storage.ReadAll(ctx, l.St, jn.Name)
		var j journal
		if err == nil {
			err = json.Unmarshal(b, &j)
		}
		if err != nil {
			return fmt.Errorf("recover %s: journal: %w", p, err)
		}
		if err := fn(p, j); err != nil {
			return fmt.Errorf("recover %s: %w", p, err)
		}
	}
	return nil
}

// partitionOf parses TABLE/date=YYYY-MM-DD/NAME.parquet (rel to the lake or
// to the parked folder): the one table filter.
func partitionOf(rel string) (Partition, string, bool) {
	table, date, name, ok := layout.SplitFile(rel)
	if !ok || !layout.IsTable(table) {
		return Partition{}, "", false
	}
	return Partition{Table: table, Date: date}, name, true
}

// Partitions implements Target. It lists the data directory one level deep
// (ListDir) for the tables, then each table's folders one level deep
// (TABLE/date=*/: a partition is a day's folder, never read here) and the
// parked objects: never the raw archive, nor a partition's files. Its cost
// is a listing per table, not per file of the history (a year of
// 5-minute runs is 365 folders a table, each read by List only when
// compacted).
func (l *Folders) Partitions(ctx context.Context) ([]Partition, error) {
	top, err := l.St.ListDir(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	seen := map[Partition]bool{}
	var out []Partition
	for _, in := range top {
		table, ok := strings.CutSuffix(in.Name, "/")
		if !ok || !layout.IsTable(table) {
			continue
		}
		days, err := l.St.ListDir(ctx, in.Name)
		if err != nil {
			return nil, fmt.Errorf("list partitions: %w", err)
		}
		for _, d := range days {
			date, ok := layout.DayOf(strings.TrimPrefix(d.Name, in.Name))
			if !ok || !strings.HasSuffix(d.Name, "/") {
				continue
			}
			p := Partition{Table: table, Date: date}
			seen[p] = true
			out = append(out, p)
		}
	}
	objs, err := l.St.List(ctx, layout.ParkedDir)
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	for _, o := range objs {
		p, _, ok := partitionOf(strings.TrimPrefix(o.Name, layout.ParkedDir))
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
func (l *Folders) files(ctx context.Context, prefix string) ([]File, error) {
	objs, err := l.St.List(ctx, prefix)
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

// List implements Target: the partition's files, then its parked ones
// (Parked set).
func (l *Folders) List(ctx context.Context, p Partition) ([]File, error) {
	files, err := l.files(ctx, partName(p))
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", p, err)
	}
	parked, err := l.files(ctx, parkedName(p))
	if err != nil {
		return nil, fmt.Errorf("list parked %s: %w", p, err)
	}
	for _, f := range parked {
		f.Parked = true
		files = append(files, f)
	}
	return files, nil
}

// Open implements Target.
func (l *Folders) Open(ctx context.Context, p Partition, f File) (Input, error) {
	name := partName(p) + f.Name
	if f.Parked {
		name = parkedName(p) + f.Name
	}
	// The listing gave the size: on a bucket, no HEAD an input file.
	r, err := storage.OpenListed(ctx, l.St, storage.Info{Name: name, Size: f.Size})
	if err != nil {
		return nil, err
	}
	return &input{SectionReader: io.NewSectionReader(r, 0, r.Size()), r: r}, nil
}

type input struct {
	*io.SectionReader
	r storage.Reader
}

func (in *input) Close() error { return in.r.Close() }
