package venuesim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// RawLimit is the largest listing for which Instruments fills Instrument.Raw.
const RawLimit = 100_000

// perpetualExpiryMs is the expiration_timestamp of perpetuals (3000-01-01).
const perpetualExpiryMs int64 = 32503708800000

// Instrument is one instrument exactly as the listing sends it.
//
// Typed fields hold the decoded value. When a fault switch changes a field's
// JSON type (see Faults.WrongTypes) the typed field holds its zero value (nil
// for pointers) and WrongType maps the JSON field name to the JSON text sent.
// Timestamps are as sent (milliseconds, or seconds with
// Faults.TimestampsInSeconds).
type Instrument struct {
	BaseCurrency             string
	BlockTradeCommission     float64
	BlockTradeMinTradeAmount float64
	BlockTradeTickSize       float64
	ContractSize             float64
	CounterCurrency          string
	CreationTimestamp        int64
	Deployed                 bool
	ExpirationTimestamp      int64
	// IndexPrice is the text of index_price when it is a JSON string, nil
	// when it is null or a number (Faults.IndexPriceVariants).
	IndexPrice *string
	// IndexPriceJSON is the exact JSON token sent for index_price, e.g.
	// "95012.35" (with quotes), "", null or 95012.35.
	IndexPriceJSON     json.RawMessage
	InstrumentID       string
	InstrumentName     string // "" when absent (then Missing lists it)
	InstrumentType     string
	IsActive           bool
	Kind               string
	MakerCommission    float64
	MinTradeAmount     float64
	OptionType         *string // "call", "put"; nil (JSON null) for futures
	QuoteCurrency      string
	RFQ                bool
	SettlementCurrency string
	SettlementPeriod   string
	Strike             *float64 // nil (JSON null) for futures

	TakerCommission float64
	TickSize        float64

	// WrongType maps a field sent with an unexpected JSON type to the JSON
	// text sent, e.g. "strike" -> "oops" (quoted). Nil for most instruments.
	WrongType map[string]json.RawMessage
	// Missing lists standard fields absent from the object.
	Missing []string
	// Extra maps unknown extra fields (Faults.ExtraFields) to their JSON.
	Extra map[string]json.RawMessage
	// Raw is the whole object as sent (filled when the listing has at most
	// RawLimit instruments).
	Raw json.RawMessage
}

// Wrong-type variants (Faults.WrongTypes).
const (
	wrongNone int8 = iota - 1
	wrongStrike
	wrongActive
	wrongCreation
	wrongDeployed
)

var indexVariants = [...]string{`""`, `"abc"`, `"1e3"`, `null`, ""} // "" at [4]: the bare number

// ivals are the per-instrument values of one tick, computed once and used by
// both the JSON writer and Instruments so the two cannot disagree.
type ivals struct {
	k                    *kindConf
	id                   uint64
	creation, expiration int64
	deployed, active     bool
	rfq                  bool
	maker, taker, tick   *numAlt
	ipVar                int8 // -1: normal string
	wrong                int8
	noName               bool
	extra                bool
	hint                 int64 // greeks_hint.x, -1 when absent
	tag                  byte
}

