package venuesim

import (
	"sort"
	"time"
)

// Expiry calendar. Every dated instrument expires at 08:00 UTC. The venue lists
// the next D daily expiries, the next W Fridays (weekly), the next M last
// Fridays of a month (monthly) and the next Q last Fridays of March, June,
// September and December (quarterly). A date's settlement period is intrinsic:
// the largest category it belongs to. An expiry is listed at the moment its
// category predecessor K places earlier expires, i.e. as soon as it enters the
// "next K" window, and it stays listed until it expires.

const (
	dayMs       int64 = 86_400_000
	expiryHour        = 8
	expiryMsDay int64 = expiryHour * 3_600_000
	// epoch2020 is 2020-01-01 in days since the Unix epoch (instrument ids).
	epoch2020 int64 = 18262
)

// Settlement categories, ordered so that a larger value wins.
const (
	catDay uint8 = iota + 1
	catWeek
	catMonth
	catQuarter
	catPerpetual
)

var periodNames = [...]string{
	catDay:       "day",
	catWeek:      "week",
	catMonth:     "month",
	catQuarter:   "quarter",
	catPerpetual: "perpetual",
}

// calParams is how many expiries of each category are listed at a time.
type calParams struct{ daily, weekly, monthly, quarterly int }

// expiryDef is one listed expiry date.
type expiryDef struct {
	day    int64 // days since the Unix epoch
	cat    uint8
	listMs int64 // when it was (or will be) listed
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// expiryMs is the expiration instant (08:00 UTC) of a day.
func expiryMs(day int64) int64 { return day*dayMs + expiryMsDay }

// weekday returns 0 for Sunday … 6 for Saturday (1970-01-01 was a Thursday).
func weekday(day int64) int64 { return ((day+4)%7 + 7) % 7 }

func civil(day int64) (int, time.Month) {
	t := time.Unix(day*86400, 0).UTC()
	return t.Year(), t.Month()
}

// lastFriday returns the last Friday of the month (year, month); month may be
// out of range and is normalised as by time.Date.
func lastFriday(year int, month time.Month) int64 {
	last := time.Date(year, month+1, 0, 0, 0, 0, 0, time.UTC).Unix() / 86400
	return last - (weekday(last)-5+7)%7
}

// category returns the intrinsic settlement category of an expiry day.
func category(day int64) uint8 {
	if weekday(day) != 5 {
		return catDay
	}
	y, m := civil(day)
	if lastFriday(y, m) != day {
		return catWeek
	}
	if m%3 == 0 {
		return catQuarter
	}
	return catMonth
}

// activeExpiries lists the expiries listed at nowMs, sorted by date.
func activeExpiries(nowMs int64, p calParams) []expiryDef {
	list := make(map[int64]int64) // day -> listing time
	add := func(day, listMs int64) {
		if old, ok := list[day]; !ok || listMs < old {
			list[day] = listMs
		}
	}
	d0 := floorDiv(nowMs-expiryMsDay, dayMs) + 1 // first day whose expiry is after now
	for i := 0; i < p.daily; i++ {
		d := d0 + int64(i)
		add(d, expiryMs(d-int64(p.daily)))
	}
	f0 := d0 + (5-weekday(d0)+7)%7
	for i := 0; i < p.weekly; i++ {
		f := f0 + 7*int64(i)
		add(f, expiryMs(f-7*int64(p.weekly)))
	}
	y, m := civil(d0)
	if p.monthly > 0 {
		mm := m
		if lastFriday(y, mm) < d0 {
			mm++
		}
		for i := 0; i < p.monthly; i++ {
			add(lastFriday(y, mm+time.Month(i)), expiryMs(lastFriday(y, mm+time.Month(i-p.monthly))))
		}
	}
	if p.quarterly > 0 {
		qm := m + (3-m%3)%3
		if lastFriday(y, qm) < d0 {
			qm += 3
		}
		for i := 0; i < p.quarterly; i++ {
			add(lastFriday(y, qm+time.Month(3*i)), expiryMs(lastFriday(y, qm+time.Month(3*(i-p.quarterly)))))
		}
	}
	out := make([]expiryDef, 0, len(list))
	for day, l := range list {
		if l > nowMs { // cannot happen by construction; be defensive
			continue
		}
		out = append(out, expiryDef{day: day, cat: category(day), listMs: l})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].day < out[j].day })
	return out
}

var monthAbbr = [...]string{"", "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}

// appendDate appends the Deribit date code, e.g. "27NOV26" or "5DEC26".
func appendDate(b []byte, day int64) []byte {
	t := time.Unix(day*86400, 0).UTC()
	b = appendUint(b, uint64(t.Day()))
	b = append(b, monthAbbr[t.Month()]...)
	yy := t.Year() % 100
	return append(b, byte('0'+yy/10), byte('0'+yy%10))
}
