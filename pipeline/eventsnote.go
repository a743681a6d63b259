package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/optlake/optlake/pipeline/events"
	"github.com/optlake/optlake/storage"
)

// EventsNote says that a snapshot's instrument events were not written
// (EndpointResult.EventsSkipped): the events state could not be saved, or
// the snapshot is older than the state. It is kept in the data directory,
// one per source, until a later snapshot of that source writes its events,
// so that `status` shows it after the run that exited 3 is gone.
type EventsNote struct {
	Source       string    `json:"source"`
	SnapshotTime time.Time `json:"snapshot_time"`
	RunID        string    `json:"run_id"`
	Endpoint     string    `json:"endpoint"`
	Reason       string    `json:"reason"`
}

const eventsNoteSuffix = ".skipped.json"

// eventsNotesDir is the folder of the notes that could not be written
// beside the state (the state's folder is what cannot be written: a full
// or read-only disk there, a file in its way).
const eventsNotesDir = "_state/events_notes"

// eventsNoteNames are the note's object names: beside the source's state,
// and in eventsNotesDir when that fails.
func eventsNoteNames(source string) (beside, elsewhere string) {
	state := filepath.ToSlash(events.StatePath("", source))
	beside = strings.TrimSuffix(state, ".state.zst") + eventsNoteSuffix
	return beside, eventsNotesDir + "/" + path.Base(beside)
}

// noteEvents keeps or clears the source's note after an endpoint whose
// instrument events were compared: kept when they were skipped, removed
// once the events of its snapshot or a later one were written. A note
// that cannot be written beside the state is written in eventsNotesDir;
// one that cannot be written at all is logged (the run already exits 3
// for the skip itself).
func (r *Runner) noteEvents(ctx context.Context, log *slog.Logger, sr *snapshotRun, res *EndpointResult) {
	if r.cfg.Store == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	beside, elsewhere := eventsNoteNames(sr.source)
	switch {
	case res.EventsSkipped != "":
		b, err := json.MarshalIndent(EventsNote{Source: sr.source, SnapshotTime: sr.time.UTC(), RunID: sr.runID,
			Endpoint: res.Endpoint, Reason: res.EventsSkipped}, "", "  ")
		if err == nil {
			b = append(b, '\n')
			if err = r.cfg.Store.Put(ctx, beside, b); err != nil {
				log.Warn("instrument events: cannot record beside the state that they were not written", "err", err)
				err = r.cfg.Store.Put(ctx, elsewhere, b)
			}
		}
		if err != nil {
			log.Error("instrument events: cannot record that they were not written", "err", err)
		}
	case res.eventsWritten:
		for _, name := range []string{beside, elsewhere} {
			b, err := storage.ReadAll(ctx, r.cfg.Store, name)
			if errors.Is(err, storage.ErrNotExist) {
				continue
			}
			var n EventsNote
			if err == nil && json.Unmarshal(b, &n) == nil && n.SnapshotTime.After(sr.time) {
				// A later snapshot's note: an older snapshot's events
				// (caught up, replayed) are not that one's.
				continue
			}
			if err := r.cfg.Store.Delete(ctx, name); err != nil && !errors.Is(err, storage.ErrNotExist) {
				log.Warn("instrument events: cannot clear the note of an earlier skip", "err", err)
			}
		}
	}
}

// EventsNotes returns the notes of every source whose last compared
// snapshot did not get its instrument events, by source.
func EventsNotes(ctx context.Context, st storage.Store) ([]EventsNote, error) {
	var infos []storage.Info
	for _, dir := range []string{filepath.ToSlash(events.StateDir("")), eventsNotesDir} {
		in, err := st.List(ctx, dir+"/")
		if err != nil {
			return nil, fmt.Errorf("instrument events notes: %w", err)
		}
		infos = append(infos, in...)
	}
	latest := map[string]int{} // source -> index in out: its newest note
	var out []EventsNote
	for _, in := range infos {
		if !strings.HasSuffix(in.Name, eventsNoteSuffix) {
			continue
		}
		b, err := storage.ReadAll(ctx, st, in.Name)
		if errors.Is(err, storage.ErrNotExist) {
			continue // cleared since the listing
		}
		if err != nil {
			return nil, fmt.Errorf("instrument events notes: %w", err)
		}
		var n EventsNote
		if err := json.Unmarshal(b, &n); err != nil {
			return nil, fmt.Errorf("instrument events notes: %s: %w", in.Name, err)
		}
		if i, ok := latest[n.Source]; ok {
			if n.SnapshotTime.After(out[i].SnapshotTime) {
				out[i] = n
			}
			continue
		}
		latest[n.Source] = len(out)
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b EventsNote) int { return strings.Compare(a.Source, b.Source) })
	return out, nil
}
