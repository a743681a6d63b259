package paginate

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"testing"
)

func TestNextLink(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{[]string{`<https://v.example/x?page=2>; rel="next"`}, "https://v.example/x?page=2"},
		{[]string{`</x?page=1>; rel="first", </x?page=3>; rel="next last"`}, "/x?page=3"},
		{[]string{`</a,b>; rel="prev"`, `</c>; REL=next`}, "/c"},
		{[]string{`</x>; title="a, rel=next"; rel="prev"`}, ""},
		{nil, ""},
	} {
		if got := NextLink(tc.in); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestPaginators(t *testing.T) {
	page := &url.URL{Scheme: "https", Host: "v.example", Path: "/x"}
	raw := func(s string) map[string]json.RawMessage {
		return map[string]json.RawMessage{"next": json.RawMessage(s), "total": json.RawMessage(s)}
	}
	// cursor: the next request carries it; the same cursor twice is a loop.
	p := New(Spec{Type: Cursor, CursorPath: "next", CursorParam: "c", LimitParam: "n", Limit: 5}, url.Values{"q": {"1"}})
	if f := p.First(); f.Params.Encode() != "n=5&q=1" {
		t.Errorf("first %v", f.Params)
	}
	n, err := p.Next(Answer{Values: raw(`"abc"`), URL: page})
	if err != nil || n.Params.Encode() != "c=abc&n=5&q=1" {
		t.Errorf("next %v %v", n, err)
	}
	if _, err := p.Next(Answer{Values: raw(`"abc"`), URL: page}); !errors.Is(err, ErrLoop) {
		t.Errorf("cursor twice: %v", err)
	}
	if n, _ := New(Spec{Type: Cursor, CursorPath: "next", CursorParam: "c"}, nil).Next(Answer{Values: raw(`null`), URL: page}); n != nil {
		t.Errorf("null cursor goes on: %v", n)
	}
	// next_url: relative to the page, never to another host.
	p = New(Spec{Type: NextURL, NextPath: "next"}, nil)
	if n, err := p.Next(Answer{Values: raw(`"?page=2"`), URL: page}); err != nil || n.URL.String() != "https://v.example/x?page=2" {
		t.Errorf("next url %v %v", n, err)
	}
	if _, err := p.Next(Answer{Values: raw(`"https://evil.example/x"`), URL: page}); err == nil {
		t.Error("a next URL on another host was followed")
	}
	// link_header.
	h := http.Header{"Link": {`</x?page=2>; rel="next"`}}
	if n, err := New(Spec{Type: LinkHeader}, nil).Next(Answer{Header: h, URL: page}); err != nil || n.URL.RawQuery != "page=2" {
		t.Errorf("link %v %v", n, err)
	}
	// offset: until a short page or the total.
	p = New(Spec{Type: Offset, OffsetParam: "o", LimitParam: "l", Limit: 10, TotalPath: "total"}, nil)
	if n, _ := p.Next(Answer{Records: 10, Values: raw(`25`), URL: page}); n == nil || n.Params.Get("o") != "10" {
		t.Errorf("offset page 2: %v", n)
	}
	if n, _ := p.Next(Answer{Records: 10, Values: raw(`20`), URL: page}); n != nil {
		t.Errorf("offset past the total: %v", n)
	}
	// page: until an empty page.
	p = New(Spec{Type: Page, PageParam: "p"}, nil)
	if f := p.First(); f.Params.Get("p") != "1" {
		t.Errorf("first page %v", f.Params)
	}
	if n, _ := p.Next(Answer{Records: 3, URL: page}); n == nil || n.Params.Get("p") != "2" {
		t.Errorf("page 2: %v", n)
	}
	if n, _ := p.Next(Answer{Records: 0, URL: page}); n != nil {
		t.Errorf("empty page goes on: %v", n)
	}
}

// A cursor read from the page's last record: OKX's after=<last billId>
// (exclusive) and Binance's fromId=<last id + 1> (inclusive).
func TestRecordCursor(t *testing.T) {
	page := &url.URL{Scheme: "https", Host: "v.example", Path: "/x"}
	last := func(s string) map[string]json.RawMessage {
		return map[string]json.RawMessage{"billId": json.RawMessage(s), "id": json.RawMessage(s)}
	}
	p := New(Spec{Type: Cursor, CursorFromRecord: "billId", CursorParam: "after", LimitParam: "limit", Limit: 2}, url.Values{"instType": {"OPTION"}})
	if got := p.RecordPaths(); len(got) != 1 || got[0] != "billId" || len(p.Paths()) != 0 {
		t.Errorf("record paths %v, body paths %v", got, p.Paths())
	}
	n, err := p.Next(Answer{Records: 2, Last: last(`"650"`), URL: page})
	if err != nil || n.Params.Encode() != "after=650&instType=OPTION&limit=2" {
		t.Fatalf("next %v %v", n, err)
	}
	if _, err := p.Next(Answer{Records: 2, Last: last(`"650"`), URL: page}); !errors.Is(err, ErrLoop) {
		t.Errorf("the same last record twice: %v", err)
	}
	// A venue may cap its pages below the limit asked: a short page is not
	// the last, only an empty one is.
	if n, err := p.Next(Answer{Records: 1, Last: last(`"600"`), URL: page}); err != nil || n == nil || n.Params.Get("after") != "600" {
		t.Errorf("a short page ended the walk: %v %v", n, err)
	}
	if n, err := New(Spec{Type: Cursor, CursorFromRecord: "billId", CursorParam: "after"}, nil).Next(Answer{Records: 0, URL: page}); n != nil || err != nil {
		t.Errorf("an empty page goes on: %v %v", n, err)
	}
	if _, err := New(Spec{Type: Cursor, CursorFromRecord: "billId", CursorParam: "after"}, nil).Next(Answer{Records: 3, URL: page}); err == nil {
		t.Error("a last record without the cursor field ended the walk silently")
	}
	b := New(Spec{Type: Cursor, CursorFromRecord: "id", CursorParam: "fromId", CursorPlus: 1, LimitParam: "limit", Limit: 3}, nil)
	if n, err := b.Next(Answer{Records: 3, Last: last(`41`), URL: page}); err != nil || n.Params.Get("fromId") != "42" {
		t.Errorf("fromId %v %v", n, err)
	}
	for _, s := range []Spec{
		{Type: Cursor, CursorParam: "c"},
		{Type: Cursor, CursorPath: "n", CursorFromRecord: "id", CursorParam: "c"},
		{Type: Cursor, CursorPath: "n", CursorParam: "c", CursorPlus: 1},
		{Type: Cursor, CursorFromRecord: "id"},
	} {
		if s.Check() == nil {
			t.Errorf("%+v passes the check", s)
		}
	}
	if err := (Spec{Type: Cursor, CursorFromRecord: "id", CursorParam: "c"}).Check(); err != nil {
		t.Error(err)
	}
}

// TestOffsetWalks walks a listing of 3,000 rows served by venues that answer
// pages other than asked, and checks every row is received once, or the
// walk is reported incomplete.
func TestOffsetWalks(t *testing.T) {
	page := &url.URL{Scheme: "https", Host: "v.example", Path: "/x"}
	const rows = 3000
	for _, tc := range []struct {
		name      string
		spec      Spec
		serve     func(q url.Values, call int) (n, total int) // rows of the page, the total in the body (-1: none)
		want      int                                         // rows received
		wantTotal int                                         // the IncompleteError's Want (0: Done is nil)
	}{
		{"capped below the limit", Spec{Type: Offset, OffsetParam: "o", LimitParam: "l", Limit: 100, TotalPath: "total"},
			func(q url.Values, _ int) (int, int) { return clamp(atoi(q.Get("o")), 60), rows }, rows, 0},
		{"one row short", Spec{Type: Offset, OffsetParam: "o", LimitParam: "l", Limit: 100, TotalPath: "total"},
			func(q url.Values, _ int) (int, int) { return clamp(atoi(q.Get("o")), 99), rows }, rows, 0},
		{"one row long", Spec{Type: Offset, OffsetParam: "o", LimitParam: "l", Limit: 100, TotalPath: "total"},
			func(q url.Values, _ int) (int, int) { return clamp(atoi(q.Get("o")), 101), rows }, rows, 0},
		{"pages without a total", Spec{Type: Offset, OffsetParam: "o", LimitParam: "l", Limit: 100},
			func(q url.Values, _ int) (int, int) { return clamp(atoi(q.Get("o")), 100), -1 }, rows, 0},
		{"venue stops early", Spec{Type: Offset, OffsetParam: "o", LimitParam: "l", Limit: 100, TotalPath: "total"},
			func(q url.Values, _ int) (int, int) {
				if atoi(q.Get("o")) >= 1000 {
					return 0, rows
				}
				return 100, rows
			}, 1000, rows},
		{"total changes between pages", Spec{Type: Offset, OffsetParam: "o", LimitParam: "l", Limit: 100, TotalPath: "total"},
			func(q url.Values, call int) (int, int) {
				if call == 0 {
					return 100, rows
				}
				return clampN(atoi(q.Get("o")), 100, rows-1), rows - 1
			}, rows - 1, rows - 1},
		{"page numbers, capped pages", Spec{Type: Page, PageParam: "p", LimitParam: "l", Limit: 100, TotalPath: "total"},
			func(q url.Values, _ int) (int, int) { return clamp((atoi(q.Get("p"))-1)*60, 60), rows }, rows, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(tc.spec, nil)
			next, got := p.First(), 0
			for call := 0; ; call++ {
				if call > 1000 {
					t.Fatal("the walk does not end")
				}
				n, total := tc.serve(next.Params, call)
				got += n
				vals := map[string]json.RawMessage{}
				if total >= 0 {
					vals["total"] = json.RawMessage(strconv.Itoa(total))
				}
				r, err := p.Next(Answer{Values: vals, URL: page, Records: n})
				if err != nil {
					t.Fatal(err)
				}
				if r == nil {
					break
				}
				next = *r
			}
			if got != tc.want {
				t.Errorf("received %d rows, want %d", got, tc.want)
			}
			err := p.Done(got)
			var inc *IncompleteError
			switch {
			case tc.wantTotal == 0 && err != nil:
				t.Errorf("done: %v", err)
			case tc.wantTotal != 0 && (!errors.As(err, &inc) || inc.Want != tc.wantTotal || inc.Got != got):
				t.Errorf("done: %v, want an incomplete listing of %d", err, tc.wantTotal)
			}
		})
	}
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// clamp is the rows a page of at most size rows from offset off holds in
// a listing of 3,000.
func clamp(off, size int) int { return clampN(off, size, 3000) }

func clampN(off, size, rows int) int { return max(0, min(size, rows-off)) }
