package transform

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/optlake/optlake/schema"
)

// TestDecodeListingShapes: a listing of bare instruments, grouped ones or
// both mixed loads the same rows; a group is told by its "instruments" key
// wherever it comes in the object.
func TestDecodeListingShapes(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata", "listings", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	want := decode(t, read("grouped.json"), Options{})
	if want.err != nil || len(want.rows) != 3 || len(want.rejects) != 0 {
		t.Fatalf("grouped fixture: %d rows, %d rejects, err %v", len(want.rows), len(want.rejects), want.err)
	}
	cases := []struct {
		file      string
		rejectIdx []int64 // row_index of the rejects
		rejectWhy []string
	}{
		{file: "grouped.json"},
		{file: "bare.json"},
		{file: "mixed.json"},
		{file: "instruments_last.json"},
		{file: "empty_object.json"},
		{file: "bare_rejects.json", rejectIdx: []int64{1, 3}, rejectWhy: []string{"instrument_name is missing", "strike: expected number, got string"}},
	}
	for _, tc := range cases {
		t.Run(strings.TrimSuffix(tc.file, ".json"), func(t *testing.T) {
			body := read(tc.file)
			for _, opt := range []struct {
				name string
				opt  Options
				one  bool
				slow bool
			}{{name: "default"}, {name: "small batches, byte reader", opt: Options{BatchRows: 2, ReadBuffer: 64}, one: true}, {name: "general path", slow: true}} {
				var got decoded
				if opt.one {
					got = decodeReader(t, iotest.OneByteReader(strings.NewReader(body)), opt.opt)
				} else if opt.slow {
					got = decodeNoFast(t, body)
				} else {
					got = decode(t, body, opt.opt)
				}
				if got.err != nil {
					t.Fatalf("%s: decode: %v", opt.name, got.err)
				}
				if !reflect.DeepEqual(got.rows, want.rows) {
					t.Errorf("%s: rows differ from the grouped listing's:\n got %v\nwant %v", opt.name, names(got.rows), names(want.rows))
				}
				if len(got.rejects) != len(tc.rejectIdx) {
					t.Fatalf("%s: %d rejects %v, want %d", opt.name, len(got.rejects), got.rejects, len(tc.rejectIdx))
				}
				for i, rj := range got.rejects {
					if rj["row_index"] != tc.rejectIdx[i] || !strings.Contains(rj["reason"].(string), tc.rejectWhy[i]) {
						t.Errorf("%s: reject %d = index %v %q, want %d %q", opt.name, i, rj["row_index"], rj["reason"], tc.rejectIdx[i], tc.rejectWhy[i])
					}
				}
			}
		})
	}
}

func names(rows []map[string]any) []any {
	var out []any
	for _, r := range rows {
		out = append(out, r["instrument_name"])
	}
	return out
}

// decodeNoFast decodes with the general path only.
func decodeNoFast(t *testing.T, body string) decoded {
	t.Helper()
	o := decodeWith(t, []byte(body), false, Options{})
	defer o.release()
	out := decoded{stats: o.stats, err: o.err}
	for i, rec := range o.recs {
		if o.tabs[i] == schema.Rejects {
			out.rejects = append(out.rejects, rowsOf(rec)...)
		} else {
			out.rows = append(out.rows, rowsOf(rec)...)
		}
	}
	return out
}
