package venuesim

import (
	"time"
)

const nCur = 3

// Instrument kinds/types as used in keys and ids.
const (
	typCall uint8 = iota
	typPut
	typFuture
	typPerp
)

// kindConf holds the per (currency, kind) constants and their pre-rendered
// JSON segments (field order is alphabetical; see appendInstrument).
type kindConf struct {
	blockTradeCommission, blockTradeMin, blockTradeTick, contractSize, minTrade float64
	counter, instType, quote, settle, kind                                      string
	maker, taker, tick                                                          []numAlt // [0] is the base value

	seg0, segType, segKind, segMin, segQuote, segSettle []byte
}

// numAlt is a value with its JSON rendering.
type numAlt struct {
	v float64
	b []byte
}

func alts(vs ...float64) []numAlt {
	out := make([]numAlt, len(vs))
	for i, v := range vs {
		out[i] = numAlt{v, fmtFloat(v)}
	}
	return out
}

// currency is one underlying.
type currency struct {
	idx        int
	name       string // base currency, "BTC"
	prefix     string // instrument name prefix, "BTC" or "SOL_USDC"
	index0     float64
	vol        float64 // annualised, for the walk and account greeks
	weight     int64
	baseStep   int64 // units: the coarsest near-the-money strike step
	perpMs     int64 // perpetual creation time
	cal        calParams
	kinds      [2]kindConf // 0 option, 1 future
	budget     int         // instruments of this currency in the listing
	s1, s2, s3 int64       // strike ladder steps (units)
	idUnit     int64       // gcd of the steps: strike index unit for ids
}

func (c *currency) kindOf(typ uint8) *kindConf {
	if typ == typCall || typ == typPut {
		return &c.kinds[0]
	}
	return &c.kinds[1]
}

func newCurrencies(total int) [nCur]*currency {
	large := total > largeListing
	cal := func(small, big calParams) calParams {
		if large {
			return big
		}
		return small
	}
	ms := func(y int, m time.Month, d int) int64 {
		return time.Date(y, m, d, 8, 0, 0, 0, time.UTC).UnixMilli()
	}
	btc := &currency{
		idx: 0, name: "BTC", prefix: "BTC", index0: 95000, vol: 0.55, weight: 45,
		baseStep: 1000 * strikeScale, perpMs: ms(2018, 8, 14),
		cal: cal(calParams{4, 3, 3, 4}, calParams{30, 12, 9, 8}),
	}
	btc.kinds[0] = kindConf{
		blockTradeCommission: 0.0003, blockTradeMin: 25, blockTradeTick: 0.0001, contractSize: 1, minTrade: 0.1,
		counter: "USD", instType: "reversed", quote: "BTC", settle: "BTC", kind: "option",
		maker: alts(0.0003, 0.0002, 0.0004, 0.0001), taker: alts(0.0003, 0.0004, 0.0005, 0.00035), tick: alts(0.0005, 0.0001, 0.001),
	}
	btc.kinds[1] = kindConf{
		blockTradeCommission: 0.00025, blockTradeMin: 200000, blockTradeTick: 0.01, contractSize: 10, minTrade: 10,
		counter: "USD", instType: "reversed", quote: "USD", settle: "BTC", kind: "future",
		maker: alts(0, -0.0001, 0.0001), taker: alts(0.0005, 0.0004, 0.0006), tick: alts(2.5, 0.5, 5),
	}
	eth := &currency{
		idx: 1, name: "ETH", prefix: "ETH", index0: 3300, vol: 0.70, weight: 35,
		baseStep: 25 * strikeScale, perpMs: ms(2019, 1, 4),
		cal: cal(calParams{4, 3, 3, 4}, calParams{30, 12, 9, 8}),
	}
	eth.kinds[0] = kindConf{
		blockTradeCommission: 0.0003, blockTradeMin: 250, blockTradeTick: 0.0001, contractSize: 1, minTrade: 1,
		counter: "USD", instType: "reversed", quote: "ETH", settle: "ETH", kind: "option",
		maker: alts(0.0003, 0.0002, 0.0004, 0.0001), taker: alts(0.0003, 0.0004, 0.0005, 0.00035), tick: alts(0.0005, 0.0001, 0.001),
	}
	eth.kinds[1] = kindConf{
		blockTradeCommission: 0.00025, blockTradeMin: 100000, blockTradeTick: 0.01, contractSize: 1, minTrade: 1,
		counter: "USD", instType: "reversed", quote: "USD", settle: "ETH", kind: "future",
		maker: alts(0, -0.0001, 0.0001), taker: alts(0.0005, 0.0004, 0.0006), tick: alts(0.05, 0.01, 0.25),
	}
	sol := &currency{
		idx: 2, name: "SOL", prefix: "SOL_USDC", index0: 210, vol: 0.90, weight: 20,
		baseStep: 25 * strikeScale / 10, perpMs: ms(2022, 3, 17),
		cal: cal(calParams{3, 2, 2, 2}, calParams{21, 8, 6, 4}),
	}
	sol.kinds[0] = kindConf{
		blockTradeCommission: 0.0003, blockTradeMin: 250, blockTradeTick: 0.01, contractSize: 1, minTrade: 1,
		counter: "USDC", instType: "linear", quote: "USDC", settle: "USDC", kind: "option",
		maker: alts(0.0003, 0.0002, 0.0004, 0.0001), taker: alts(0.0003, 0.0004, 0.0005, 0.00035), tick: alts(0.01, 0.005, 0.05),
	}
	sol.kinds[1] = kindConf{
		blockTradeCommission: 0.00025, blockTradeMin: 1000, blockTradeTick: 0.01, contractSize: 1, minTrade: 0.1,
		counter: "USDC", instType: "linear", quote: "USDC", settle: "USDC", kind: "future",
		maker: alts(0, -0.0001, 0.0001), taker: alts(0.0005, 0.0004, 0.0006), tick: alts(0.01, 0.005, 0.05),
	}
	out := [nCur]*currency{btc, eth, sol}
	for _, c := range out {
		for k := range c.kinds {
			c.kinds[k].render(c.name)
		}
	}
	return out
}

