package transform

import "github.com/optlake/optlake/pipeline/values"

// TimeUnit is the unit of a raw epoch timestamp (values.TimeUnit).
type TimeUnit = values.TimeUnit

// The units, as in package values.
const (
	UnitAuto    = values.UnitAuto
	UnitSeconds = values.UnitSeconds
	UnitMillis  = values.UnitMillis
	UnitMicros  = values.UnitMicros
	UnitNanos   = values.UnitNanos
)

// ParseTimeUnit parses auto|s|ms|us|ns (values.ParseTimeUnit).
func ParseTimeUnit(s string) (TimeUnit, error) { return values.ParseTimeUnit(s) }
