package infer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

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

// wideBodies are the payload shapes of issue 17: data-keyed objects and
// wide flat objects, each of which once took seconds and a gigabyte.
func wideBodies() []struct {
	name string
	body []byte
	pol  Policy
} {
	var b bytes.Buffer
	positions := func(n int) []byte {
		b.Reset()
		b.WriteString(`{"positions":{`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"BTC-%dDEC26-%d-C":{"size":"1.%d","delta":0.%d}`, 10+i%20, 1000+i, i%10, i%97)
		}
		b.WriteString(`}}`)
		return bytes.Clone(b.Bytes())
	}
	flat := func(n int) []byte {
		b.Reset()
		b.WriteByte('{')
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"field_%05d":%d`, i, i)
		}
		b.WriteByte('}')
		return bytes.Clone(b.Bytes())
	}
	currencies := func(n int) []byte {
		b.Reset()
		b.WriteString(`{"balances":{`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"C%c%c":{"available":"%d.5","total":"%d","locked":"0"}`, 'A'+i/26, 'A'+i%26, i, i+1)
		}
		b.WriteString(`}}`)
		return bytes.Clone(b.Bytes())
	}
	forbid := func(ep string) Policy {
		return Policy{Maps: map[string]MapRules{ep: {Forbid: []string{"$"}}}}
	}
	return []struct {
		name string
		body []byte
		pol  Policy
	}{
		{"positions_map_20000", positions(20000), Policy{}},
		{"flat_50000", flat(50000), Policy{}},
		{"flat_5000", flat(5000), Policy{}},
		{"currencies_30", currencies(30), Policy{}},
		// Maps forbidden: the table fills its budget, the rest goes to extra.
		{"flat_50000_no_map", flat(50000), forbid("flat_50000_no_map")},
		{"flat_999_no_map", flat(999), forbid("flat_999_no_map")},
	}
}

// BenchmarkDecodeWide decodes each wide body into a fresh registry (the
// first run of a new endpoint: every column is new), then saves the
// registry: time, allocations and the size of the _schema files.
func BenchmarkDecodeWide(b *testing.B) {
	for _, c := range wideBodies() {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			var cols, rows, schemaBytes int64
			for b.Loop() {
				dir := b.TempDir()
				reg, err := LoadRegistry(dir)
				if err != nil {
					b.Fatal(err)
				}
				if err := reg.SetPolicy(c.pol); err != nil {
					b.Fatal(err)
				}
				cols, rows = 0, 0
				_, _, err = reg.Decode(context.Background(), bytes.NewReader(c.body), testMeta(c.name, t0), Options{},
					func(t *schema.Table, rec arrow.Record) error {
						cols = max(cols, int64(len(t.Columns)))
						rows += rec.NumRows()
						return nil
					})
				if err != nil {
					b.Fatal(err)
				}
				if err := reg.Save(context.Background()); err != nil {
					b.Fatal(err)
				}
				schemaBytes = dirSize(b, filepath.Join(dir, SchemaDir))
			}
			b.ReportMetric(float64(cols), "widest-table-cols")
			b.ReportMetric(float64(rows), "rows")
			b.ReportMetric(float64(schemaBytes), "schema-bytes")
		})
	}
}

func dirSize(b *testing.B, dir string) int64 {
	es, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, e := range es {
		fi, err := e.Info()
		if err != nil {
			b.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}
