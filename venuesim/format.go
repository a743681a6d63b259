package venuesim

import (
	"strconv"
)

func appendUint(b []byte, v uint64) []byte { return strconv.AppendUint(b, v, 10) }

func appendInt(b []byte, v int64) []byte { return strconv.AppendInt(b, v, 10) }

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, "true"...)
	}
	return append(b, "false"...)
}

// fmtFloat renders a float the way it goes into the listing: the shortest
// decimal that round-trips, never in exponent form.
func fmtFloat(v float64) []byte { return strconv.AppendFloat(nil, v, 'f', -1, 64) }

// appendCents appends a price held in hundredths, e.g. 9501235 -> 95012.35.
func appendCents(b []byte, cents int64) []byte {
	if cents < 0 {
		b = append(b, '-')
		cents = -cents
	}
	b = appendInt(b, cents/100)
	c := cents % 100
	return append(b, '.', byte('0'+c/10), byte('0'+c%10))
}

// dec formats v with prec decimals, never "-0.000".
func dec(v float64, prec int) string {
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if len(s) > 0 && s[0] == '-' {
		allZero := true
		for i := 1; i < len(s); i++ {
			if s[i] != '0' && s[i] != '.' {
				allZero = false
				break
			}
		}
		if allZero {
			s = s[1:]
		}
	}
	return s
}
