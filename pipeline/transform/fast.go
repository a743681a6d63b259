package transform

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"

	"github.com/optlake/optlake/pipeline/values"
)

// The fast path: one instrument object parsed straight from the scanner's
// buffer into the batch's columns, without the tokenizer's per-token calls
// and without a copy of its strings in between. It only accepts what it can decode exactly as the general path
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
// UTF-8, odd numbers, malformed JSON — returns 0 with the values it wrote
// undone, and the general path decodes the object from its first byte. So
// the fast path changes speed, never results (null slots included);
// FuzzFastPath checks that.

// fastInstrument decodes the object at the start of w as the batch's next
// row and returns the bytes it spans, or 0 to leave it to the general path
// (with the batch as it was).
func (d *InstrumentDecoder) fastInstrument(w []byte) int {
	if d.noFast || len(w) < 2 || w[0] != '{' {
		return 0
	}
	b := d.b
	b.begin()
	full := b.full
	n := d.fastRow(w, b, b.rows)
	if n == 0 {
		b.undoRow(full)
	}
	return n
}

// fastRow writes the values of the object at the start of w into row row
// of b as it parses them, and ends the row (commit) when the whole object
// is one the fast path takes. Otherwise it returns 0 and the caller undoes
// the values written (batch.undoRow): null lists, the extra column and the
// row count are only written once nothing can fail.
func (d *InstrumentDecoder) fastRow(w []byte, b *batch, row int) int {
	r := &d.r
	r.set, r.null = 0, 0
	r.extra = r.extra[:0]
	var unparsed uint32 // index_price fields whose text is not a number
	p := skipWS(w, 1)
	if p >= len(w) || w[p] == '}' {
		return 0
	}
	next := 0
	for {
		// The key: most likely the field after the previous one, written
		// `"name":` (compact JSON; the pattern starts with the quote).
		fi := -1
		if next < len(keyPats) {
			k := &keyPats[next]
			var hit bool
			if len(w)-p >= 32 {
				hit = k.match32((*[32]byte)(w[p:]))
			} else {
				hit = k.matchShort(w[p:])
			}
			if hit {
				fi = next
				p += k.n
			}
		}
		if fi < 0 {
			if p = skipWS(w, p); p >= len(w) {
				return 0
			}
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
			if p = skipWS(w, q+1); p >= len(w) || w[p] != ':' {
				return 0
			}
			p++
		}
		fi &= 31 // (no bounds checks below: fi < 25)
		bit := uint32(1) << fi
		if r.set&bit != 0 {
			return 0
		}
		r.set |= bit
		next = fi + 1
		if p >= len(w) {
			return 0
		}
		c := w[p]
		if c <= ' ' { // no value starts so: whitespace, or the general path's to word
			if p = skipWS(w, p); p >= len(w) {
				return 0
			}
			c = w[p]
		}
		// The value, written to the field's column.
		col := d.fcols[fi]
		switch {
		case c == 'n':
			if !hasWord(w, p, "null") {
				return 0
			}
			r.null |= bit
			p += 4
		case fieldKinds[fi] == kString && (c == '-' || c-'0' <= 9):
			// A number where the table wants text (Deribit's integer
			// instrument_id) is kept as its text, as the general path
			// does; one beyond float64's range is left to it.
			_, e, ok := parseNumber(w, p)
			if !ok || e >= len(w) || numberByte(w[e]) {
				return 0
			}
			b.str(fieldCols[fi], w[p:e])
			p = e
		case fieldKinds[fi] == kString:
			// Most values end within their first 8 bytes: that word is
			// checked here, without a call.
			var e int
			if c == '"' && len(w)-p >= 9 {
				if t := stringStops(binary.LittleEndian.Uint64(w[p+1:])); t != 0 {
					e = p + 1 + bits.TrailingZeros64(t)/8
					if w[e] != '"' {
						return 0
					}
				} else if e = stringEnd(w, p+9); e < 0 {
					return 0
				}
			} else if e = asciiString(w, p); e < 0 {
				return 0
			}
			// A value of at most 32 bytes is copied with one fixed-size
			// move, without a call, when w and the column have room past
			// it: the bytes past its end lie beyond the column's length,
			// and the next value overwrites them.
			n, end := e-p-1, len(col.data)
			if n > 32 || len(w)-p < 33 || cap(col.data)-end < 32 || end+n >= b.limit {
				b.str(fieldCols[fi], w[p+1:e])
			} else {
				copy32((*[32]byte)(col.data[end:end+32]), (*[32]byte)(w[p+1:]))
				col.data = col.data[:end+n]
				col.offs[row+1] = int32(end + n)
			}
			p = e + 1
		case fieldKinds[fi] == kFloat:
			vc := &d.texts[fi]
			if len(w)-p > textMax && vc.hit(w, p) && !numberByte(w[p+vc.n]) {
				col.f64[row], p = math.Float64frombits(vc.v), p+vc.n
				break
			}
			f, e, ok := parseNumber(w, p)
			if !ok || e >= len(w) || numberByte(w[e]) {
				return 0
			}
			if len(w)-p > textMax {
				vc.set(w, p, e-p, math.Float64bits(f))
			}
			col.f64[row], p = f, e
		case fieldKinds[fi] == kInt:
			vc := &d.texts[fi]
			if len(w)-p > textMax && vc.hit(w, p) && !numberByte(w[p+vc.n]) {
				col.i64[row], p = int64(vc.v), p+vc.n
				break
			}
			i, e, ok := parseInt(w, p)
			if !ok || e >= len(w) || numberByte(w[e]) {
				return 0
			}
			if len(w)-p > textMax {
				vc.set(w, p, e-p, uint64(i))
			}
			col.i64[row], p = i, e
		case fieldKinds[fi] == kBool:
			switch {
			case c == 't' && hasWord(w, p, "true"):
				col.bits[row>>3] |= 1 << (row & 7)
				p += 4
			case c == 'f' && hasWord(w, p, "false"):
				p += 5
			default:
				return 0
			}
		default: // kIndexPrice: a string holding a decimal number
			// The same text as the last one parsed (quotes included) is
			// the same number.
			vc := &d.texts[fi]
			var e int
			if len(w)-p > textMax && vc.hit(w, p) {
				e = p + vc.n - 1
				col.f64[row] = math.Float64frombits(vc.v)
			} else {
				if e = asciiString(w, p); e < 0 {
					return 0
				}
				if f, ok := parseDecimalFast(w[p+1 : e]); ok {
					col.f64[row] = f
					if len(w)-p > textMax {
						vc.set(w, p, e+1-p, math.Float64bits(f))
					}
				} else {
					unparsed |= bit
				}
			}
			b.str(d.colRaw, w[p+1:e])
			p = e + 1
		}
		// Compact JSON: a comma and the next key (the key's match, or
		// else its slow path, checks what follows).
		if p < len(w) && w[p] == ',' {
			p++
			continue
		}
		var more, ok bool
		if p, more, ok = memberEnd(w, p); !ok {
			return 0
		}
		if !more {
			break
		}
	}
	present := r.set &^ r.null
	if present&(1<<nameField) == 0 {
		return 0 // rejected: the general path words the reason
	}
	if nc := &b.cols[fieldCols[nameField]]; nc.offs[row+1] == nc.offs[row] {
		return 0 // empty: rejected as well (a duplicate is found later, InstrumentDecoder.checkNames)
	}
	// Nothing fails from here on.
	for miss := allFields &^ present; miss != 0; miss &= miss - 1 {
		fi := bits.TrailingZeros32(miss)
		b.null(fieldCols[fi&31])
		if fieldKinds[fi&31] == kIndexPrice {
			b.null(d.colRaw)
		}
	}
	for un := unparsed &^ r.null; un != 0; un &= un - 1 {
		b.null(fieldCols[bits.TrailingZeros32(un)&31])
	}
	d.appendTimes(present, b.cols[fieldCols[creationField]].i64[row], b.cols[fieldCols[expirationField]].i64[row])
	d.appendExtra(w)
	b.commit()
	return p
}

