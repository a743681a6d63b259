package transform

import (
	"math"
	"strconv"
	"unsafe"

	"github.com/optlake/optlake/pipeline/values"
)

// The fast path: one instrument object parsed straight from the scanner's
// buffer, without the tokenizer's per-token calls and without copying its
// strings. It only accepts what it can decode exactly as the general path
// (InstrumentDecoder.instrument) would:
//
//   - the object is whole in the buffer (the general path handles refills);
//   - every key is a known venue field, at most once, or an unknown one
//     whose value is a plain scalar (it goes to extra as received); keys
//     have no escapes;
//   - every value has its field's type (or is null), strings are ASCII
//     without escapes, numbers fit the fast conversions below;
//   - instrument_name is a non-empty string;
//   - no member is named "instruments" (a listing element with one is a
//     group, see InstrumentDecoder.element).
//
// Anything else — nested unknown members, wrong types, rejects, escapes,
// UTF-8, odd numbers, malformed JSON — returns 0 before anything is written,
// and the general path decodes the object from its first byte. So the fast
// path changes speed, never results; FuzzFastPath checks that.

// fastInstrument decodes the object at the start of w into d.r and returns
// the bytes it spans, or 0 to leave it to the general path.
func (d *InstrumentDecoder) fastInstrument(w []byte) int {
	if d.noFast || len(w) < 2 || w[0] != '{' {
		return 0
	}
	r := &d.r
	r.set, r.null = 0, 0
	r.extra = r.extra[:0]
	r.src = w
	p := skipWS(w, 1)
	if p >= len(w) || w[p] == '}' {
		return 0
	}
	next := 0
	for {
		// The key: most likely the field after the previous one.
		if p >= len(w) || w[p] != '"' {
			return 0
		}
		fi := -1
		if next < len(venueFields) {
			name := venueFields[next].name
			if e := p + 1 + len(name); e < len(w) && w[e] == '"' && string(w[p+1:e]) == name {
				fi, p = next, e+1
			}
		}
		if fi < 0 {
			q := asciiString(w, p)
			if q < 0 {
				return 0
			}
			if fi = fieldIndex(w[p+1 : q]); fi < 0 {
				if string(w[p+1:q]) == "instruments" {
					return 0 // a group, or an instrument with that member: the general path decides
				}
				// An unknown member goes to extra as received, when its
				// value is a scalar the fast path can check.
				start := p
				if p = skipWS(w, q+1); p >= len(w) || w[p] != ':' {
					return 0
				}
				if p = skipWS(w, p+1); p >= len(w) {
					return 0
				}
				if p = skipScalar(w, p); p < 0 {
					return 0
				}
				r.extra = append(r.extra, start, p)
				var more, ok bool
				if p, more, ok = memberEnd(w, p); !ok {
					return 0
				}
				if more {
					continue
				}
				break
			}
			p = q + 1
		}
		bit := uint32(1) << fi
		if r.set&bit != 0 {
			return 0
		}
		r.set |= bit
		next = fi + 1
		p = skipWS(w, p)
		if p >= len(w) || w[p] != ':' {
			return 0
		}
		if p = skipWS(w, p+1); p >= len(w) {
			return 0
		}
		// The value.
		v := &r.vals[fi]
		switch c := w[p]; {
		case c == 'n':
			if !hasWord(w, p, "null") {
				return 0
			}
			r.null |= bit
			p += 4
		case venueFields[fi].kind == kString:
			e := asciiString(w, p)
			if e < 0 {
				return 0
			}
			v.soff, v.slen = p+1, e-p-1
			p = e + 1
		case venueFields[fi].kind == kFloat:
			f, e, ok := parseNumber(w, p)
			if !ok || e >= len(w) || numberByte(w[e]) {
				return 0
			}
			v.f, p = f, e
		case venueFields[fi].kind == kInt:
			i, e, ok := parseInt(w, p)
			if !ok || e >= len(w) || numberByte(w[e]) {
				return 0
			}
			v.i, p = i, e
		case venueFields[fi].kind == kBool:
			switch {
			case c == 't' && hasWord(w, p, "true"):
				v.b, p = true, p+4
			case c == 'f' && hasWord(w, p, "false"):
				v.b, p = false, p+5
			default:
				return 0
			}
		default: // kIndexPrice: a string holding a decimal number
			e := asciiString(w, p)
			if e < 0 {
				return 0
			}
			v.soff, v.slen = p+1, e-p-1
			v.f, v.fok = parseDecimalFast(w[p+1 : e])
			p = e + 1
		}
		var more, ok bool
		if p, more, ok = memberEnd(w, p); !ok {
			return 0
		}
		if !more {
			break
		}
	}
	if r.set&^r.null&(1<<nameField) == 0 || r.vals[nameField].slen == 0 {
		return 0 // rejected: the general path words the reason
	}
	return p
}

// memberEnd consumes what follows a member's value: a comma (more members;
// p is then at the next key) or the closing brace (p just after it).
func memberEnd(w []byte, p int) (next int, more, ok bool) {
	if p = skipWS(w, p); p >= len(w) {
		return 0, false, false
	}
	switch w[p] {
	case ',':
		return skipWS(w, p+1), true, true
	case '}':
		return p + 1, false, true
	}
	return 0, false, false
}

