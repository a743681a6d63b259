package venuesim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// Account payloads. Shapes (all deterministic for (seed, account, tick)):
//
//	get_account_balance       object: one currency's balance (?currency=, default BTC)
//	get_all_account_balances  array of balance objects (BTC, ETH, SOL, USDC)
//	get_account_collateral    object with a "collaterals" array and a "margin" object
//	get_account_summary       object with nested "greeks", "margin", "pnl", "fee_tier"
//	get_exercisable_options   {"exercisable":[…]} (in-the-money long options; may be empty)
//	get_position              one position object (?instrument_name= required)
//	get_positions             {"positions":[…]} (?currency=, ?kind= filters; may be empty)
//	get_positions_with_mints  array of positions, each with a "mints" array
//
// Amounts are decimal strings as a venue sends them; greeks are JSON numbers.
// Positions have nested "greeks" and "margin" objects and, for some option
// positions, a "legs" array. Holdings change every six ticks.

// member is one key of an ordered JSON object.
type member struct {
	k string
	v any
}

// object is a JSON object that keeps its key order.
type object []member

// MarshalJSON implements json.Marshaler.
func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(m.k)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", m.k, err)
		}
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(m.v)
		if err != nil {
			return nil, fmt.Errorf("value of %q: %w", m.k, err)
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// num is a JSON number literal.
func num(v float64, prec int) json.Number { return json.Number(dec(v, prec)) }

type greeks struct{ delta, gamma, vega, theta, rho float64 }

func (g greeks) scaled(f float64) greeks {
	return greeks{g.delta * f, g.gamma * f, g.vega * f, g.theta * f, g.rho * f}
}

func (g *greeks) add(o greeks) {
	g.delta += o.delta
	g.gamma += o.gamma
	g.vega += o.vega
	g.theta += o.theta
	g.rho += o.rho
}

func (g greeks) json() object {
	return object{
		{"delta", num(g.delta, 5)}, {"gamma", num(g.gamma, 7)}, {"rho", num(g.rho, 5)},
		{"theta", num(g.theta, 5)}, {"vega", num(g.vega, 5)},
	}
}

func normCDF(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

func normPDF(x float64) float64 { return math.Exp(-x*x/2) / math.Sqrt(2*math.Pi) }

// price returns the mark price of one unit of the instrument (in the quote
// currency of the listing: base currency for inverse options, USDC for
// linear ones, USD for futures) and its greeks per unit.
func price(sn *snapshot, d *desc) (float64, greeks) {
	c := d.cs.c
	spot := d.cs.index()
	if d.typ == typPerp {
		return spot * 1.0002, greeks{delta: 1}
	}
	years := float64(d.ex.expMs-sn.nowMs) / (365.25 * float64(dayMs))
	years = max(years, 1.0/(365*24*12))
	if d.typ == typFuture {
		return spot * (1 + 0.06*years), greeks{delta: 1}
	}
	k := float64(d.strike) / strikeScale
	m := math.Log(k / spot)
	vol := c.vol * (1 + 0.4*m*m)
	sq := vol * math.Sqrt(years)
	d1 := (-m + sq*sq/2) / sq
	d2 := d1 - sq
	var p float64
	g := greeks{
		gamma: normPDF(d1) / (spot * sq),
		vega:  spot * normPDF(d1) * math.Sqrt(years) / 100,
		theta: -spot * normPDF(d1) * vol / (2 * math.Sqrt(years)) / 365,
	}
	if d.typ == typCall {
		p = spot*normCDF(d1) - k*normCDF(d2)
		g.delta = normCDF(d1)
		g.rho = k * years * normCDF(d2) / 100
	} else {
		p = k*normCDF(-d2) - spot*normCDF(-d1)
		g.delta = normCDF(d1) - 1
		g.rho = -k * years * normCDF(-d2) / 100
	}
	if !c.linear() {
		p /= spot
	}
	return math.Max(p, 0), g
}

func (c *currency) linear() bool { return c.kinds[0].instType == "linear" }

// position is one holding of an account.
type position struct {
	d        desc
	name     string
	size     float64 // > 0; contracts for options, USD for inverse futures
	sign     float64 // +1 buy, -1 sell
	avg      float64
	mark     float64
	g        greeks // position greeks
	im, mm   float64
	lev      int
	openedMs int64
	legs     []string
	h        uint64
}

func (p *position) direction() string {
	if p.sign > 0 {
		return "buy"
	}
	return "sell"
}

// settleCurrency is the currency a position's P&L and margin are held in.
func (p *position) settleCurrency() string { return p.d.cs.c.kindOf(p.d.typ).settle }

// pnl is the unrealised P&L in the settlement currency.
func (p *position) pnl() float64 {
	v := (p.mark - p.avg) * p.size * p.sign
	if p.d.typ >= typFuture && !p.d.cs.c.linear() {
		// inverse futures: size is USD, P&L in base currency
		return p.size * p.sign * (1/p.avg - 1/p.mark)
	}
	return v
}

func (s *Sim) accountKey(account string) uint64 {
	return hash2(s.seed^saltAccount, hashString(account))
}

// positions returns the account's holdings at the snapshot's tick.
func (s *Sim) positions(sn *snapshot, account string) []position {
	if strings.HasPrefix(account, "empty") || sn.total == 0 {
		return nil
	}
	a := s.accountKey(account)
	epoch := uint64(sn.tick / 6)
	ph := hash3(a, saltPositions, epoch)
	var n int
	switch {
	case account == "main":
		n = 3 + int(ph%5)
	case ph%5 == 0:
		n = 0
	default:
		n = 1 + int(ph%7)
	}
	var out []position
	seen := map[string]bool{}
	for j := uint64(0); len(out) < n && j < uint64(4*n); j++ {
		hj := hash3(a, epoch, j+1)
		r := int(hj % uint64(sn.total))
		d, _ := sn.nth(r)
		name := string(appendName(nil, &d))
		if seen[name] {
			continue
		}
		seen[name] = true
		p := position{d: d, name: name, h: hj, sign: 1}
		if (hj>>20)&1 == 1 {
			p.sign = -1
		}
		mark, g := price(sn, &d)
		p.mark = mark
		c := d.cs.c
		switch {
		case d.typ <= typPut:
			p.size = float64(1+(hj>>8)%250) / 10
			p.lev = 1
		case c.linear():
			p.size = float64(1+(hj>>8)%500) / 10
			p.lev = []int{5, 10, 20, 50}[(hj>>28)%4]
		default:
			p.size = float64(10 * (1 + (hj>>8)%5000))
			p.lev = []int{5, 10, 20, 50}[(hj>>28)%4]
		}
		p.avg = mark * (1 + float64(int64((hj>>40)%200)-100)/1000)
		if p.avg <= 0 {
			p.avg = mark
		}
		units := p.size
		if d.typ >= typFuture && !c.linear() {
			units = p.size / d.cs.index() // USD notional in base units
		}
		p.g = g.scaled(units * p.sign)
		switch {
		case d.typ >= typFuture:
			p.im = units / float64(p.lev)
			if c.linear() {
				p.im *= d.cs.index()
			}
		case p.sign < 0:
			p.im = units * (mark + 0.15*spotIn(c, d.cs.index()))
		default:
			p.im = 0
		}
		p.mm = p.im * 0.75
		p.openedMs = sn.nowMs - int64((hj>>32)%uint64(7*dayMs))
		if d.typ <= typPut && (hj>>24)%4 == 0 {
			other, _ := sn.nth((r + 1) % sn.total)
			p.legs = []string{name, string(appendName(nil, &other))}
		}
		out = append(out, p)
	}
	return out
}

// spotIn is one unit of underlying expressed in the option quote currency.
func spotIn(c *currency, spot float64) float64 {
	if c.linear() {
		return spot
	}
	return 1
}

func (s *Sim) positionJSON(sn *snapshot, p *position) object {
	drift := s.cfg.Faults.SchemaDrift && sn.tick > 5
	var lev any = p.lev
	if drift {
		lev = fmt.Sprint(p.lev)
	}
	prec := 4
	if p.d.typ >= typFuture {
		prec = 2
	}
	var liq any
	if p.d.typ >= typFuture && p.size > 0 {
		liq = dec(p.avg*(1-p.sign/float64(p.lev)), 2)
	}
	o := object{
		{"average_price", dec(p.avg, prec)},
		{"creation_timestamp", p.openedMs},
		{"direction", p.direction()},
		{"estimated_liquidation_price", liq},
		{"floating_profit_loss", dec(p.pnl(), 8)},
		{"greeks", p.g.json()},
		{"index_price", dec(p.d.cs.index(), 2)},
		{"instrument_name", p.name},
		{"kind", p.d.cs.c.kindOf(p.d.typ).kind},
		{"leverage", lev},
	}
	if p.legs != nil {
		o = append(o, member{"legs", []object{
			{{"direction", p.direction()}, {"instrument_name", p.legs[0]}, {"ratio", 1}},
			{{"direction", opposite(p.direction())}, {"instrument_name", p.legs[1]}, {"ratio", 1}},
		}})
	}
	size := dec(p.size*p.sign, 1)
	sizeCur := size
	if p.d.typ >= typFuture && !p.d.cs.c.linear() {
		sizeCur = dec(p.size*p.sign/p.d.cs.index(), 8)
	}
	return append(o,
		member{"margin", object{{"initial", dec(p.im, 8)}, {"maintenance", dec(p.mm, 8)}}},
		member{"mark_price", dec(p.mark, prec)},
		member{"realized_profit_loss", dec(p.pnl()*0.1, 8)},
		member{"settlement_currency", p.settleCurrency()},
		member{"settlement_price", dec(p.avg*(1+0.01*p.sign), prec)},
		member{"size", size},
		member{"size_currency", sizeCur},
		member{"total_profit_loss", dec(p.pnl()*1.1, 8)},
	)
}

func opposite(dir string) string {
	if dir == "buy" {
		return "sell"
	}
	return "buy"
}

// balanceCurrencies are the wallet currencies.
var balanceCurrencies = [...]string{"BTC", "ETH", "SOL", "USDC"}

func (s *Sim) balance(sn *snapshot, account, cur string, ps []position) object {
	a := s.accountKey(account)
	ci := 0
	for i, c := range balanceCurrencies {
		if c == cur {
			ci = i
		}
	}
	base := [...]float64{0.5, 5, 50, 1000}[ci]
	span := [...]float64{10, 150, 5000, 250000}[ci]
	prec := 8
	if cur == "USDC" {
		prec = 2
	}
	amount := 0.0
	if !strings.HasPrefix(account, "empty") {
		amount = base + span*unit(hash2(a, uint64(ci)))
		amount *= 1 + 0.002*(unit(hash3(a, uint64(ci), uint64(sn.tick)))-0.5)
	}
	var im, mm, upl float64
	for i := range ps {
		if ps[i].settleCurrency() == cur {
			im += ps[i].im
			mm += ps[i].mm
			upl += ps[i].pnl()
		}
	}
	equity := amount + upl
	o := object{
		{"available_funds", dec(equity-im, prec)},
		{"available_withdrawal_funds", dec(math.Max(0, amount-im), prec)},
		{"balance", dec(amount, prec)},
		{"currency", cur},
		{"equity", dec(equity, prec)},
		{"initial_margin", dec(im, prec)},
		{"locked_balance", dec(0, prec)},
		{"maintenance_margin", dec(mm, prec)},
		{"margin_balance", dec(equity, prec)},
	}
	if s.cfg.Faults.SchemaDrift && sn.tick > 3 {
		o = append(o, member{"portfolio_margin", dec(im*0.8, prec)})
	}
	return append(o,
		member{"session_rpl", dec(upl*0.1, prec)},
		member{"session_upl", dec(upl, prec)},
		member{"total_pl", dec(upl*1.1, prec)},
		member{"updated_at", sn.nowMs},
	)
}

// usd converts an amount of a wallet currency to USD at the snapshot index.
func usd(sn *snapshot, cur string, v float64) float64 {
	for i := range sn.curs {
		if sn.curs[i].c.name == cur {
			return v * sn.curs[i].index()
		}
	}
	return v // USDC
}

func parseFloatField(o object, key string) float64 {
	for _, m := range o {
		if m.k == key {
			if s, ok := m.v.(string); ok {
				f, _ := strconv.ParseFloat(s, 64) // our own decimal strings
				return f
			}
		}
	}
	return 0
}

// accountPayload builds the value served by an account endpoint. A returned
// error is a client error (400) whose message is safe to send.
func (s *Sim) accountPayload(r *http.Request, sn *snapshot) (any, error) {
	account := strings.TrimSpace(r.Header.Get(AccountHeader))
	if account == "" {
		account = "main"
	}
	q := r.URL.Query()
	ps := s.positions(sn, account)
	switch r.URL.Path {
	case PathAccountBalance:
		cur := strings.ToUpper(q.Get("currency"))
		if cur == "" {
			cur = "BTC"
		}
		for _, c := range balanceCurrencies {
			if c == cur {
				return s.balance(sn, account, cur, ps), nil
			}
		}
		return nil, errorf("unknown currency %q", q.Get("currency"))
	case PathAllAccountBalances:
		out := make([]object, 0, len(balanceCurrencies))
		for _, c := range balanceCurrencies {
			out = append(out, s.balance(sn, account, c, ps))
		}
		return out, nil
	case PathAccountCollateral:
		return s.collateral(sn, account, ps), nil
	case PathAccountSummary:
		return s.summary(sn, account, ps), nil
	case PathExercisableOptions:
		ex := []object{}
		for i := range ps {
			p := &ps[i]
			if p.d.typ > typPut || p.sign < 0 {
				continue
			}
			k := float64(p.d.strike) / strikeScale
			intrinsic := p.d.cs.index() - k
			if p.d.typ == typPut {
				intrinsic = -intrinsic
			}
			if intrinsic <= 0 {
				continue
			}
			if !p.d.cs.c.linear() {
				intrinsic /= p.d.cs.index() // in the settlement currency
			}
			ex = append(ex, object{
				{"amount", dec(p.size, 1)},
				{"expiration_timestamp", p.d.ex.expMs},
				{"instrument_name", p.name},
				{"intrinsic_value", dec(intrinsic*p.size, 8)},
				{"option_type", map[uint8]string{typCall: "call", typPut: "put"}[p.d.typ]},
				{"settlement_currency", p.settleCurrency()},
				{"strike", json.Number(appendStrike(nil, p.d.strike, '.'))},
			})
		}
		return object{{"exercisable", ex}}, nil
	case PathPosition:
		name := q.Get("instrument_name")
		if name == "" {
			return nil, errorf("missing required parameter instrument_name")
		}
		for i := range ps {
			if ps[i].name == name {
				return s.positionJSON(sn, &ps[i]), nil
			}
		}
		d, ok := sn.find(name)
		if !ok {
			return nil, errorf("instrument not found: %q", name)
		}
		mark, _ := price(sn, &d)
		p := position{d: d, name: name, sign: 1, mark: mark, avg: mark, lev: 1, openedMs: sn.nowMs}
		o := s.positionJSON(sn, &p)
		for i := range o {
			if o[i].k == "direction" {
				o[i].v = "zero"
			}
		}
		return o, nil
	case PathPositions:
		cur := strings.ToUpper(q.Get("currency"))
		kind := strings.ToLower(q.Get("kind"))
		out := []object{}
		for i := range ps {
			p := &ps[i]
			if cur != "" && cur != "ANY" && p.d.cs.c.name != cur {
				continue
			}
			if kind != "" && kind != "any" && p.d.cs.c.kindOf(p.d.typ).kind != kind {
				continue
			}
			out = append(out, s.positionJSON(sn, p))
		}
		return object{{"positions", out}}, nil
	case PathPositionsWithMints:
		out := []object{}
		for i := range ps {
			p := &ps[i]
			o := s.positionJSON(sn, p)
			mints := []object{}
			for m := uint64(0); m < (p.h>>44)%4; m++ {
				hm := hash2(p.h, m)
				mints = append(mints, object{
					{"amount", dec(p.size/float64(1+m), 1)},
					{"mint_id", fmt.Sprintf("mint-%012x", hm>>16)},
					{"minted_at", p.openedMs + int64(m)*3_600_000},
					{"tx_hash", fmt.Sprintf("0x%016x%016x", hm, mix64(hm))},
				})
			}
			out = append(out, append(o, member{"mints", mints}))
		}
		return out, nil
	}
	return nil, errorf("unknown endpoint")
}

func (s *Sim) collateral(sn *snapshot, account string, ps []position) object {
	var cols []object
	var total, im, mm float64
	for _, cur := range balanceCurrencies {
		b := s.balance(sn, account, cur, ps)
		amount := parseFloatField(b, "balance")
		px := usd(sn, cur, 1)
		haircut := map[string]float64{"BTC": 0.05, "ETH": 0.07, "SOL": 0.15, "USDC": 0}[cur]
		value := amount * px * (1 - haircut)
		total += value
		im += usd(sn, cur, parseFloatField(b, "initial_margin"))
		mm += usd(sn, cur, parseFloatField(b, "maintenance_margin"))
		cols = append(cols, object{
			{"amount", parseFloatString(b, "balance")},
			{"asset", cur},
			{"haircut", dec(haircut, 2)},
			{"index_price", dec(px, 2)},
			{"value", dec(value, 2)},
		})
	}
	return object{
		{"account", account},
		{"collateral_currency", "USD"},
		{"collaterals", cols},
		{"margin", object{{"initial", dec(im, 2)}, {"maintenance", dec(mm, 2)}}},
		{"total_collateral_value", dec(total, 2)},
		{"updated_at", sn.nowMs},
	}
}

func parseFloatString(o object, key string) string {
	for _, m := range o {
		if m.k == key {
			if s, ok := m.v.(string); ok {
				return s
			}
		}
	}
	return ""
}

func (s *Sim) summary(sn *snapshot, account string, ps []position) object {
	var equity, im, mm, upl float64
	for _, cur := range balanceCurrencies {
		b := s.balance(sn, account, cur, ps)
		equity += usd(sn, cur, parseFloatField(b, "equity"))
		im += usd(sn, cur, parseFloatField(b, "initial_margin"))
		mm += usd(sn, cur, parseFloatField(b, "maintenance_margin"))
		upl += usd(sn, cur, parseFloatField(b, "session_upl"))
	}
	var g greeks
	for i := range ps {
		g.add(ps[i].g)
	}
	a := s.accountKey(account)
	openOrders := int(hash3(a, saltAccount, uint64(sn.tick)) % 12)
	if strings.HasPrefix(account, "empty") {
		openOrders = 0
	}
	tier := int(a % 4)
	var oo any = openOrders
	if s.cfg.Faults.SchemaDrift && sn.tick > 5 {
		oo = fmt.Sprint(openOrders)
	}
	o := object{
		{"account", account},
		{"currency", "USD"},
		{"equity", dec(equity, 2)},
		{"fee_tier", object{
			{"maker", num([...]float64{0.0003, 0.00025, 0.0002, 0.0001}[tier], 5)},
			{"name", fmt.Sprintf("tier_%d", tier+1)},
			{"taker", num([...]float64{0.0005, 0.00045, 0.0004, 0.0003}[tier], 5)},
		}},
		{"greeks", g.json()},
		{"margin", object{{"initial", dec(im, 2)}, {"maintenance", dec(mm, 2)}, {"mode", "cross"}}},
		{"open_orders", oo},
		{"pnl", object{{"realized", dec(upl*0.1, 2)}, {"unrealized", dec(upl, 2)}}},
	}
	if s.cfg.Faults.SchemaDrift && sn.tick > 3 {
		o = append(o, member{"portfolio_margin", dec(im*0.8, 2)})
	}
	return append(o,
		member{"positions_count", len(ps)},
		member{"updated_at", sn.nowMs},
	)
}
