package pipeline

import "testing"

// A snapshot's weight in the replay's budget: at most workers snapshots fit
// at once, small ones by count, large ones by bytes; one larger than the
// whole budget runs alone.
func TestReplayWeight(t *testing.T) {
	const b = replayBodyBudget
	for _, tc := range []struct {
		bodies  int64
		workers int
		fit     int64 // snapshots of this size that run at once
	}{
		{2 << 20, 2, 2},
		{2 << 20, 4, 4},
		{0, 1, 1},
		{b / 3, 2, 2},
		{b / 3, 4, 3},
		{b - 1, 4, 1},
		{10 * b, 2, 1},
	} {
		w := replayWeight(tc.bodies, tc.workers)
		if got := b / w; got != tc.fit || w > b || w < 1 {
			t.Errorf("bodies %d, %d workers: weight %d lets %d run at once, want %d", tc.bodies, tc.workers, w, got, tc.fit)
		}
	}
}