func (s *Sim) values(sn *snapshot, d *desc) ivals {
	c := d.cs.c
	k := c.kindOf(d.typ)
	var day int64
	if d.ex != nil {
		day = d.ex.day
	}
	h := hash3(s.seed, uint64(c.idx)<<60|uint64(d.typ)<<56|uint64(day), uint64(d.strike))
	v := ivals{k: k, ipVar: -1, wrong: wrongNone, hint: -1}

	dayIdx := uint64(0)
	if d.ex != nil {
		dayIdx = uint64(day - epoch2020)
	}
	v.id = ((dayIdx*4+uint64(c.idx))*4+uint64(d.typ))*100_000_000 + uint64(d.strike/c.idUnit)

	if d.ex == nil {
		v.creation, v.expiration = c.perpMs, perpetualExpiryMs
	} else {
		v.creation, v.expiration = d.ex.listMs-int64((h>>24)%600_000), d.ex.expMs
	}
	if s.cfg.Faults.TimestampsInSeconds {
		v.creation /= 1000
		v.expiration /= 1000
	}

	v.rfq = d.typ <= typPut && (h>>8)&3 == 0
	v.active = (h>>10)%100 >= 2
	v.deployed = (h>>17)%100 >= 3
	t := sn.tick
	if ha := hash2(h, saltActive); ha&0xffffffff < s.flipThr {
		p := s.flipPeriod
		if ((t+int64((ha>>32)%uint64(p)))/p)&1 == 1 {
			v.active = !v.active
		}
	}
	if hd := hash2(h, saltDeployed); hd&0xffffffff < s.flipThr {
		p := s.flipPeriod
		if ((t+int64((hd>>32)%uint64(p)))/p)&1 == 1 {
			v.deployed = !v.deployed
		}
	}
	v.maker, v.taker, v.tick = &k.maker[0], &k.taker[0], &k.tick[0]
	if hc := hash2(h, saltChange); hc&0xffffffff < s.changeThr {
		p := s.changePeriod
		epoch := (t/4 + int64((hc>>32)%uint64(p))) / p
		pick := hash2(hc, uint64(epoch))
		switch pick % 3 {
		case 0:
			v.maker = &k.maker[(pick>>8)%uint64(len(k.maker))]
		case 1:
			v.taker = &k.taker[(pick>>8)%uint64(len(k.taker))]
		default:
			v.tick = &k.tick[(pick>>8)%uint64(len(k.tick))]
		}
	}

	f := &s.cfg.Faults
	if f.IndexPriceVariants || f.WrongTypes || f.ExtraFields {
		hf := hash2(h, saltFault)
		if f.IndexPriceVariants && hf%1000 < 10 {
			v.ipVar = int8((hf >> 10) % uint64(len(indexVariants)))
		}
		if f.WrongTypes {
			if (hf>>20)%2000 < 10 {
				v.wrong = int8((hf >> 32) % 4)
			}
			v.noName = (hf>>36)%1000 == 0
		}
		if f.ExtraFields {
			v.extra = true
			v.tag = byte('a' + (hf>>46)%6)
			if (hf>>50)%10 == 0 {
				v.hint = int64((hf >> 54) % 100)
			}
		}
	}
	return v
}

func (cs *curSnap) indexToken(v int8) []byte {
	switch {
	case v < 0:
		return cs.tok
	case int(v) == len(indexVariants)-1:
		return cs.numTok
	default:
		return []byte(indexVariants[v])
	}
}

// appendInstrument appends the compact JSON object of one instrument, fields
// in alphabetical order (extra fields last).
func appendInstrument(b []byte, d *desc, v *ivals) []byte {
	k := v.k
	b = append(b, k.seg0...)
	if v.wrong == wrongCreation {
		b = append(b, '"')
		b = appendInt(b, v.creation)
		b = append(b, '"')
	} else {
		b = appendInt(b, v.creation)
	}
	b = append(b, `,"deployed":`...)
	if v.wrong == wrongDeployed {
		if v.deployed {
			b = append(b, '1')
		} else {
			b = append(b, '0')
		}
	} else {
		b = appendBool(b, v.deployed)
	}
	b = append(b, `,"expiration_timestamp":`...)
	b = appendInt(b, v.expiration)
	b = append(b, `,"index_price":`...)
	b = append(b, d.cs.indexToken(v.ipVar)...)
	b = append(b, `,"instrument_id":"`...)
	b = appendUint(b, v.id)
	b = append(b, '"')
	if !v.noName {
		b = append(b, `,"instrument_name":"`...)
		b = appendName(b, d)
		b = append(b, '"')
	}
	b = append(b, k.segType...)
	if v.wrong == wrongActive {
		if v.active {
			b = append(b, `"yes"`...)
		} else {
			b = append(b, `"no"`...)
		}
	} else {
		b = appendBool(b, v.active)
	}
	b = append(b, k.segKind...)
	b = append(b, v.maker.b...)
	b = append(b, k.segMin...)
	switch d.typ {
	case typCall:
		b = append(b, `"call"`...)
	case typPut:
		b = append(b, `"put"`...)
	default:
		b = append(b, "null"...)
	}
	b = append(b, k.segQuote...)
	b = appendBool(b, v.rfq)
	b = append(b, k.segSettle...)
	b = append(b, periodName(d)...)
	b = append(b, `","strike":`...)
	switch {
	case v.wrong == wrongStrike:
		b = append(b, `"oops"`...)
	case d.typ <= typPut:
		b = appendStrike(b, d.strike, '.')
	default:
		b = append(b, "null"...)
	}
	b = append(b, `,"taker_commission":`...)
	b = append(b, v.taker.b...)
	b = append(b, `,"tick_size":`...)
	b = append(b, v.tick.b...)
	if v.extra {
		b = append(b, `,"venue_tag":"`...)
		b = append(b, v.tag, '"')
		if v.hint >= 0 {
			b = append(b, `,"greeks_hint":{"x":`...)
			b = appendInt(b, v.hint)
			b = append(b, '}')
		}
	}
	return append(b, '}')
}

