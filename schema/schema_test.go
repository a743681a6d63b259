package schema

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// The instrument table carries the 25 venue fields of the contract under
// their own names, plus the documented derived and meta columns.
func TestInstrumentsContract(t *testing.T) {
	venue := []string{"base_currency", "block_trade_commission", "block_trade_min_trade_amount",
		"block_trade_tick_size", "contract_size", "counter_currency", "creation_timestamp", "deployed",
		"expiration_timestamp", "index_price", "instrument_id", "instrument_name", "instrument_type",
		"is_active", "kind", "maker_commission", "min_trade_amount", "option_type", "quote_currency",
		"rfq", "settlement_currency", "settlement_period", "strike", "taker_commission", "tick_size"}
	extra := []string{"snapshot_time", "run_id", "source", "index_price_raw", "creation_time", "expiration_time", "extra"}
	if got, want := len(Instruments.Columns), len(venue)+len(extra); got != want {
		t.Fatalf("instruments has %d columns, want %d", got, want)
	}
	for _, n := range append(venue, extra...) {
		if Instruments.Index(n) < 0 {
			t.Errorf("instruments lacks column %q", n)
		}
	}
	seen := map[string]bool{}
	for _, tb := range Tables() {
		for _, c := range tb.Columns {
			if seen[tb.Name+"."+c.Name] {
				t.Errorf("duplicate column %s.%s", tb.Name, c.Name)
			}
			seen[tb.Name+"."+c.Name] = true
		}
		for _, k := range tb.Key {
			i := tb.Index(k)
			if i < 0 {
				t.Errorf("%s: key column %q missing", tb.Name, k)
			} else if tb.Columns[i].Nullable {
				t.Errorf("%s: key column %q is nullable", tb.Name, k)
			}
		}
	}
}

func TestArrowSchema(t *testing.T) {
	s := Instruments.ArrowSchema()
	if s.NumFields() != len(Instruments.Columns) {
		t.Fatalf("fields = %d", s.NumFields())
	}
	f, _ := s.FieldsByName("snapshot_time")
	ts, ok := f[0].Type.(*arrow.TimestampType)
	if !ok || ts.Unit != arrow.Millisecond || ts.TimeZone != "UTC" || f[0].Nullable {
		t.Errorf("snapshot_time = %v nullable=%v", f[0].Type, f[0].Nullable)
	}
	f, _ = s.FieldsByName("is_active")
	if f[0].Type.ID() != arrow.BOOL || !f[0].Nullable {
		t.Errorf("is_active = %v", f[0].Type)
	}
	for i, c := range Instruments.Columns {
		if s.Field(i).Name != c.Name {
			t.Errorf("field %d = %s, want %s", i, s.Field(i).Name, c.Name)
		}
	}
}

// The instruments listing has the venue's 25 fields; every other column is
// meta or derived.
func TestInstrumentFields(t *testing.T) {
	f := Instruments.Fields()
	if len(f) != 25 {
		t.Fatalf("%d venue fields", len(f))
	}
	for _, c := range f {
		if c.Name == "instrument_name" && c.JSON != JSONString || c.Name == "index_price" && c.JSON != JSONDecimalText {
			t.Errorf("%s: JSON kind %d", c.Name, c.JSON)
		}
	}
	for _, tb := range Tables() {
		if tb != Instruments && len(tb.Fields()) != 0 {
			t.Errorf("%s has venue fields", tb.Name)
		}
	}
}
