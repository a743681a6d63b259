package lake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/lake/layout"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks/parquet/compact"
	"github.com/optlake/optlake/storage"
)

// ConvertOptions are the inputs of Convert.
type ConvertOptions struct {
	// Schema is the schema of the table folder name: the fixed tables'
	// and the inferred account tables'; nil for a name it does not know.
	Schema func(name string) *schema.Table
	// Log receives a line per table; nil for none.
	Log *slog.Logger
	// Crash, for tests, is called after each table is registered, with
	// its name; an error stops the conversion there, as a crash would.
	Crash func(table string) error
	// Catalog is where the Iceberg tables are registered (none: the
	// lake's own metadata files). An Iceberg lake's tables that the
	// catalog lacks are registered in it at their current version.
	Catalog iceberg.CatalogConfig
}

// Converted is one table of a conversion.
type Converted struct {
	Table string
	Files int // the table's Parquet files, each registered once
	iceberg.Synced
	// Relocated: the table of an Iceberg lake was registered again at
	// this data directory (iceberg.Warehouse.Relocate), its metadata having
	// named another location.
	Relocated bool
	// Cataloged: the table of an Iceberg lake was registered in the
	// catalog (ConvertOptions.Catalog) at its current version.
	Cataloged bool
}

// Conversion is what Convert did.
type Conversion struct {
	Tables []Converted
	// Already: the lake was Iceberg; Tables are only those registered
	// again at this data directory (Relocated).
	Already bool
}

// ErrUnfinishedCompaction refuses a conversion while a compaction is cut
// short or replays wait parked for the next compaction of their day.
var ErrUnfinishedCompaction = errors.New("the lake has an unfinished compaction")

// Convert makes the Parquet lake st an Iceberg lake (`optlake lake convert
// --to iceberg`): every table folder's Parquet files are registered in
// place, without being rewritten, as one commit of its Iceberg table (the
// files carry no field ids; the table's name mapping resolves their
// columns), and only then is the format recorded as iceberg. The caller
// holds the data directory (its lock or lease).
//
// A conversion cut short leaves a lake that is still Parquet (its readers
// never look at metadata/) with some tables registered; converting again
// registers what they lack and drops what a compaction replaced meanwhile
// (Sync), so a rerun converts it. Converting an Iceberg lake changes
// nothing and returns no tables, but for the tables whose metadata names
// another location (a lake copied or moved, or made with a relative
// --data-dir before locations were absolute): those are registered again
// at st (iceberg.Warehouse.Relocate). It refuses a lake
// whose compaction is unfinished (a journal, or parked files): run
// `optlake compact` first. f is the lake's format (Read).
func Convert(ctx context.Context, st storage.Store, f *Format, opt ConvertOptions) (Conversion, error) {
	log := opt.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if f.Kind == Iceberg {
		// Converted already. Its tables are the truth now: a day's
		// folder may hold files a compaction replaced (kept for time
		// travel until they expire), which must not be registered again.
		// Only a table whose metadata names another location (a copied
		// or moved lake, a relative location) is registered again here.
		moved, err := iceberg.New(st, log).Relocate(ctx)
		out := Conversion{Already: true}
		for _, name := range moved {
			out.Tables = append(out.Tables, Converted{Table: name, Relocated: true})
			log.Info("registered at this data directory", "table", name)
		}
		if err != nil {
			return out, err
		}
		lk, err := iceberg.Open(ctx, st, opt.Catalog, log)
		if err != nil {
			return out, err
		}
		defer lk.Close()
		added, err := lk.Register(ctx)
		for _, name := range added {
			out.Tables = append(out.Tables, Converted{Table: name, Cataloged: true})
		}
		return out, err
	}
	tables, err := convertTables(ctx, st, opt, log)
	return Conversion{Tables: tables}, err
}

// convertTables registers every table folder of the Parquet lake st as
// an Iceberg table, then records the format.
func convertTables(ctx context.Context, st storage.Store, opt ConvertOptions, log *slog.Logger) ([]Converted, error) {
	if err := refuseUnfinishedCompaction(ctx, st); err != nil {
		return nil, err
	}
	tables, err := tableFiles(ctx, st)
	if err != nil {
		return nil, err
	}
	lk, err := iceberg.Open(ctx, st, opt.Catalog, log)
	if err != nil {
		return nil, err
	}
	defer lk.Close()
	var out []Converted
	for _, name := range sortedKeys(tables) {
		t := opt.Schema(name)
		if t == nil {
			return out, fmt.Errorf("convert: no schema for the table folder %s (not a table of optlake's?)", name)
		}
		s, err := lk.Sync(ctx, t, tables[name], map[string]string{"optlake.operation": "convert"})
		if err != nil {
			return out, fmt.Errorf("convert %s: %w", name, err)
		}
		out = append(out, Converted{Table: name, Files: len(tables[name]), Synced: s})
		log.Info("registered as an Iceberg table", "table", name, "files", len(tables[name]), "added", s.Added, "removed", s.Removed)
		if opt.Crash != nil {
			if err := opt.Crash(name); err != nil {
				return out, err
			}
		}
	}
	if err := st.Put(ctx, FormatName, []byte(string(Iceberg)+"\n")); err != nil {
		return out, fmt.Errorf("convert: record the format: %w", err)
	}
	return out, nil
}

func refuseUnfinishedCompaction(ctx context.Context, st storage.Store) error {
	js, err := compact.Journals(ctx, st)
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	if len(js) > 0 {
		return fmt.Errorf("%w: %s (%s); the next run or `optlake compact` finishes it, then convert", ErrUnfinishedCompaction, js[0].Partition, js[0].Name)
	}
	parked, err := st.List(ctx, layout.ParkedDir)
	if err != nil && !errors.Is(err, storage.ErrNotExist) {
		return fmt.Errorf("convert: %w", err)
	}
	if len(parked) > 0 {
		return fmt.Errorf("%w: %d files wait parked in %s for the next compaction of their day (%s); run `optlake compact`, then convert",
			ErrUnfinishedCompaction, len(parked), strings.TrimSuffix(layout.ParkedDir, "/"), parked[0].Name)
	}
	return nil
}

// tableFiles lists the Parquet files of every table folder of st:
// TABLE/date=YYYY-MM-DD/NAME.parquet, by table. Folders that are not
// tables (raw/, _ledger/, _state/, .compact/, …) and a table's metadata/
// are not listed.
func tableFiles(ctx context.Context, st storage.Store) (map[string][]string, error) {
	top, err := st.ListDir(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("convert: list tables: %w", err)
	}
	out := map[string][]string{}
	for _, in := range top {
		table, ok := strings.CutSuffix(in.Name, "/")
		if !ok || !layout.IsTable(table) {
			continue
		}
		objs, err := st.List(ctx, layout.Days(table))
		if err != nil {
			return nil, fmt.Errorf("convert: list %s: %w", table, err)
		}
		for _, o := range objs {
			if _, _, _, ok := layout.SplitFile(o.Name); ok {
				out[table] = append(out[table], o.Name)
			}
		}
	}
	return out, nil
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
