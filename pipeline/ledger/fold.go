package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"
)

// foldedName is the object, in a day's folder of done/, that holds the
// day's folded done records: a JSON array, oldest snapshot first.
const foldedName = "folded.json"

// FoldMark is the object, in the ledger's folder, that holds the day
// before which every done record is folded (YYYY-MM-DD; an older lake's
// RFC 3339 time of its last fold reads as that time's day). A record
// settled later for a day before it lowers it (write).
const FoldMark = "done-folded.last"

// FoldMax is the number of objects a run's Fold touches at most: done
// records read and deleted, and day folders listed.
const FoldMax = 1000

// FoldReport is what Fold did.
type FoldReport struct {
	Days    int  // day folders folded (whole or in part)
	Records int  // single done records moved into their day's folded object
	More    bool // days before `before` are left for the next Fold
}

// Fold keeps done/ flat: the done records of each day before `before`
// (YYYY-MM-DD) are gathered into that day's one folded object
// (done/date=D/folded.json), then the single records are deleted. A year
// of 5-minute snapshots is 365 objects, not 105,120.
//
// Its work is bounded whatever the history: it starts at the fold mark
// (FoldMark: every day before it is folded), takes the oldest days first,
// and stops after max objects (FoldMax; max <= 0 is no bound), leaving
// the rest to the next Fold (More). It lists the day folders in one
// delimited call and each day it folds on its own, never done/ whole. Once
// caught up, a Fold reads the mark and nothing else.
//
// Nothing is lost on a crash: the folded object is written whole (with
// the records it already held) before any single record is deleted, and a
// reader looks for a snapshot's single record first, then in its day's
// folded object (Committed). A fold cut short leaves a day's records in
// both places; the next Fold gathers them again (a snapshot is kept once).
// A record settled later for a folded day (catch-up of an old snapshot)
// is a single record again, and lowers the mark, until the next Fold.
func (l *Ledger) Fold(ctx context.Context, before string, max int) (FoldReport, error) {
	var rep FoldReport
	mark, err := l.foldMark(ctx)
	if err != nil || mark >= before {
		return rep, err
	}
	switch {
	case max <= 0:
		max = int(^uint(0) >> 1)
	case max < 3:
		max = 3 // a listing, and one record read and deleted
	}
	ents, err := l.st.listDir(ctx, "done/")
	if err != nil {
		return rep, fmt.Errorf("ledger: %w", err)
	}
	budget := max
	next := before // the new mark: the first day not folded whole
	for _, e := range ents {
		day, ok := strings.CutPrefix(strings.TrimSuffix(path.Base(e), "/"), "date=")
		if !ok || !strings.HasSuffix(e, "/") || day < mark || day >= before {
			continue
		}
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		if budget <= 0 {
			next, rep.More = day, true
			break
		}
		budget--
		names, err := l.st.list(ctx, e)
		if err != nil {
			return rep, fmt.Errorf("ledger: %w", err)
		}
		var singles []string
		for _, n := range names {
			if base := path.Base(n); base != foldedName && strings.HasSuffix(base, ".json") && path.Dir(n)+"/" == e {
				singles = append(singles, n)
			}
		}
		part := len(singles) > budget/2 // each single is read and deleted
		if part {
			singles = singles[:budget/2]
		}
		if len(singles) > 0 {
			n, err := l.foldDay(ctx, e, singles)
			if err != nil {
				return rep, err
			}
			rep.Days++
			rep.Records += n
			budget -= 2 * n
		}
		if part {
			next, rep.More = day, true
			break
		}
	}
	if next != mark {
		if err := l.st.put(ctx, FoldMark, []byte(next+"\n")); err != nil {
			return rep, fmt.Errorf("ledger: fold mark: %w", err)
		}
	}
	return rep, nil
}

// foldMark returns the day before which every done record is folded (""
// when no Fold has run).
func (l *Ledger) foldMark(ctx context.Context) (string, error) {
	b, err := l.st.get(ctx, FoldMark)
	if err != nil {
		return "", fmt.Errorf("ledger: fold mark: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if len(s) < len(time.DateOnly) {
		return "", nil
	}
	day := s[:len(time.DateOnly)]
	if _, err := time.Parse(time.DateOnly, day); err != nil {
		return "", nil // unreadable: fold from the oldest day
	}
	return day, nil
}

// lowerFoldMark makes the next Fold visit day: a record was settled into
// it after the days before the mark were folded. Call with mu held.
func (l *Ledger) lowerFoldMark(ctx context.Context, day string) error {
	mark, err := l.foldMark(ctx)
	if err != nil || mark == "" || mark <= day {
		return err
	}
	if err := l.st.put(ctx, FoldMark, []byte(day+"\n")); err != nil {
		return fmt.Errorf("ledger: fold mark: %w", err)
	}
	return nil
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