// skipScalar returns the end of the JSON string (printable ASCII, no
// escapes), number or literal at w[p], or -1 for anything else (objects,
// arrays, escapes: the general path checks those).
func skipScalar(w []byte, p int) int {
	switch c := w[p]; {
	case c == '"':
		if e := asciiString(w, p); e >= 0 {
			return e + 1
		}
	case c == 't' && hasWord(w, p, "true"), c == 'n' && hasWord(w, p, "null"):
		return p + 4
	case c == 'f' && hasWord(w, p, "false"):
		return p + 5
	case c == '-' || c-'0' <= 9:
		// A number beyond float64's range (1e400) is left to the
		// general path, which keeps it as received all the same.
		if _, e, ok := parseNumber(w, p); ok && e < len(w) && !numberByte(w[e]) {
			return e
		}
	}
	return -1
}

func skipWS(w []byte, p int) int {
	for p < len(w) && (w[p] == ' ' || w[p] == '\n' || w[p] == '\r' || w[p] == '\t') {
		p++
	}
	return p
}

func hasWord(w []byte, p int, word string) bool {
	return len(w)-p >= len(word) && string(w[p:p+len(word)]) == word
}

// numberByte reports bytes that may continue a number token: after a number
// the fast path wants a delimiter, else the general path decides.
func numberByte(c byte) bool {
	return c-'0' <= 9 || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

// asciiString returns the index of the closing quote of the string starting
// at w[p] ('"'), or -1 when it is not there, not plain printable ASCII
// without escapes, or not whole in w.
func asciiString(w []byte, p int) int {
	if w[p] != '"' {
		return -1
	}
	for q := p + 1; q < len(w); q++ {
		c := w[q]
		if c == '"' {
			return q
		}
		if c < 0x20 || c == '\\' || c >= 0x80 {
			return -1
		}
	}
	return -1
}

// pow10 holds the powers of ten that float64 represents exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// parseNumber parses the JSON number at b[p:] (grammar checked) and returns
// its value and end. With at most 19 significant digits, a mantissa up to
// 2^53 and a decimal exponent within ±22, mantissa and power of ten are
// exact float64s and one IEEE multiplication or division rounds correctly:
// the result is strconv.ParseFloat's (which takes the same fast path). Other
// numbers go to strconv.ParseFloat. ok is false when the grammar does not
// match or the value is outside float64's finite range.
func parseNumber(b []byte, p int) (f float64, end int, ok bool) {
	start := p
	neg := p < len(b) && b[p] == '-'
	if neg {
		p++
	}
	if p >= len(b) {
		return 0, start, false
	}
	var m uint64
	nd, exp := 0, 0
	exact := true
	switch c := b[p]; {
	case c == '0':
		p++
	case c-'1' <= 8:
		for ; p < len(b) && b[p]-'0' <= 9; p++ {
			if nd < 19 {
				m = m*10 + uint64(b[p]-'0')
				nd++
			} else {
				exact = false
			}
		}
	default:
		return 0, start, false
	}
	if p < len(b) && b[p] == '.' {
		p++
		q := p
		for ; p < len(b) && b[p]-'0' <= 9; p++ {
			switch {
			case m == 0 && b[p] == '0':
				exp--
			case nd < 19:
				m = m*10 + uint64(b[p]-'0')
				nd++
				exp--
			default:
				exact = false
			}
		}
		if p == q {
			return 0, start, false
		}
	}
	if p < len(b) && (b[p] == 'e' || b[p] == 'E') {
		p++
		eneg := false
		if p < len(b) && (b[p] == '+' || b[p] == '-') {
			eneg = b[p] == '-'
			p++
		}
		q, e := p, 0
		for ; p < len(b) && b[p]-'0' <= 9; p++ {
			if e < 100000 {
				e = e*10 + int(b[p]-'0')
			}
		}
		if p == q {
			return 0, start, false
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	if exact && m <= 1<<53 && exp >= -22 && exp <= 22 {
		f = float64(m)
		if exp < 0 {
			f /= pow10[-exp]
		} else {
			f *= pow10[exp]
		}
		if neg {
			f = -f
		}
		return f, p, true
	}
	f, err := strconv.ParseFloat(bstr(b[start:p]), 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, start, false
	}
	return f, p, true
}

// parseInt parses a JSON integer of at most 18 digits at b[p:] (what
// strconv.ParseInt gives for it); ok is false for anything else.
func parseInt(b []byte, p int) (v int64, end int, ok bool) {
	start := p
	neg := p < len(b) && b[p] == '-'
	if neg {
		p++
	}
	if p >= len(b) {
		return 0, start, false
	}
	switch c := b[p]; {
	case c == '0':
		p++
	case c-'1' <= 8:
		q := p
		for ; p < len(b) && b[p]-'0' <= 9; p++ {
			v = v*10 + int64(b[p]-'0')
		}
		if p-q > 18 {
			return 0, start, false
		}
	default:
		return 0, start, false
	}
	if neg {
		v = -v
	}
	return v, p, true
}

// parseDecimalFast is ParseDecimal with the fast conversion first.
func parseDecimalFast(b []byte) (float64, bool) {
	if f, e, ok := parseNumber(b, 0); ok && e == len(b) {
		return f, true
	}
	return values.ParseDecimal(b)
}

// bstr views b as a string without copying, for strconv calls that do not
// retain their argument.
func bstr(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
