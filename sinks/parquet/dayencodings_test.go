package parquet

import (
	"testing"

	"github.com/apache/arrow-go/v18/parquet"

	"github.com/optlake/optlake/schema"
)

// A replayed day's instruments file keeps its sort key's names in
// dictionary pages (history finds an instrument's rows by the index
// runs); its instrument_events file and the per-snapshot files keep
// DELTA_BYTE_ARRAY names, and every other column its encoding.
func TestDayEncodingsDictionaryForTheSortedNames(t *testing.T) {
	props := func(opts []parquet.WriterProperty) *parquet.WriterProperties {
		return parquet.NewWriterProperties(opts...)
	}
	snap := props(Encodings(schema.Instruments))
	day := props(DayEncodings(schema.Instruments, schema.SortKey(schema.Instruments.Name)))
	if !day.DictionaryEnabledFor("instrument_name") || snap.DictionaryEnabledFor("instrument_name") {
		t.Errorf("instrument_name: a day's dictionary %v, a snapshot's %v", day.DictionaryEnabledFor("instrument_name"), snap.DictionaryEnabledFor("instrument_name"))
	}
	for _, c := range schema.Instruments.Columns {
		if c.Name == "instrument_name" {
			continue
		}
		if day.DictionaryEnabledFor(c.Name) != snap.DictionaryEnabledFor(c.Name) || day.EncodingFor(c.Name) != snap.EncodingFor(c.Name) {
			t.Errorf("%s: a day's encoding differs from a snapshot's", c.Name)
		}
	}
	ev := props(DayEncodings(schema.InstrumentEvents, schema.SortKey(schema.InstrumentEvents.Name)))
	if ev.DictionaryEnabledFor("instrument_name") || ev.EncodingFor("instrument_name") != parquet.Encodings.DeltaByteArray {
		t.Error("instrument_events: a day's instrument_name is not DELTA_BYTE_ARRAY")
	}
}
