package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
)

// foldedName is the object, in a day's folder of done/, that holds the
// day's folded done records: a JSON array, oldest snapshot first.
const foldedName = "folded.json"

// FoldReport is what Fold did.
type FoldReport struct {
	Days    int // day folders folded
	Records int // single done records moved into their day's folded object
}

// Fold keeps done/ flat: the done records of each day before `before`
// (YYYY-MM-DD) are gathered into that day's one folded object
// (done/date=D/folded.json), then the single records are deleted. A year
// of 5-minute snapshots is 365 objects, not 105,120.
//
// Nothing is lost on a crash: the folded object is written whole (with
// the records it already held) before any single record is deleted, and a
// reader looks for a snapshot's single record first, then in its day's
// folded object (Committed). A fold cut short leaves a day's records in
// both places; the next Fold gathers them again (a snapshot is kept once).
// A record settled later for a folded day (catch-up of an old snapshot)
// is a single record again until the next Fold.
func (l *Ledger) Fold(ctx context.Context, before string) (FoldReport, error) {
	var rep FoldReport
	names, err := l.st.list(ctx, "done/")
	if err != nil {
		return rep, fmt.Errorf("ledger: %w", err)
	}
	days := map[string][]string{} // day folder -> its single records
	for _, n := range names {
		dir, base := path.Split(n)
		day, ok := strings.CutPrefix(path.Base(dir), "date=")
		if !ok || day >= before || base == foldedName || !strings.HasSuffix(base, ".json") {
			continue
		}
		days[dir] = append(days[dir], n)
	}
	dirs := make([]string, 0, len(days))
	for d := range days {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, dir := range dirs {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		n, err := l.foldDay(ctx, dir, days[dir])
		if err != nil {
			return rep, err
		}
		rep.Days++
		rep.Records += n
	}
	return rep, nil
}

// foldDay writes the day folder dir's folded object with its records and
// the singles', then deletes the singles.
func (l *Ledger) foldDay(ctx context.Context, dir string, singles []string) (int, error) {
	folded := path.Join(dir, foldedName)
	recs, err := l.readFolded(ctx, folded)
	if err != nil {
		return 0, err
	}
	byKey := map[Key]int{}
	for i, r := range recs {
		byKey[r.Key()] = i
	}
	for _, n := range singles {
		b, err := l.st.get(ctx, n)
		if err != nil {
			return 0, fmt.Errorf("ledger: %w", err)
		}
		if b == nil {
			continue // folded and deleted meanwhile
		}
		var r Record
		if err := json.Unmarshal(b, &r); err != nil {
			return 0, fmt.Errorf("ledger: %s: %w", n, err)
		}
		r.SnapshotTime = r.SnapshotTime.UTC()
		if i, ok := byKey[r.Key()]; ok {
			recs[i] = r // the single record is the later word
			continue
		}
		byKey[r.Key()] = len(recs)
		recs = append(recs, r)
	}
	sort.Slice(recs, func(i, j int) bool {
		if !recs[i].SnapshotTime.Equal(recs[j].SnapshotTime) {
			return recs[i].SnapshotTime.Before(recs[j].SnapshotTime)
		}
		return recs[i].RunID < recs[j].RunID
	})
	b, err := json.Marshal(recs)
	if err != nil {
		return 0, fmt.Errorf("ledger: %w", err)
	}
	if err := l.st.put(ctx, folded, append(b, '\n')); err != nil {
		return 0, fmt.Errorf("ledger: %w", err)
	}
	for _, n := range singles {
		if err := l.st.delete(ctx, n); err != nil {
			return 0, fmt.Errorf("ledger: %w", err)
		}
	}
	return len(singles), nil
}

// readFolded returns the records of a folded object (none when it does
// not exist).
func (l *Ledger) readFolded(ctx context.Context, name string) ([]Record, error) {
	b, err := l.st.get(ctx, name)
	if err != nil || b == nil {
		return nil, wrap(err)
	}
	var recs []Record
	if err := json.Unmarshal(b, &recs); err != nil {
		return nil, fmt.Errorf("ledger: %s: %w", name, err)
	}
	return recs, nil
}

// doneRecord returns snapshot k's done record: its single record, or the
// one in its day's folded object (nil when neither holds it).
func (l *Ledger) doneRecord(ctx context.Context, k Key) (*Record, error) {
	k.Time = k.Time.UTC()
	b, err := l.st.get(ctx, doneName(k))
	if err != nil {
		return nil, wrap(err)
	}
	if b != nil {
		var done Record
		if err := json.Unmarshal(b, &done); err != nil {
			return nil, fmt.Errorf("ledger: %s: %w", doneName(k), err)
		}
		return &done, nil
	}
	recs, err := l.readFolded(ctx, path.Join(path.Dir(doneName(k)), foldedName))
	if err != nil {
		return nil, err
	}
	for i := range recs {
		if recs[i].SnapshotTime.Equal(k.Time) && recs[i].RunID == k.RunID {
			return &recs[i], nil
		}
	}
	return nil, nil
}
