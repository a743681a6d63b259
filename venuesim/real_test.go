package venuesim

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"
)

// Paging a listing builds it once per tick: the pages after the first come
// from the cached listing (the simulator counts one request of its own), and
// together they are the grouped listing's instruments, in order.
func TestPagedListingBuiltOnce(t *testing.T) {
	grouped := New(Config{Seed: 3, Instruments: 950})
	var want []json.RawMessage
	for _, g := range listing(t, get(t, serve(t, grouped).URL+PathInstruments).body) {
		want = append(want, g...)
	}
	for _, tc := range []struct {
		name string
		rv   RealVenue
	}{{"link pages", RealVenue{Paginate: PageLink, PageSize: 100}}, {"bare, one page", RealVenue{Bare: true}}} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Config{Seed: 3, Instruments: 950, Real: tc.rv})
			url := serve(t, s).URL + PathInstruments
			var got []json.RawMessage
			pages := 1
			if tc.rv.Paginate != "" {
				pages = 10
			}
			for p := 1; p <= pages; p++ {
				u := url
				if tc.rv.Paginate != "" {
					u += "?page=" + strconv.Itoa(p)
				}
				var chunk []json.RawMessage
				if err := json.Unmarshal(get(t, u).body, &chunk); err != nil {
					t.Fatalf("page %d: %v", p, err)
				}
				got = append(got, chunk...)
			}
			if len(got) != len(want) {
				t.Fatalf("%d instruments over the pages, want %d", len(got), len(want))
			}
			for i := range want {
				var a, b bytes.Buffer
				json.Compact(&a, got[i])
				json.Compact(&b, want[i])
				if a.String() != b.String() {
					t.Fatalf("instrument %d differs:\n got %s\nwant %s", i, a.String(), b.String())
				}
			}
			if s.Requests() != 1 {
				t.Errorf("the simulator built the listing %d times for %d pages, want once", s.Requests(), pages)
			}
		})
	}
}
