package infer

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"

	"github.com/optlake/optlake/schema"
)

// BenchmarkDecodePositions decodes a positions_with_mints body of 2,000
// positions (the captured simulator payload repeated), about 2 MB.
func BenchmarkDecodePositions(b *testing.B) {
	raw, err := os.ReadFile("testdata/sim_positions_with_mints/input.json")
	if err != nil {
		b.Fatal(err)
	}
	var ps []json.RawMessage
	if err := json.Unmarshal(raw, &ps); err != nil {
		b.Fatal(err)
	}
	var all []json.RawMessage
	for len(all) < 2000 {
		all = append(all, ps...)
	}
	body, err := json.Marshal(all[:2000])
	if err != nil {
		b.Fatal(err)
	}
	reg := NewRegistry()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		_, _, err := reg.Decode(context.Background(), bytes.NewReader(body), testMeta("positions_with_mints", t0), Options{},
			func(*schema.Table, arrow.Record) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
	}
}
