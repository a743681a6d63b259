// Package venuesim is a simulated crypto options venue (Deribit-like) serving
// the public HTTP API optlake snapshots: the instrument listing and the
// account endpoints. It stands in for the real venue in `optlake venue-sim`,
// `optlake demo`, tests and benchmarks.
//
// # Determinism
//
// Everything the simulator serves is a pure function of Config (Seed,
// Instruments, Start, TickEvery, fault switches), the current tick and, for
// HTTP faults, the request number. The same configuration advanced by the same
// number of ticks yields byte-identical bodies. No per-instrument state is
// kept: instrument i's static attributes are derived by hashing (seed,
// instrument key), so a listing of millions of instruments costs only the
// strike windows of the current tick (a few bytes per instrument).
//
// # The listing
//
// Three underlyings are listed: BTC and ETH (inverse, "reversed") and SOL
// (linear, USDC-settled, named SOL_USDC-…). Each has a perpetual, dated futures
// on every weekly/monthly/quarterly expiry and calls and puts on every expiry
// (daily, weekly on Fridays, monthly on the last Friday, quarterly on the last
// Friday of Mar/Jun/Sep/Dec, all at 08:00 UTC). The listing always holds
// exactly Config.Instruments instruments (DefaultInstruments when zero): the
// budget is split across currencies (45/35/20 %) and, after the perpetual and
// futures, across expiries (farther categories get more strikes); each
// expiry's strikes are the ones nearest the current index on a ladder anchored
// at the index when the expiry was listed (steps such as 1000/2500/5000 for
// BTC, finer when the listing is large).
//
// Per tick: each index takes a seeded random-walk step; instruments whose
// expiration time has passed are removed and the next expiry is listed (at
// 08:00 UTC); strike windows follow the index (new strikes on one side, far
// wings trimmed on the other so that the count stays exact); a small fixed set
// of instruments flips is_active / deployed periodically (a few flips per
// tick); every fourth tick a few instruments change maker_commission,
// taker_commission or tick_size.
//
// # HTTP and faults
//
// Handler serves get_instruments (streamed, gzip when accepted) and the
// account endpoints (see account.go for their shapes). Every request except
// /healthz is numbered n = 1, 2, … in arrival order (Requests). The transport
// fault of request n is a pure function of (Seed, n): requests
// 1..FailFirst answer 503, the next RateLimitFirst answer 429 with
// Retry-After; after that u = hash(seed, n, "status") ∈ [0,1) answers 500 or
// 503 when u < ErrorRate and 429 when u < ErrorRate+RateLimitRate, and an
// independent v = hash(seed, n, "body") truncates a 200 body when
// v < TruncateRate and breaks its JSON when v < TruncateRate+MalformedRate.
// Latency delays every counted request. A sequential client therefore sees
// the same fault sequence on every run with the same seed.
package venuesim

