package lake

import (
	"context"
	"fmt"
	"sort"

	"github.com/optlake/optlake/lake/hive"
	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/lake/tableformat"
	"github.com/optlake/optlake/storage"
)

// formats are the table formats a lake can have, by name: each is a
// package whose Open makes its tableformat.Format. A new format is one
// package and one entry here.
var formats = map[Kind]func(ctx context.Context, st storage.Store, opt Options) (tableformat.Format, error){
	Parquet: func(_ context.Context, st storage.Store, opt Options) (tableformat.Format, error) {
		return hive.Open(st, opt.Options), nil
	},
	Iceberg: func(ctx context.Context, st storage.Store, opt Options) (tableformat.Format, error) {
		return iceberg.NewFormat(ctx, st, opt.Options, opt.Iceberg...)
	},
}

// kinds lists the formats' names, sorted.
func kinds() []string {
	out := make([]string, 0, len(formats))
	for k := range formats {
		out = append(out, string(k))
	}
	sort.Strings(out)
	return out
}

// Options are what Open builds the lake's format with.
type Options struct {
	tableformat.Options
	// Iceberg are the Iceberg format's own options (a catalog plugs in
	// here); other formats ignore them.
	Iceberg []iceberg.Option
}

// Format is a data directory's table format, read once per command: its
// name and whether a run recorded it, and the format's own parts
// (tableformat.Format) that the commands ask.
type Format struct {
	tableformat.Format
	// Kind is the lake's format: the recorded one, or parquet for a lake
	// no run wrote yet (Recorded false).
	Kind     Kind
	Recorded bool
}

// Open is the table format of the data directory st for a command that
// writes the lake (run, replay, demo), called under the data directory's
// lock: the recorded format, recorded at the lake's first run (asked, or
// parquet when asked is ""). Asking for the other format than the lake's
// is a *MismatchError. The caller closes the format.
func Open(ctx context.Context, st storage.Store, asked Kind, opt Options) (*Format, error) {
	k, err := Resolve(ctx, st, asked)
	if err != nil {
		return nil, err
	}
	return open(ctx, st, k, true, opt)
}

// Read is the table format of the data directory st for a command that
// only reads or tends the lake (compact, status, history, lake convert):
// the recorded format, or parquet without recording it when none is
// recorded (Recorded false). The caller closes the format.
func Read(ctx context.Context, st storage.Store, opt Options) (*Format, error) {
	k, err := Recorded(ctx, st)
	if err != nil {
		return nil, err
	}
	return open(ctx, st, k, k != "", opt)
}

func open(ctx context.Context, st storage.Store, k Kind, recorded bool, opt Options) (*Format, error) {
	if k == "" {
		k = Parquet
	}
	f, err := formats[k](ctx, st, opt)
	if err != nil {
		return nil, fmt.Errorf("table format %s: %w", k, err)
	}
	return &Format{Format: f, Kind: k, Recorded: recorded}, nil
}

// Status is the format's section of `optlake status`: table_format (""
// for a lake no run wrote yet) and the format's own keys and lines, after
// a "table format: NAME" line.
func (f *Format) Status(ctx context.Context) (tableformat.Status, error) {
	if !f.Recorded {
		return tableformat.Status{JSON: map[string]any{"table_format": ""}}, nil
	}
	s, err := f.Format.Status(ctx)
	out := tableformat.Status{JSON: map[string]any{"table_format": f.Kind}, Lines: []string{"table format: " + string(f.Kind)}}
	for k, v := range s.JSON {
		out.JSON[k] = v
	}
	out.Lines = append(out.Lines, s.Lines...)
	return out, err
}
