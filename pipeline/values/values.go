// Package values parses raw venue values (decimal text, JSON numbers, epoch
// timestamps in any unit) the way every decoder does, and holds the
// bad-input error every decoder returns for a body that is not what it
// should be. It is a leaf: transform (the instruments listing) and infer
// (the account endpoints) both import it, and not each other.
package values

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unsafe"

	"github.com/optlake/optlake/internal/jsontok"
)

// TimeUnit is the unit of a raw epoch timestamp.
type TimeUnit int

const (
	UnitAuto TimeUnit = iota // detected from the magnitude
	UnitSeconds
	UnitMillis
	UnitMicros
	UnitNanos
)

// ParseTimeUnit parses auto|s|ms|us|ns.
func ParseTimeUnit(s string) (TimeUnit, error) {
	switch strings.ToLower(s) {
	case "", "auto":
		return UnitAuto, nil
	case "s", "sec", "seconds":
		return UnitSeconds, nil
	case "ms", "millis", "milliseconds":
		return UnitMillis, nil
	case "us", "micros", "microseconds":
		return UnitMicros, nil
	case "ns", "nanos", "nanoseconds":
		return UnitNanos, nil
	}
	return 0, fmt.Errorf("unknown timestamp unit %q (want auto, s, ms, us or ns)", s)
}

func (u TimeUnit) String() string {
	return [...]string{"auto", "s", "ms", "us", "ns"}[u]
}

// The range every reader we target (DuckDB, pandas, Python datetime) can
// represent: years 0001 to 9999.
const (
	minMillis = -62135596800000
	maxMillis = 253402300799999
)

// DetectUnit guesses the unit of an epoch value from its magnitude: values
// below 1e11 are seconds (up to year 5138), below 1e14 milliseconds, below
// 1e17 microseconds, anything larger nanoseconds.
func DetectUnit(v int64) TimeUnit {
	a := v
	if a < 0 {
		if a == math.MinInt64 {
			return UnitNanos
		}
		a = -a
	}
	switch {
	case a < 1e11:
		return UnitSeconds
	case a < 1e14:
		return UnitMillis
	case a < 1e17:
		return UnitMicros
	}
	return UnitNanos
}

// EpochToMillis converts an epoch value to milliseconds. ok is false when the
// instant is outside years 0001-9999 or the conversion would overflow: the
// caller stores null, never a clamped or wrapped value. Sub-millisecond
// digits of µs/ns values are truncated toward the earlier instant.
func EpochToMillis(v int64, unit TimeUnit) (ms int64, ok bool) {
	if unit == UnitAuto {
		unit = DetectUnit(v)
	}
	switch unit {
	case UnitSeconds:
		if v > maxMillis/1000 || v < minMillis/1000 {
			return 0, false
		}
		ms = v * 1000
	case UnitMillis:
		ms = v
	case UnitMicros:
		ms = FloorDiv(v, 1000)
	case UnitNanos:
		ms = FloorDiv(v, 1000_000)
	}
	if ms < minMillis || ms > maxMillis {
		return 0, false
	}
	return ms, true
}

// FloorDiv is a / b rounded toward negative infinity.
func FloorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && (a < 0) {
		q--
	}
	return q
}

// StringView views b as a string without copying, for calls that do not
// retain their argument (strconv's parsers); b must not change while the
// string is in use.
func StringView(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// ParseDecimal parses text holding a decimal number, as the venue writes
// index_price: the JSON number grammar, optionally with a leading '+'.
// ok is false for anything else (empty, words, hex, NaN/Inf, whitespace) and
// for values outside float64's range (Underflows included); it never
// clamps.
func ParseDecimal(b []byte) (float64, bool) {
	t := b
	if len(t) > 0 && t[0] == '+' {
		t = t[1:]
		if len(t) > 0 && t[0] == '-' {
			return 0, false
		}
	}
	if !jsontok.ValidNumber(t) {
		return 0, false
	}
	f, err := strconv.ParseFloat(StringView(t), 64)
	if err != nil || math.IsInf(f, 0) || Underflows(f, StringView(t)) {
		return 0, false
	}
	return f, true
}

// ParseJSONFloat parses a JSON number token into a float64, failing when it
// is outside float64's finite range or too small for its normal range
// (Underflows).
func ParseJSONFloat(b []byte) (float64, error) {
	f, err := strconv.ParseFloat(StringView(b), 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%s is outside the float64 range", b)
	}
	if Underflows(f, StringView(b)) {
		return 0, fmt.Errorf("%s is outside the float64 range (nonzero, smaller than %g: it would be %g)", b, minNormal, f)
	}
	return f, nil
}

// minNormal is the smallest positive normal float64.
const minNormal = 0x1p-1022

// Underflows reports whether f, parsed (round to nearest) from the number
// text, lost the value: text is not zero, but f is 0 (1e-400) or a
// subnormal, which has fewer significant bits than a float64 keeps
// (5e-324 and 7e-324 both parse to 4.9e-324). strconv.ParseFloat reports
// overflow (±Inf, ErrRange) but not this; decoders treat both alike.
func Underflows(f float64, text string) bool {
	if a := math.Abs(f); a >= minNormal {
		return false
	} else if a != 0 {
		return true
	}
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c == 'e' || c == 'E' {
			break
		}
		if c >= '1' && c <= '9' {
			return true
		}
	}
	return false
}

// ParseJSONInt parses a JSON number token that must be an exact integer
// within int64: 1700000000000 and 1.7e12 are accepted, 1.5 and 1e30 are not.
func ParseJSONInt(b []byte) (int64, error) {
	if v, err := strconv.ParseInt(StringView(b), 10, 64); err == nil {
		return v, nil
	}
	// Bound the exponent before big.Rat expands it: 1e999999999 would
	// otherwise cost gigabytes.
	if i := strings.IndexAny(StringView(b), "eE"); i >= 0 && len(b)-i > 4 {
		return 0, fmt.Errorf("%s is outside the int64 range", b)
	}
	r, ok := new(big.Rat).SetString(StringView(b))
	if !ok || !r.IsInt() {
		return 0, fmt.Errorf("%s is not an integer", b)
	}
	n := r.Num()
	if !n.IsInt64() {
		return 0, fmt.Errorf("%s is outside the int64 range", b)
	}
	return n.Int64(), nil
}