// textCache is the text of the last value of one field that the fast path
// parsed (at most textMax bytes: numbers, or index_price's string with its
// quotes) and the value it parsed to. The venue repeats most values from one
// instrument to the next (commissions, tick sizes, expirations, the index
// price), and comparing two words costs less than parsing them again. A value
// depends only on its text, so a hit writes exactly what the parse would: for
// a number the byte after the text must end it, as after a parse.
type textCache struct {
	w0, w1, m0, m1 uint64 // the text as two little-endian words, and the masks of its bytes
	n              int    // text bytes, 0 when none
	v              uint64 // float64 bits or int64
}

// textMax is the longest text a textCache holds.
const textMax = 16

// hit reports whether w[p:] starts with the cached text (len(w)-p >= textMax).
func (c *textCache) hit(w []byte, p int) bool {
	le := binary.LittleEndian
	return c.n != 0 && (le.Uint64(w[p:])^c.w0)&c.m0|(le.Uint64(w[p+8:])^c.w1)&c.m1 == 0
}

// set caches w[p:p+n] (when n <= textMax; len(w)-p >= textMax) and its value.
func (c *textCache) set(w []byte, p, n int, v uint64) {
	if n > textMax || n <= 0 {
		return
	}
	le := binary.LittleEndian
	c.m0, c.m1 = ^uint64(0), ^uint64(0)
	if n < 8 {
		c.m0, c.m1 = 1<<(8*n)-1, 0
	} else if n < 16 {
		c.m1 = 1<<(8*(n-8)) - 1
	}
	c.w0, c.w1 = le.Uint64(w[p:])&c.m0, le.Uint64(w[p+8:])&c.m1
	c.n, c.v = n, v
}

