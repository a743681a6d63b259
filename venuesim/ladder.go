package venuesim

// Strike ladders. Strikes are held as int64 "units" of 1e-4 of the quote
// currency so that fractional strikes (SOL 212.5) are exact.

const strikeScale = 10_000 // units per 1.0

// ladder is the set of strikes an expiry may list: multiples of s1 within 10 %
// of the anchor price, of s2 within 30 %, of s3 beyond (all strictly positive).
// The anchor is the index at the expiry's listing tick, so the ladder of an
// expiry never changes; only the window chosen from it follows the index.
type ladder struct {
	anchor     int64
	s1, s2, s3 int64
}

func (l ladder) step(x int64) int64 {
	d := x - l.anchor
	if d < 0 {
		d = -d
	}
	switch {
	case d*10 <= l.anchor:
		return l.s1
	case d*10 <= 3*l.anchor:
		return l.s2
	default:
		return l.s3
	}
}

func (l ladder) valid(x int64) bool { return x > 0 && x%l.step(x) == 0 }

// nextMult is the smallest positive multiple of s strictly greater than x (x >= 0).
func nextMult(x, s int64) int64 { return (x/s + 1) * s }

// prevMult is the largest multiple of s strictly below x (x >= 1); may be 0.
func prevMult(x, s int64) int64 { return ((x - 1) / s) * s }

// next returns the smallest ladder strike greater than x (x >= 0).
func (l ladder) next(x int64) int64 {
	for {
		c := min(nextMult(x, l.s1), nextMult(x, l.s2), nextMult(x, l.s3))
		if l.valid(c) {
			return c
		}
		x = c
	}
}

// prev returns the largest ladder strike below x, or 0 when there is none.
func (l ladder) prev(x int64) int64 {
	for x > 1 {
		c := max(prevMult(x, l.s1), prevMult(x, l.s2), prevMult(x, l.s3))
		if c <= 0 {
			return 0
		}
		if l.valid(c) {
			return c
		}
		x = c
	}
	return 0
}

// window returns the k ladder strikes nearest to spot (ties go up), sorted
// ascending, and the index of the one picked last (the farthest out).
func (l ladder) window(spot int64, k int) (strikes []int64, last int) {
	if k <= 0 {
		return nil, -1
	}
	if spot < 1 {
		spot = 1
	}
	var downs, ups []int64
	u := l.next(spot - 1)
	d := l.prev(spot)
	lastUp := true
	for len(downs)+len(ups) < k {
		if d > 0 && spot-d < u-spot {
			downs = append(downs, d)
			d = l.prev(d)
			lastUp = false
		} else {
			ups = append(ups, u)
			u = l.next(u)
			lastUp = true
		}
	}
	strikes = make([]int64, 0, k)
	for i := len(downs) - 1; i >= 0; i-- {
		strikes = append(strikes, downs[i])
	}
	strikes = append(strikes, ups...)
	if lastUp {
		return strikes, len(strikes) - 1
	}
	return strikes, 0
}

// niceStep returns the largest "nice" strike step (in units) not above
// maxStep: 1, 2, 2.5 or 5 times a power of ten, never finer than 0.001.
func niceStep(maxStep int64) int64 {
	best := int64(10) // 0.001, the finest step offered
	for p := int64(10); p <= 1_000_000_000_000; p *= 10 {
		for _, m := range [...]int64{10, 20, 25, 50} {
			s := m * p / 10
			if s <= maxStep && s > best {
				best = s
			}
		}
	}
	return best
}

// zoneSteps returns (s1, s2, s3) for a near-the-money step: BTC's
// 1000/2500/5000 pattern, kept integral in units.
func zoneSteps(s1 int64) (int64, int64, int64) {
	m := s1
	for m >= 10 && m%10 == 0 {
		m /= 10
	}
	switch m {
	case 25:
		return s1, 2 * s1, 4 * s1
	case 5:
		return s1, 2 * s1, 5 * s1
	default: // 1, 2
		return s1, s1 * 5 / 2, 5 * s1
	}
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// appendStrike appends a strike in units as a JSON number ("212.5") or, with
// sep 'd', as Deribit writes it inside names ("212d5").
func appendStrike(b []byte, units int64, sep byte) []byte {
	b = appendUint(b, uint64(units/strikeScale))
	frac := units % strikeScale
	if frac == 0 {
		return b
	}
	b = append(b, sep)
	digits := [4]byte{}
	for i := 3; i >= 0; i-- {
		digits[i] = byte('0' + frac%10)
		frac /= 10
	}
	n := 4
	for n > 0 && digits[n-1] == '0' {
		n--
	}
	return append(b, digits[:n]...)
}