func periodName(d *desc) string {
	if d.ex == nil {
		return periodNames[catPerpetual]
	}
	return periodNames[d.ex.cat]
}

// instrument converts the values of one instrument to an Instrument.
func (v *ivals) instrument(d *desc, withRaw bool) Instrument {
	k := v.k
	c := d.cs.c
	in := Instrument{
		BaseCurrency:             c.name,
		BlockTradeCommission:     k.blockTradeCommission,
		BlockTradeMinTradeAmount: k.blockTradeMin,
		BlockTradeTickSize:       k.blockTradeTick,
		ContractSize:             k.contractSize,
		CounterCurrency:          k.counter,
		CreationTimestamp:        v.creation,
		Deployed:                 v.deployed,
		ExpirationTimestamp:      v.expiration,
		IndexPriceJSON:           json.RawMessage(d.cs.indexToken(v.ipVar)),
		InstrumentID:             string(appendUint(nil, v.id)),
		InstrumentType:           k.instType,
		IsActive:                 v.active,
		Kind:                     k.kind,
		MakerCommission:          v.maker.v,
		MinTradeAmount:           k.minTrade,
		QuoteCurrency:            k.quote,
		RFQ:                      v.rfq,
		SettlementCurrency:       k.settle,
		SettlementPeriod:         periodName(d),
		TakerCommission:          v.taker.v,
		TickSize:                 v.tick.v,
	}
	switch {
	case v.ipVar < 0:
		ip := string(d.cs.numTok)
		in.IndexPrice = &ip
	case v.ipVar <= 2:
		var ip string
		_ = json.Unmarshal(in.IndexPriceJSON, &ip) // constant, valid JSON strings
		in.IndexPrice = &ip
	}
	if v.noName {
		in.Missing = []string{"instrument_name"}
	} else {
		in.InstrumentName = string(appendName(nil, d))
	}
	switch d.typ {
	case typCall, typPut:
		ot := "call"
		if d.typ == typPut {
			ot = "put"
		}
		in.OptionType = &ot
		st := float64(d.strike) / strikeScale
		in.Strike = &st
	}
	wrong := func(field string, js string) {
		in.WrongType = map[string]json.RawMessage{field: json.RawMessage(js)}
	}
	switch v.wrong {
	case wrongStrike:
		in.Strike = nil
		wrong("strike", `"oops"`)
	case wrongActive:
		in.IsActive = false
		if v.active {
			wrong("is_active", `"yes"`)
		} else {
			wrong("is_active", `"no"`)
		}
	case wrongCreation:
		in.CreationTimestamp = 0
		wrong("creation_timestamp", `"`+string(appendInt(nil, v.creation))+`"`)
	case wrongDeployed:
		in.Deployed = false
		if v.deployed {
			wrong("deployed", "1")
		} else {
			wrong("deployed", "0")
		}
	}
	if v.extra {
		in.Extra = map[string]json.RawMessage{"venue_tag": json.RawMessage(`"` + string(v.tag) + `"`)}
		if v.hint >= 0 {
			in.Extra["greeks_hint"] = json.RawMessage(`{"x":` + string(appendInt(nil, v.hint)) + `}`)
		}
	}
	if withRaw {
		in.Raw = appendInstrument(nil, d, v)
	}
	return in
}

// Instruments returns the listing the next get_instruments will serve (no
// filter), in the order served, with the exact values sent, data fault
// variants included. Raw is filled when the listing has at most RawLimit
// instruments. For very large listings prefer WriteInstruments.
func (s *Sim) Instruments() []Instrument {
	sn := s.current()
	out := make([]Instrument, 0, sn.total)
	withRaw := sn.total <= RawLimit
	for i := range sn.curs {
		sn.curs[i].each(kindAll, func(d *desc) bool {
			v := s.values(sn, d)
			out = append(out, v.instrument(d, withRaw))
			return true
		})
	}
	return out
}