// keyPat is the key of a venue field as compact JSON writes it, `"name":`
// (at most 32 bytes), as four little-endian 8-byte words and the masks of
// the pattern's bytes in them: matching it is four loads and compares,
// without a call or a branch per byte.
type keyPat struct {
	words, masks [4]uint64
	n            int // pattern bytes
}

// keyPats are the patterns of venueFields, by field index.
var keyPats = func() []keyPat {
	out := make([]keyPat, len(venueFields))
	for i, f := range venueFields {
		pat := `"` + f.name + `":`
		if len(pat) > 32 {
			panic("transform: venue field name too long for keyPat: " + f.name)
		}
		var buf, mask [32]byte
		copy(buf[:], pat)
		for j := range pat {
			mask[j] = 0xff
		}
		k := &out[i]
		k.n = len(pat)
		for j := range 4 {
			k.words[j] = binary.LittleEndian.Uint64(buf[8*j:])
			k.masks[j] = binary.LittleEndian.Uint64(mask[8*j:])
		}
	}
	return out
}()

// match32 reports whether w starts with the pattern.
func (k *keyPat) match32(w *[32]byte) bool {
	le := binary.LittleEndian
	return (le.Uint64(w[0:])^k.words[0])&k.masks[0]|(le.Uint64(w[8:])^k.words[1])&k.masks[1]|
		(le.Uint64(w[16:])^k.words[2])&k.masks[2]|(le.Uint64(w[24:])^k.words[3])&k.masks[3] == 0
}

// matchShort is match32 for fewer than 32 bytes left in w.
//
//go:noinline
func (k *keyPat) matchShort(w []byte) bool {
	var b [32]byte
	for j := range 4 {
		binary.LittleEndian.PutUint64(b[8*j:], k.words[j])
	}
	return len(w) >= k.n && string(w[:k.n]) == string(b[:k.n])
}

// fieldKinds and fieldCols are venueFields' kinds and columns, indexed by
// fi&31 without a bounds check; allFields has a bit for every field.
var (
	fieldKinds = func() (out [32]fieldKind) {
		for i, f := range venueFields {
			out[i] = f.kind
		}
		return out
	}()
	fieldCols = func() (out [32]int) {
		for i, f := range venueFields {
			out[i] = f.col
		}
		return out
	}()
	allFields = uint32(1)<<len(venueFields) - 1
)

// copy32 copies 32 bytes with four loads and stores (an array assignment
// calls memmove).
func copy32(dst, src *[32]byte) {
	le := binary.LittleEndian
	a, b, c, d := le.Uint64(src[0:]), le.Uint64(src[8:]), le.Uint64(src[16:]), le.Uint64(src[24:])
	le.PutUint64(dst[0:], a)
	le.PutUint64(dst[8:], b)
	le.PutUint64(dst[16:], c)
	le.PutUint64(dst[24:], d)
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
	for p < len(w) && isWS(w[p]) {
		p++
	}
	return p
}

