package history

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

func timeline() *Timeline {
	t1 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	t2 := t1.Add(5 * time.Minute)
	return &Timeline{
		Instrument: "BTC-27DEC26-100000-C",
		Events: []Event{
			{Time: t1, Source: "sim", Event: "listed", Initial: true},
			{Time: t2, PreviousTime: &t1, Source: "sim", Event: "changed", Field: "tick_size", Old: ptr("0.5"), New: ptr("1")},
			{Time: t2, PreviousTime: &t1, Source: "sim", Event: "changed", Field: "option_type", Old: ptr("call"), New: nil},
		},
		Points: []Point{
			{Time: t1, Source: "sim", IndexPrice: ptr(97000.5), IsActive: ptr(true), Deployed: ptr(false), TickSize: ptr(0.5), Strike: ptr(100000.0)},
			{Time: t2, Source: "sim", IndexPrice: nil, IsActive: ptr(false), TickSize: ptr(1.0)},
		},
	}
}

func TestWriteFormats(t *testing.T) {
	tl := timeline()
	var b strings.Builder
	if err := tl.Write(&b, "json"); err != nil {
		t.Fatal(err)
	}
	var back Timeline
	if err := json.Unmarshal([]byte(b.String()), &back); err != nil {
		t.Fatal(err)
	}
	if back.Instrument != tl.Instrument || len(back.Events) != 3 || len(back.Points) != 2 ||
		*back.Events[1].New != "1" || back.Events[2].New != nil || back.Points[1].IndexPrice != nil || *back.Points[0].IndexPrice != 97000.5 {
		t.Errorf("json round trip: %s", b.String())
	}

	b.Reset()
	if err := tl.Write(&b, "csv"); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(b.String())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1+3+2 || rows[0][0] != "kind" || rows[2][3] != "tick_size" || rows[3][5] != "" ||
		rows[4][0] != "snapshot" || rows[4][6] != "97000.5" || rows[5][6] != "" || rows[5][7] != "false" || strings.Contains(b.String(), "∅") || strings.Contains(b.String(), ",-") {
		t.Errorf("csv:\n%s", b.String())
	}

	for _, format := range []string{"table", ""} {
		b.Reset()
		if err := tl.Write(&b, format); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		for _, want := range []string{"BTC-27DEC26-100000-C — 3 events, 2 snapshots", "(first snapshot of the history)",
			"tick_size 0.5 → 1", "option_type call → ∅", "2026-11-22 10:05:00.000", "97000.5", "SNAPSHOT TIME"} {
			if !strings.Contains(out, want) {
				t.Errorf("table (format %q) lacks %q:\n%s", format, want, out)
			}
		}
	}

	if err := tl.Write(&b, "xml"); err == nil || !strings.Contains(err.Error(), "want table, json or csv") {
		t.Errorf("unknown format: %v", err)
	}
}

// finish orders what was read in file order by snapshot time, and an
// instrument that no snapshot mentions is ErrNotFound.
func TestFinishSortsAndNotFound(t *testing.T) {
	tl := timeline()
	tl.Points[0], tl.Points[1] = tl.Points[1], tl.Points[0]
	tl.Events[0], tl.Events[2] = tl.Events[2], tl.Events[0]
	got, err := tl.finish()
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(got.Points); i++ {
		if got.Points[i].Time.Before(got.Points[i-1].Time) {
			t.Errorf("points out of order: %v", got.Points)
		}
	}
	if got.Events[0].Event != "listed" {
		t.Errorf("first event %+v, want the listing", got.Events[0])
	}
	if _, err := FromParquet(context.Background(), t.TempDir(), "NOPE-1"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "NOPE-1") {
		t.Errorf("empty lake: %v, want ErrNotFound naming the instrument", err)
	}
}