// WriteInstruments writes the exact body get_instruments serves for the
// current tick without query filters and without transport faults (data
// fault variants are part of the listing and are included). The body is
// streamed in chunks of about 64 KiB; memory use does not grow with the
// listing size.
func (s *Sim) WriteInstruments(w io.Writer) error {
	if err := s.streamListing(w, s.current(), listFilter{cur: -1, kinds: kindAll}, streamPlan{cutAt: -1, malAt: -1}); err != nil {
		return fmt.Errorf("venuesim: write instruments: %w", err)
	}
	return nil
}

// listFilter selects part of the listing (query parameters).
type listFilter struct {
	cur   int // currency index, -1 for all
	kinds uint8
}

func (f listFilter) count(sn *snapshot) int {
	n := 0
	for i := range sn.curs {
		if f.cur < 0 || f.cur == i {
			n += sn.curs[i].countIn(f.kinds)
		}
	}
	return n
}

// streamPlan describes body faults to inject while streaming.
type streamPlan struct {
	cutAt   int // cut the body in the middle of this instrument and stop; -1: no
	malAt   int // break the JSON right after this instrument; -1: no
	malKind int // 0: stray '}' ; 1: a string cut off in the middle
}

// errCut stops streaming once the planned truncation point is written.
var errCut = errors.New("body cut")

const flushSize = 64 << 10

func (s *Sim) streamListing(w io.Writer, sn *snapshot, f listFilter, p streamPlan) error {
	buf := make([]byte, 0, flushSize+4096)
	var err error
	flush := func() {
		if err == nil && len(buf) > 0 {
			_, err = w.Write(buf)
		}
		buf = buf[:0]
	}
	ord := 0      // instruments emitted
	inGroup := 0  // instruments in the open group
	groups := 0   // groups opened
	open := false // a group is open
	openGroup := func() {
		if groups > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"instruments":[`...)
		groups++
		open, inGroup = true, 0
	}
	closeGroup := func() {
		buf = append(buf, "]}"...)
		open = false
	}
	emit := func(d *desc) bool {
		if !open {
			openGroup()
		}
		if inGroup > 0 {
			buf = append(buf, ',')
		}
		start := len(buf)
		v := s.values(sn, d)
		buf = appendInstrument(buf, d, &v)
		if ord == p.cutAt {
			buf = buf[:start+(len(buf)-start)/2]
			err = errCut
			return false
		}
		if ord == p.malAt {
			buf = breakJSON(buf, start, p.malKind)
		}
		ord++
		inGroup++
		if s.cfg.GroupSize > 0 && inGroup == s.cfg.GroupSize {
			closeGroup()
		}
		if len(buf) >= flushSize {
			flush()
		}
		return err == nil
	}
	buf = append(buf, '[')
	for i := range sn.curs {
		if f.cur >= 0 && f.cur != i {
			continue
		}
		cs := &sn.curs[i]
		if cs.countIn(f.kinds) == 0 {
			continue
		}
		if !cs.each(f.kinds, emit) {
			break
		}
		if s.cfg.GroupSize <= 0 && open {
			closeGroup()
		}
	}
	switch {
	case err == errCut:
		err = nil
		flush()
		return err
	case err != nil:
		return err
	}
	if open {
		closeGroup()
	}
	if ord == 0 && p.malAt >= 0 {
		buf = append(buf, `{"instruments":[}`...)
	}
	if ord == 0 && p.cutAt >= 0 {
		// Nothing to cut into: send only the opening bracket.
		flush()
		return err
	}
	buf = append(buf, ']')
	flush()
	return err
}

// breakJSON makes the object starting at buf[start:] syntactically invalid.
func breakJSON(buf []byte, start, kind int) []byte {
	if kind == 1 {
		const key = `"instrument_name":"`
		if i := bytes.Index(buf[start:], []byte(key)); i >= 0 {
			cut := start + i + len(key) + 5
			return append(buf[:cut], `,"is_active":true}`...)
		}
	}
	return append(buf, '}')
}