func isWS(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

func hasWord(w []byte, p int, word string) bool {
	return len(w)-p >= len(word) && string(w[p:p+len(word)]) == word
}

// numberByte reports bytes that may continue a number token: after a number
// the fast path wants a delimiter, else the general path decides.
func numberByte(c byte) bool { return numberBytes[c] }

var numberBytes = func() (t [256]bool) {
	for _, c := range []byte("0123456789.eE+-") {
		t[c] = true
	}
	return t
}()

// asciiString returns the index of the closing quote of the string starting
// at w[p] ('"'), or -1 when it is not there, not plain printable ASCII
// without escapes, or not whole in w.
func asciiString(w []byte, p int) int {
	if w[p] != '"' {
		return -1
	}
	return stringEnd(w, p+1)
}

// stringEnd is asciiString for a string whose bytes before q are known to
// be plain.
func stringEnd(w []byte, q int) int {
	// Eight bytes at a time: the lowest flagged byte of a word is the
	// first quote, backslash, control byte or non-ASCII byte.
	for ; len(w)-q >= 8; q += 8 {
		if t := stringStops(binary.LittleEndian.Uint64(w[q:])); t != 0 {
			q += bits.TrailingZeros64(t) / 8
			if w[q] == '"' {
				return q
			}
			return -1
		}
	}
	for ; q < len(w); q++ {
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

// stringStops flags (high bit of the byte) the quotes, backslashes,
// control and non-ASCII bytes of x, 8 bytes of a string little-endian. The
// lowest flag is exact; flags above it may be false positives, from
// borrows.
func stringStops(x uint64) uint64 {
	xq := x ^ (lsb * '"')
	xb := x ^ (lsb * '\\')
	return (((xq - lsb) &^ xq) | ((xb - lsb) &^ xb) | ((x - lsb*0x20) &^ x) | x) & msb
}

// lsb and msb are the low and high bit of every byte of a word.
const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// pow10 holds the powers of ten that float64 represents exactly.
var pow10 = [32]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// parseNumber parses the JSON number at b[p:] (grammar checked) and returns
// its value and end. With at most 19 significant digits, a mantissa up to
// 2^53 and a decimal exponent within ±22, mantissa and power of ten are
// exact float64s and one IEEE multiplication or division rounds correctly:
// the result is strconv.ParseFloat's (which takes the same fast path). Other
// numbers go to strconv.ParseFloat. ok is false when the grammar does not
// match or the value is outside float64's finite range or underflows
// (values.Underflows).
func parseNumber(b []byte, p int) (f float64, end int, ok bool) {
	start := p
	neg := p < len(b) && b[p] == '-'
	if neg {
		p++
	}
	if p >= len(b) {
		return 0, start, false
	}
	// m holds the significant digits while there are at most 19 of them
	// (nd counts them); a leading "0." and the zeros after it are not
	// significant.
	var m uint64
	nd, exp := 0, 0
	switch c := b[p]; {
	case c == '0':
		p++
	case c-'1' <= 8:
		q := p
		m, p = digits(b, p, 0)
		nd = p - q
	default:
		return 0, start, false
	}
	if p < len(b) && b[p] == '.' {
		p++
		q := p
		if m == 0 {
			for p < len(b) && b[p] == '0' {
				p++
			}
		}
		z := p
		m, p = digits(b, p, m)
		if p == q {
			return 0, start, false
		}
		nd += p - z
		exp = q - p
	}
	if p < len(b) && (b[p]|0x20 == 'e') {
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
	if nd <= 19 && m <= 1<<53 && exp >= -22 && exp <= 22 {
		f = float64(m)
		if exp < 0 {
			f /= pow10[-exp&31]
		} else {
			f *= pow10[exp&31]
		}
		if neg {
			f = -f
		}
		return f, p, true
	}
	f, err := strconv.ParseFloat(values.StringView(b[start:p]), 64)
	if err != nil || math.IsInf(f, 0) || values.Underflows(f, values.StringView(b[start:p])) {
		return 0, start, false
	}
	return f, p, true
}

// digits appends the decimal digits at b[p:] to m (which overflows past
// 19 digits: the caller counts them) and returns it and their end.
func digits(b []byte, p int, m uint64) (uint64, int) {
	for ; p < len(b); p++ {
		d := b[p] - '0'
		if d > 9 {
			break
		}
		m = m*10 + uint64(d)
	}
	return m, p
}

// eightDigits returns the value of x, 8 bytes of text little-endian, when
// they are all decimal digits.
func eightDigits(x uint64) (uint64, bool) {
	if x&0xf0f0f0f0f0f0f0f0|(x+0x0606060606060606)&0xf0f0f0f0f0f0f0f0>>4 != 0x3333333333333333 {
		return 0, false
	}
	x = (x & 0x0f0f0f0f0f0f0f0f) * 2561 >> 8
	x = (x & 0x00ff00ff00ff00ff) * 6553601 >> 16
	return (x & 0x0000ffff0000ffff) * 42949672960001 >> 32, true
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
		var m uint64
		if len(b)-p >= 8 { // epoch milliseconds have 13 digits
			if x, ok := eightDigits(binary.LittleEndian.Uint64(b[p:])); ok {
				m, p = x, p+8
			}
		}
		if m, p = digits(b, p, m); p-q > 18 {
			return 0, start, false
		}
		v = int64(m)
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
