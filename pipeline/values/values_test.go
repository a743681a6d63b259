package values

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/optlake/optlake/internal/jsontok"
)

func TestEpochToMillis(t *testing.T) {
	cases := []struct {
		v    int64
		unit TimeUnit
		ms   int64
		ok   bool
	}{
		{1763596800, UnitAuto, 1763596800000, true},
		{1763596800000, UnitAuto, 1763596800000, true},
		{1763596800000000, UnitAuto, 1763596800000, true},
		{1763596800000000000, UnitAuto, 1763596800000, true},
		{-1763596800, UnitAuto, -1763596800000, true},
		{math.MaxInt64, UnitSeconds, 0, false},
		{math.MinInt64, UnitSeconds, 0, false},
		{math.MaxInt64, UnitMillis, 0, false},
		{math.MinInt64, UnitAuto, -9223372036855, true},
		{253402300799, UnitSeconds, 253402300799000, true},
		{253402300800, UnitSeconds, 0, false},
		{-1, UnitNanos, -1, true},
	}
	for _, c := range cases {
		ms, ok := EpochToMillis(c.v, c.unit)
		if ms != c.ms || ok != c.ok {
			t.Errorf("EpochToMillis(%d, %v) = %d,%v want %d,%v", c.v, c.unit, ms, ok, c.ms, c.ok)
		}
	}
}

// One sentinel for every bad-input error; the messages are unchanged.
func TestErrBadInput(t *testing.T) {
	syn := &jsontok.SyntaxError{Offset: 7, Msg: "unexpected ]"}
	cases := []struct {
		err  error
		bad  bool
		text string
	}{
		{&ShapeError{Msg: "listing is a JSON object"}, true, "listing is a JSON object"},
		{&ShapeError{Pkg: "infer", Msg: "too deep"}, true, "infer: too deep"},
		{&ShapeError{Pkg: "infer", Table: "positions", Msg: "a JSON string"}, true, "infer: table positions: a JSON string"},
		{BadInput(syn), true, "invalid JSON at byte 7: unexpected ]"},
		{BadInput(fmt.Errorf("group 2: %w", syn)), true, "group 2: invalid JSON at byte 7: unexpected ]"},
		{BadInput(BadInput(syn)), true, "invalid JSON at byte 7: unexpected ]"},
		{BadInput(errors.New("read: connection reset")), false, "read: connection reset"},
		{fmt.Errorf("emit: %w", errors.New("disk full")), false, "emit: disk full"},
	}
	for _, c := range cases {
		if errors.Is(c.err, ErrBadInput) != c.bad || c.err.Error() != c.text {
			t.Errorf("%q: bad input %v, want %v %q", c.err, !c.bad, c.bad, c.text)
		}
	}
	if BadInput(nil) != nil {
		t.Error("BadInput(nil) != nil")
	}
	var s *jsontok.SyntaxError
	if !errors.As(BadInput(syn), &s) || s != syn {
		t.Error("BadInput hides the syntax error")
	}
}
