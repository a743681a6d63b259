package venuesim

import (
	"math"
)

// snapshot is the immutable state of one tick. Handlers load it atomically,
// so a request always sees one consistent tick.
type snapshot struct {
	tick  int64
	nowMs int64
	curs  [nCur]curSnap
	total int
}

// curSnap is one currency at one tick.
type curSnap struct {
	c       *currency
	cents   int64  // index in hundredths
	spot    int64  // index in strike units
	tok     []byte // index_price as normally sent: "95012.35" (quoted)
	numTok  []byte // the same as a bare JSON number (fault variant)
	hasPerp bool
	exps    []expSnap
	nFut    int
	nOpt    int
}

func (cs *curSnap) count() int {
	n := cs.nFut + cs.nOpt
	if cs.hasPerp {
		n++
	}
	return n
}

func (cs *curSnap) index() float64 { return float64(cs.cents) / 100 }

// expSnap is one listed expiry of a currency at one tick.
type expSnap struct {
	day       int64
	cat       uint8
	expMs     int64
	listMs    int64
	date      []byte // "27NOV26"
	hasFuture bool
	nOpts     int
	strikes   []int64 // ascending; every strike has a call and a put except single
	single    int     // index of the strike listed on one side only, or -1
	singleTyp uint8
}

func (s *Sim) buildSnapshot(t int64) *snapshot {
	nowMs := s.timeAt(t).UnixMilli()
	sn := &snapshot{tick: t, nowMs: nowMs}
	for i, c := range s.curs {
		cs := &sn.curs[i]
		cs.c = c
		cs.cents = int64(math.Round(s.hist[i][t] * 100))
		cs.spot = cs.cents * (strikeScale / 100)
		cs.numTok = appendCents(nil, cs.cents)
		cs.tok = append(append([]byte{'"'}, cs.numTok...), '"')
		if c.budget <= 0 {
			continue
		}
		cs.hasPerp = true
		defs := activeExpiries(nowMs, c.cal)
		futs, opts := splitBudget(c.budget, defs)
		cs.exps = make([]expSnap, len(defs))
		for j, d := range defs {
			e := &cs.exps[j]
			*e = expSnap{
				day: d.day, cat: d.cat, expMs: expiryMs(d.day), listMs: d.listMs,
				date: appendDate(nil, d.day), hasFuture: futs[j], nOpts: opts[j], single: -1,
			}
			if e.hasFuture {
				cs.nFut++
			}
			cs.nOpt += e.nOpts
			if e.nOpts == 0 {
				continue
			}
			lt := min(s.tickOf(d.listMs), t)
			anchor := int64(math.Round(s.hist[i][lt]*100)) * (strikeScale / 100)
			l := ladder{anchor: anchor, s1: c.s1, s2: c.s2, s3: c.s3}
			var last int
			e.strikes, last = l.window(cs.spot, (e.nOpts+1)/2)
			if e.nOpts%2 == 1 {
				e.single = last
				e.singleTyp = typPut
				if e.strikes[last] >= cs.spot {
					e.singleTyp = typCall
				}
			}
		}
		sn.total += cs.count()
	}
	return sn
}

// desc identifies one listed instrument within a snapshot.
type desc struct {
	cs     *curSnap
	ex     *expSnap // nil for the perpetual
	typ    uint8
	strike int64 // units; 0 for futures
}

// Kind filter bits.
const (
	kindOption uint8 = 1 << iota
	kindFuture
	kindAll = kindOption | kindFuture
)

// countIn returns how many instruments of currency ci pass the kind filter.
func (cs *curSnap) countIn(kinds uint8) int {
	n := 0
	if kinds&kindFuture != 0 {
		n += cs.nFut
		if cs.hasPerp {
			n++
		}
	}
	if kinds&kindOption != 0 {
		n += cs.nOpt
	}
	return n
}

// each calls fn for every instrument of the currency in listing order
// (perpetual; then per expiry: future, options by strike, call before put)
// until fn returns false. It reports whether the iteration completed.
func (cs *curSnap) each(kinds uint8, fn func(*desc) bool) bool {
	d := desc{cs: cs}
	if kinds&kindFuture != 0 && cs.hasPerp {
		d.typ = typPerp
		if !fn(&d) {
			return false
		}
	}
	for j := range cs.exps {
		e := &cs.exps[j]
		d.ex = e
		if e.hasFuture && kinds&kindFuture != 0 {
			d.typ, d.strike = typFuture, 0
			if !fn(&d) {
				return false
			}
		}
		if kinds&kindOption == 0 {
			continue
		}
		for k, st := range e.strikes {
			d.strike = st
			if k == e.single {
				d.typ = e.singleTyp
				if !fn(&d) {
					return false
				}
				continue
			}
			d.typ = typCall
			if !fn(&d) {
				return false
			}
			d.typ = typPut
			if !fn(&d) {
				return false
			}
		}
	}
	return true
}

// nth returns the instrument at position r (0-based) of the whole listing.
func (sn *snapshot) nth(r int) (desc, bool) {
	if r < 0 || r >= sn.total {
		return desc{}, false
	}
	for i := range sn.curs {
		cs := &sn.curs[i]
		n := cs.count()
		if r >= n {
			r -= n
			continue
		}
		if cs.hasPerp {
			if r == 0 {
				return desc{cs: cs, typ: typPerp}, true
			}
			r--
		}
		for j := range cs.exps {
			e := &cs.exps[j]
			if e.hasFuture {
				if r == 0 {
					return desc{cs: cs, ex: e, typ: typFuture}, true
				}
				r--
			}
			if r >= e.nOpts {
				r -= e.nOpts
				continue
			}
			for k, st := range e.strikes {
				if k == e.single {
					if r == 0 {
						return desc{cs: cs, ex: e, typ: e.singleTyp, strike: st}, true
					}
					r--
					continue
				}
				if r < 2 {
					return desc{cs: cs, ex: e, typ: typCall + uint8(r), strike: st}, true
				}
				r -= 2
			}
		}
	}
	return desc{}, false
}

// find looks a listed instrument up by name.
func (sn *snapshot) find(name string) (desc, bool) {
	var out desc
	found := false
	var buf []byte
	for i := range sn.curs {
		cs := &sn.curs[i]
		p := cs.c.prefix
		if len(name) <= len(p) || name[:len(p)] != p || name[len(p)] != '-' {
			continue
		}
		cs.each(kindAll, func(d *desc) bool {
			buf = appendName(buf[:0], d)
			if string(buf) == name {
				out, found = *d, true
				return false
			}
			return true
		})
		break
	}
	return out, found
}

// appendName appends the Deribit instrument name.
func appendName(b []byte, d *desc) []byte {
	b = append(b, d.cs.c.prefix...)
	if d.typ == typPerp {
		return append(b, "-PERPETUAL"...)
	}
	b = append(b, '-')
	b = append(b, d.ex.date...)
	if d.typ == typFuture {
		return b
	}
	b = append(b, '-')
	b = appendStrike(b, d.strike, 'd')
	if d.typ == typCall {
		return append(b, "-C"...)
	}
	return append(b, "-P"...)
}