import (
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultInstruments is the listing size used when Config.Instruments is 0.
const DefaultInstruments = 3000

// largeListing is the size above which more expiries are listed.
const largeListing = 20_000

// Faults switches on misbehaviour. Transport faults (status codes, latency,
// truncation, malformed bodies) are decided per HTTP request; data faults
// (IndexPriceVariants, WrongTypes, TimestampsInSeconds, ExtraFields) are part
// of the listing itself, so they also appear in Instruments and
// WriteInstruments. SchemaDrift affects the account endpoints only.
type Faults struct {
	ErrorRate      float64       // fraction of requests answered 500 or 503
	FailFirst      int           // requests 1..FailFirst are answered 503
	RateLimitRate  float64       // fraction answered 429 with a Retry-After header
	RateLimitFirst int           // the RateLimitFirst requests after FailFirst get 429
	RetryAfter     time.Duration // value sent in Retry-After (whole seconds, min 1)
	Latency        time.Duration // added before every response (not /healthz)
	// TruncateRate is the fraction of 200 bodies cut off mid-way: the
	// response declares a Content-Length larger than what is written, so the
	// client sees an unexpected EOF while reading the body.
	TruncateRate float64
	// MalformedRate is the fraction of 200 bodies that are syntactically
	// broken JSON (a stray '}' or a string cut off in the middle).
	MalformedRate float64
	// IndexPriceVariants: about 1 % of instruments (fixed per instrument) send
	// index_price as "" / "abc" / "1e3" / null / a JSON number.
	IndexPriceVariants bool
	// WrongTypes: about 0.5 % of instruments carry a value of the wrong JSON
	// type ("strike":"oops", "is_active":"yes", "creation_timestamp" as a
	// string, "deployed" as a number); about 0.1 % lack instrument_name.
	WrongTypes bool
	// TimestampsInSeconds sends creation/expiration timestamps in epoch
	// seconds instead of milliseconds.
	TimestampsInSeconds bool
	// ExtraFields adds unknown fields: every instrument gets "venue_tag", about
	// one in ten also "greeks_hint":{"x":n}.
	ExtraFields bool
	// SchemaDrift: from tick 4 on, account_summary and the balances carry a new
	// "portfolio_margin" field; from tick 6 on, account_summary.open_orders
	// and every position's "leverage" arrive as strings instead of numbers.
	SchemaDrift bool
}

// Config configures a Sim. The zero value is a usable default.
type Config struct {
	Seed int64
	// Instruments is the exact listing size at every tick; 0 (or negative)
	// means DefaultInstruments. Above 20,000 more expiries are listed and the
	// strike grid gets finer; sizes of several million work.
	Instruments int
	// GroupSize is the number of instruments per outer element of
	// get_instruments; 0 means one group per currency.
	GroupSize int
	// Start is the simulated time at tick 0 (zero: 2026-11-20T00:00:00Z).
	Start time.Time
	// TickEvery is the simulated time per tick (zero: 1h).
	TickEvery time.Duration
	// AutoTick, if > 0, advances one tick per AutoTick of wall time since New.
	// Due ticks are applied lazily, when the handler serves a request or a
	// reader method (Tick, Now, Instruments, …) is called.
	AutoTick time.Duration
	Faults   Faults
	// RequireHeader ("Name: value"), if set, makes the account endpoints
	// answer 401 unless the request carries that header with that value. The
	// value is never logged or echoed. A setting without ':' can never be
	// satisfied (every account request gets 401).
	RequireHeader string
	// Real makes the simulator behave like a real exchange (authentication,
	// envelopes, pages, error bodies); see RealVenue.
	Real   RealVenue
	Logger *slog.Logger // nil: discard
}

// Sim is a simulated venue. All methods are safe for concurrent use.
type Sim struct {
	cfg       Config
	seed      uint64
	total     int
	start     time.Time
	tickEvery time.Duration
	log       *slog.Logger
	curs      [nCur]*currency

	// Periodic is_active/deployed flips and commission/tick_size changes
	// (see values in instrument.go): an instrument takes part when a 32-bit
	// hash of its key is below the threshold.
	flipThr, changeThr       uint64
	flipPeriod, changePeriod int64

	authName, authValue string
	authBroken          bool
	wallStart           time.Time
	reqs                atomic.Int64
	snap                atomic.Pointer[snapshot]
	real                *realHandler // nil: a plain simulator
	mu                  sync.Mutex   // guards hist and autoApplied; serialises Advance
	hist                [nCur][]float64
	autoApplied         int64
}

// New returns a simulator at tick 0.
func New(cfg Config) *Sim {
	if cfg.Instruments <= 0 {
		cfg.Instruments = DefaultInstruments
	}
	if cfg.GroupSize < 0 {
		cfg.GroupSize = 0
	}
	if cfg.Start.IsZero() {
		cfg.Start = time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	}
	if cfg.TickEvery <= 0 {
		cfg.TickEvery = time.Hour
	}
	s := &Sim{
		cfg:       cfg,
		seed:      mix64(uint64(cfg.Seed) ^ 0x6f70746c616b65),
		total:     cfg.Instruments,
		start:     cfg.Start.UTC(),
		tickEvery: cfg.TickEvery,
		log:       cfg.Logger,
		wallStart: time.Now(),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if cfg.RequireHeader != "" {
		name, value, ok := strings.Cut(cfg.RequireHeader, ":")
		s.authName = strings.TrimSpace(name)
		s.authValue = strings.TrimSpace(value)
		if !ok || s.authName == "" {
			s.authBroken = true
			s.log.Warn("venuesim: RequireHeader is not of the form 'Name: value'; account endpoints will always answer 401")
		}
	}

	// Periodic flips: a set of about 48+N/2000 instruments toggles is_active
	// (and another set deployed) every flipPeriod ticks at a per-instrument
	// phase, which gives about four flips per tick.
	flippy := 48 + s.total/2000
	s.flipPeriod = int64(max(2, flippy/4))
	s.flipThr = fraction32(float64(flippy) / float64(s.total))
	changers := 24 + s.total/5000
	s.changePeriod = int64(max(1, changers/3))
	s.changeThr = fraction32(float64(changers) / float64(s.total))

	s.curs = newCurrencies(s.total)
	budgets := allocate(s.total, []int64{s.curs[0].weight, s.curs[1].weight, s.curs[2].weight})
	for i, c := range s.curs {
		c.budget = budgets[i]
		// Seed-dependent starting index (within ±2 %).
		start := c.index0 * (1 + 0.04*(unit(hash3(s.seed, saltWalk, uint64(i)))-0.5))
		s.hist[i] = []float64{start}
		c.chooseSteps(start, s.startMs())
	}
	s.snap.Store(s.buildSnapshot(0))
	return s
}

func fraction32(f float64) uint64 {
	if f >= 1 {
		return 1 << 32
	}
	return uint64(f * (1 << 32))
}

func (s *Sim) startMs() int64 { return s.start.UnixMilli() }

// timeAt returns the simulated time at tick t.
func (s *Sim) timeAt(t int64) time.Time {
	return s.start.Add(time.Duration(t) * s.tickEvery)
}

// tickOf returns the first tick whose time is at or after ms (>= 0).
func (s *Sim) tickOf(ms int64) int64 {
	d := time.Duration(ms)*time.Millisecond - time.Duration(s.start.UnixNano())
	if d <= 0 {
		return 0
	}
	return int64((d + s.tickEvery - 1) / s.tickEvery)
}

// Advance moves the state forward by ticks (no-op when ticks <= 0).
func (s *Sim) Advance(ticks int) {
	if ticks <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceLocked(int64(ticks))
}

func (s *Sim) advanceLocked(ticks int64) {
	sigmaScale := math.Sqrt(s.tickEvery.Hours() / (365 * 24))
	for i, c := range s.curs {
		h := s.hist[i]
		sigma := c.vol * sigmaScale
		for n := int64(0); n < ticks; n++ {
			t := uint64(len(h))
			r := hash3(s.seed, saltWalk, uint64(i+1)<<40|t)
			// Irwin–Hall approximation of a standard normal: exact and
			// platform independent (no transcendental functions).
			var sum float64
			for k := 0; k < 4; k++ {
				sum += float64((r>>(16*k))&0xffff) / 65536
			}
			z := (sum - 2) * 1.7320508075688772
			next := h[len(h)-1] * (1 + float64(sigma*z))
			if floor := c.index0 * 0.02; next < floor {
				next = floor
			}
			h = append(h, next)
		}
		s.hist[i] = h
	}
	s.snap.Store(s.buildSnapshot(int64(len(s.hist[0]) - 1)))
}

// catchUp applies the ticks due under AutoTick.
func (s *Sim) catchUp() {
	if s.cfg.AutoTick <= 0 {
		return
	}
	due := int64(time.Since(s.wallStart) / s.cfg.AutoTick)
	s.mu.Lock()
	defer s.mu.Unlock()
	if due > s.autoApplied {
		s.advanceLocked(due - s.autoApplied)
		s.autoApplied = due
	}
}

// current returns the snapshot of the current tick.
func (s *Sim) current() *snapshot {
	s.catchUp()
	return s.snap.Load()
}

// Tick returns the current tick (0 after New).
func (s *Sim) Tick() int { return int(s.current().tick) }

// Now returns the simulated time at the current tick.
func (s *Sim) Now() time.Time { return s.timeAt(s.current().tick) }

// Requests returns the number of requests the handler has received, /healthz
// excluded. Request n (1-based, in arrival order) is the n counted here.
func (s *Sim) Requests() int { return int(s.reqs.Load()) }

// NumInstruments returns the size of the current listing (always
// Config.Instruments, or DefaultInstruments).
func (s *Sim) NumInstruments() int { return s.current().total }

// IndexPrice returns the current index of a currency ("BTC", "ETH", "SOL")
// as served in index_price (two decimals), and whether the currency exists.
func (s *Sim) IndexPrice(currency string) (float64, bool) {
	sn := s.current()
	for i := range sn.curs {
		if sn.curs[i].c.name == currency {
			return float64(sn.curs[i].cents) / 100, true
		}
	}
	return 0, false
}

// allocate splits total proportionally to weights by the largest-remainder
// method (integer arithmetic; ties go to the lower index).
func allocate(total int, weights []int64) []int {
	out := make([]int, len(weights))
	var sum int64
	for _, w := range weights {
		sum += w
	}
	if sum <= 0 || total <= 0 {
		return out
	}
	type rem struct {
		r int64
		i int
	}
	rems := make([]rem, len(weights))
	given := 0
	for i, w := range weights {
		q := int64(total) * w
		out[i] = int(q / sum)
		given += out[i]
		rems[i] = rem{q % sum, i}
	}
	// Stable selection of the largest remainders.
	for left := total - given; left > 0; left-- {
		best := -1
		for j := range rems {
			if rems[j].i < 0 {
				continue
			}
			if best < 0 || rems[j].r > rems[best].r {
				best = j
			}
		}
		out[rems[best].i]++
		rems[best].i = -1
	}
	return out
}
