package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/optlake/optlake/storage"
)

// DuplicateCount is what the live runs of one source found of duplicate
// keys in one endpoint (rows whose instrument_name came earlier in the
// snapshot, rejected with transform.ReasonDuplicate), all snapshots
// together: `status` reports it.
type DuplicateCount struct {
	Source    string `json:"source"`
	Endpoint  string `json:"endpoint"`
	Rows      int64  `json:"rows"`      // duplicate rows rejected
	Snapshots int64  `json:"snapshots"` // snapshots that had any
	// Last is the latest such snapshot, with LastRows of them.
	Last     time.Time `json:"last_snapshot_time"`
	LastRows int64     `json:"last_rows"`
}

// duplicatesObject holds the counts in the data directory, one object for
// every source and endpoint (written only by a run that found duplicates).
const duplicatesObject = "_state/duplicates.json"

// countDuplicates adds the live snapshot's duplicates (sum) to the counts
// in the data directory. A count that cannot be saved is logged: the
// snapshot's summary and metric have it all the same.
func (r *Runner) countDuplicates(ctx context.Context, log *slog.Logger, sum *Summary) {
	var found []EndpointResult
	for _, e := range sum.Endpoints {
		if e.Duplicates > 0 {
			found = append(found, e)
		}
	}
	if len(found) == 0 || r.cfg.Store == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	all, err := Duplicates(ctx, r.cfg.Store)
	if err != nil {
		log.Error("duplicate keys not counted for status", "err", err)
		return
	}
	for _, e := range found {
		i := sort.Search(len(all), func(i int) bool {
			return all[i].Source > sum.Source || all[i].Source == sum.Source && all[i].Endpoint >= e.Endpoint
		})
		if i == len(all) || all[i].Source != sum.Source || all[i].Endpoint != e.Endpoint {
			all = append(all[:i], append([]DuplicateCount{{Source: sum.Source, Endpoint: e.Endpoint}}, all[i:]...)...)
		}
		c := &all[i]
		c.Rows += e.Duplicates
		c.Snapshots++
		if !sum.SnapshotTime.Before(c.Last) {
			c.Last, c.LastRows = sum.SnapshotTime.UTC(), e.Duplicates
		}
	}
	b, err := json.MarshalIndent(all, "", "  ")
	if err == nil {
		err = r.cfg.Store.Put(ctx, duplicatesObject, append(b, '\n'))
	}
	if err != nil {
		log.Error("duplicate keys not counted for status", "err", err)
	}
}

// Duplicates reads the duplicate keys the live runs counted, by source and
// endpoint (none: nil).
func Duplicates(ctx context.Context, st storage.Store) ([]DuplicateCount, error) {
	b, err := storage.ReadAll(ctx, st, duplicatesObject)
	if errors.Is(err, storage.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("duplicate keys: %w", err)
	}
	var out []DuplicateCount
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("duplicate keys: %s: %w", duplicatesObject, err)
	}
	return out, nil
}
