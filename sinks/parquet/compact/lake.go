package compact

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	pq "github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/storage"
)

// lake is the read side of every Lake, and the journal they write: the
// partitions, their files and the parked ones, read through the data
// directory's storage.Store (a local folder or a bucket prefix alike).
// Names are relative to the store.
type reader struct{ st storage.Store }

// partName is the partition's folder: TABLE/date=YYYY-MM-DD/.
func partName(p Partition) string { return p.Table + "/date=" + p.Date + "/" }

// parkedName is the folder of the files parked for the partition.
func parkedName(p Partition) string {
	return path.Join(pq.CompactDir, pq.ParkedDir, p.Table, "date="+p.Date) + "/"
}

// journalDir holds one journal per partition being published.
const journalDir = pq.CompactDir + "/journal/"

func journalName(p Partition) string { return journalDir + p.Table + "@" + p.Date + ".json" }

// journal is what a publish records before it changes anything a reader
// sees, so that Recover can finish or undo it after a crash.
type journal struct {
	ID     string   `json:"id"`
	Files  []string `json:"files,omitempty"`  // the compacted files (bucket)
	Inputs []string `json:"inputs,omitempty"` // the partition's files they replace (bucket)
	Parked []string `json:"pending"`          // parked files consumed
	Trash  string   `json:"trash,omitempty"`  // where the replaced folder goes (local)
}

func (l reader) writeJournal(ctx context.Context, p Partition, j journal) error {
	b, err := json.Marshal(j)
	if err == nil {
		err = l.st.Put(ctx, journalName(p), b)
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
	objs, err := st.List(ctx, journalDir)
	if err != nil && !errors.Is(err, storage.ErrNotExist) {
		return nil, fmt.Errorf("compaction journals: %w", err)
	}
	var out []Journal
	for _, o := range objs {
		name, ok := strings.CutSuffix(strings.TrimPrefix(o.Name, journalDir), ".json")
		table, date, ok2 := strings.Cut(name, "@")
		if !ok || !ok2 {
			continue
		}
		out = append(out, Journal{Partition: Partition{Table: table, Date: date}, Name: o.Name})
	}
	return out, nil
}

// journals calls fn with each journal a crash left, in name order.
func (l reader) journals(ctx context.Context, fn func(Partition, journal) error) error {
	js, err := Journals(ctx, l.st)
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	for _, jn := range js {
		p := jn.Partition
		b, err := storage.ReadAll(ctx, l.st, jn.Name)
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
	parts := strings.Split(rel, "/")
	if len(parts) != 3 {
		return Partition{}, "", false
	}
	table, day, name := parts[0], parts[1], parts[2]
	if !isTable(table) {
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

// isTable tells a table's folder from the data directory's others: the
// raw archive, hidden (".compact", ".ledger") and "_" folders.
func isTable(name string) bool {
	return name != "" && !strings.HasPrefix(name, ".") && !strings.HasPrefix(name, "_") && name != "raw"
}

// Partitions implements Lake. It lists the data directory one level deep
// (ListDir) for the tables, then only each table's objects (TABLE/date=*/)
// and the parked ones: never the raw archive.
func (l reader) Partitions(ctx context.Context) ([]Partition, error) {
	top, err := l.st.ListDir(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	parked := pq.CompactDir + "/" + pq.ParkedDir + "/"
	prefixes := []string{parked}
	for _, in := range top {
		if table, ok := strings.CutSuffix(in.Name, "/"); ok && isTable(table) {
			prefixes = append(prefixes, in.Name)
		}
	}
	seen := map[Partition]bool{}
	var out []Partition
	for _, prefix := range prefixes {
		objs, err := l.st.List(ctx, prefix)
		if err != nil {
			return nil, fmt.Errorf("list partitions: %w", err)
		}
		for _, o := range objs {
			rel := o.Name
			if prefix == parked {
				rel = strings.TrimPrefix(rel, parked)
			}
			p, _, ok := partitionOf(rel)
			if ok && !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
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
func (l reader) files(ctx context.Context, prefix string) ([]File, error) {
	objs, err := l.st.List(ctx, prefix)
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

// List implements Lake: the partition's files, then its parked ones
// (Parked set).
func (l reader) List(ctx context.Context, p Partition) ([]File, error) {
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

// Open implements Lake.
func (l reader) Open(ctx context.Context, p Partition, f File) (Input, error) {
	name := partName(p) + f.Name
	if f.Parked {
		name = parkedName(p) + f.Name
	}
	r, err := l.st.Open(ctx, name)
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
