package compact

import (
	"context"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/optlake/optlake/lake/layout"
	pq "github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/storage"
)

// Parking is the Parquet sink's Placer of a lake that compaction keeps
// (parquet.Options.Park): a file goes to its place, or is parked
// (layout.ParkedFile) when its day is compacted and the day's compacted
// file already holds its snapshot's rows — writing it in place would show
// those rows twice. The next compaction of the day replaces the snapshot's
// rows with the parked file's.
func Parking(st storage.Store) pq.Placer {
	return func(ctx context.Context, rel string) (string, error) { return parkName(ctx, st, rel) }
}

// parkName is Parking's answer for the file rel of the data directory st.
func parkName(ctx context.Context, st storage.Store, rel string) (string, error) {
	part := path.Dir(rel) + "/"
	// Only the compacted files' names: a listing of the whole partition
	// (every snapshot's file, stat'ed) per Open made a day's runs and a
	// replay quadratic in the day's snapshots.
	files, err := st.List(ctx, part+pq.CompactedPrefix)
	if err != nil {
		return "", fmt.Errorf("compacted partition: %w", err)
	}
	first := ""
	for _, f := range files {
		if rest := strings.TrimPrefix(f.Name, part); !strings.Contains(rest, "/") && pq.IsCompacted(rest) {
			first = f.Name
			break
		}
	}
	if first == "" {
		return "", nil
	}
	r, err := st.Open(ctx, first)
	if err != nil {
		return "", fmt.Errorf("compacted partition: %w", err)
	}
	defer r.Close()
	pf, err := file.NewParquetReader(io.NewSectionReader(r, 0, r.Size()))
	if err != nil {
		return "", fmt.Errorf("compacted partition: open %s: %w", first, err)
	}
	defer pf.Close()
	m, err := pq.ManifestOf(pf)
	if err != nil {
		return "", fmt.Errorf("compacted partition: %s: %w", first, err)
	}
	if !m.Has(path.Base(rel)) {
		return "", nil
	}
	return layout.ParkedFile(rel), nil
}