// render pre-builds the constant JSON segments between variable fields.
func (k *kindConf) render(base string) {
	f := func(v float64) string { return string(fmtFloat(v)) }
	k.seg0 = []byte(`{"base_currency":"` + base +
		`","block_trade_commission":` + f(k.blockTradeCommission) +
		`,"block_trade_min_trade_amount":` + f(k.blockTradeMin) +
		`,"block_trade_tick_size":` + f(k.blockTradeTick) +
		`,"contract_size":` + f(k.contractSize) +
		`,"counter_currency":"` + k.counter +
		`","creation_timestamp":`)
	k.segType = []byte(`,"instrument_type":"` + k.instType + `","is_active":`)
	k.segKind = []byte(`,"kind":"` + k.kind + `","maker_commission":`)
	k.segMin = []byte(`,"min_trade_amount":` + f(k.minTrade) + `,"option_type":`)
	k.segQuote = []byte(`,"quote_currency":"` + k.quote + `","rfq":`)
	k.segSettle = []byte(`,"settlement_currency":"` + k.settle + `","settlement_period":"`)
}

// chooseSteps picks the strike ladder steps so that the widest expiry at
// tick 0 fits between roughly 0.3x and 3x the index: the currency's usual
// step (BTC 1000) for realistic sizes, finer steps for huge listings.
func (c *currency) chooseSteps(index float64, startMs int64) {
	kmax := 0
	if c.budget > 0 {
		defs := activeExpiries(startMs, c.cal)
		_, opts := splitBudget(c.budget, defs)
		for _, n := range opts {
			kmax = max(kmax, (n+1)/2)
		}
	}
	limit := c.baseStep
	if kmax > 0 {
		fit := int64(index * strikeScale / float64(kmax))
		limit = min(limit, fit)
	}
	c.s1, c.s2, c.s3 = zoneSteps(niceStep(limit))
	c.idUnit = gcd(gcd(c.s1, c.s2), c.s3)
}

// optionWeight is the share of the option budget an expiry of a category gets.
var optionWeight = [...]int64{catDay: 2, catWeek: 3, catMonth: 4, catQuarter: 5}

// splitBudget divides a currency's budget: one perpetual, one future per
// non-daily expiry (nearest first, while the budget lasts), options for the
// rest spread over the expiries by category weight. It returns which expiries
// have a future and the option count per expiry.
func splitBudget(budget int, defs []expiryDef) (futures []bool, opts []int) {
	futures = make([]bool, len(defs))
	rem := budget - 1 // the perpetual
	for i, d := range defs {
		if rem <= 0 {
			break
		}
		if d.cat >= catWeek {
			futures[i] = true
			rem--
		}
	}
	if rem < 0 {
		rem = 0
	}
	w := make([]int64, len(defs))
	for i, d := range defs {
		w[i] = optionWeight[d.cat]
	}
	return futures, allocate(rem, w)
}
