// Package paginate walks a venue's pages. A Paginator answers four
// questions (after dlt's BasePaginator): the first request, what to read
// from each answer, whether there is a next page, and its request. The
// fetch loop knows none of the kinds; it stops at MaxPages and on a
// cursor or URL seen twice, so a snapshot is never silently truncated.
//
// Offset and page walks advance by the rows received (a venue may answer
// fewer rows than asked), end on a short page only when the venue's total
// (TotalPath) agrees, and are checked at the end against that total (Done):
// a walk short or long of it is an *IncompleteError. Offset and page walks
// are not exact on a live listing (an instrument listed or delisted
// between two page requests shifts the rest); cursor, next_url and
// link_header walks are as exact as the venue's cursor.
package paginate

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// The kinds of Spec.Type.
const (
	Cursor     = "cursor"
	NextURL    = "next_url"
	LinkHeader = "link_header"
	Offset     = "offset"
	Page       = "page"
)

// Types lists the kinds.
var Types = []string{Cursor, NextURL, LinkHeader, Offset, Page}

// DefaultMaxPages is MaxPages when not set.
const DefaultMaxPages = 10000

// Spec configures pagination (the `pagination:` key of an endpoint).
type Spec struct {
	Type     string
	MaxPages int // default DefaultMaxPages
	// cursor: the value at CursorPath of the body, or at CursorFromRecord
	// of the page's last record (OKX after=billId), plus CursorPlus when
	// the venue's cursor is inclusive (Binance fromId: the last id + 1).
	CursorPath, CursorParam string
	CursorFromRecord        string
	CursorPlus              int
	// next_url
	NextPath string
	// offset
	OffsetParam string
	// offset, page: the body's count of the listing's rows
	TotalPath string
	// page
	PageParam string
	Start     int // first page number (default 1)
	// cursor, offset, page
	LimitParam string
	Limit      int
}

// Answer is what the fetch loop saw of one page.
type Answer struct {
	Values  map[string]json.RawMessage // the body's values at Paths()
	Last    map[string]json.RawMessage // the last record's values at RecordPaths()
	Header  http.Header
	URL     *url.URL // the page's request URL (without credentials)
	Records int
}

// Request is the next page's request: new query parameters, or a whole URL.
type Request struct {
	Params url.Values
	URL    *url.URL // next_url and link_header; nil: the endpoint's path
}

// Paginator walks one request's pages.
type Paginator struct {
	spec Spec
	base url.Values
	n    int // pages answered
	seen map[string]bool
	// offset and page: the rows received so far, and the venue's total on
	// the first and the last page that gave one (-1: none yet).
	got                   int
	firstTotal, lastTotal int
}

// IncompleteError is a walk whose rows disagree with the venue's total:
// the venue answered fewer (or more) rows than it said it has, or its
// total changed between pages (the listing moved under the walk).
type IncompleteError struct {
	Want, Got int
	// First is the total the first page gave, when it differs from Want.
	First int
}

func (e *IncompleteError) Error() string {
	msg := fmt.Sprintf("incomplete listing: the venue's total is %d rows, %d received", e.Want, e.Got)
	if e.First != e.Want {
		msg += fmt.Sprintf(" (its total was %d on the first page: the listing changed during the walk)", e.First)
	}
	return msg
}

// ErrLoop is a cursor or URL that came back: the venue would be walked
// forever.
var ErrLoop = errors.New("pagination loops")

// Check reports the first mistake in s.
func (s Spec) Check() error {
	need := func(key, v string) error {
		if v == "" {
			return fmt.Errorf("pagination %s: %s is required", s.Type, key)
		}
		return nil
	}
	if s.MaxPages < 0 || s.Limit < 0 {
		return errors.New("pagination: max_pages and limit must not be negative")
	}
	if (s.LimitParam == "") != (s.Limit == 0) && s.Type != NextURL && s.Type != LinkHeader {
		return fmt.Errorf("pagination %s: limit_param and limit go together", s.Type)
	}
	switch s.Type {
	case Cursor:
		if s.CursorPath != "" && s.CursorFromRecord != "" {
			return errors.New("pagination cursor: cursor_path or cursor_from_record, not both")
		}
		if s.CursorPlus != 0 && s.CursorFromRecord == "" {
			return errors.New("pagination cursor: cursor_plus goes with cursor_from_record")
		}
		if s.CursorFromRecord != "" {
			return need("cursor_param", s.CursorParam)
		}
		return errors.Join(need("cursor_path (or cursor_from_record)", s.CursorPath), need("cursor_param", s.CursorParam))
	case NextURL:
		return need("next_path", s.NextPath)
	case LinkHeader:
		return nil
	case Offset:
		if err := need("offset_param", s.OffsetParam); err != nil {
			return err
		}
		return need("limit (the page size)", s.LimitParam)
	case Page:
		return need("page_param", s.PageParam)
	case "":
		return fmt.Errorf("pagination: type is required (one of %s)", strings.Join(Types, ", "))
	}
	return fmt.Errorf("pagination: unknown type %q (want one of %s)", s.Type, strings.Join(Types, ", "))
}

// New starts walking the pages of a request with the query parameters base.
func New(s Spec, base url.Values) *Paginator {
	if s.MaxPages == 0 {
		s.MaxPages = DefaultMaxPages
	}
	if s.Type == Page && s.Start == 0 {
		s.Start = 1
	}
	return &Paginator{spec: s, base: base, seen: map[string]bool{}, firstTotal: -1, lastTotal: -1}
}

// Exact reports whether the walk's kind cannot shift under a listing that
// changes between page requests (offset and page walks can).
func (p *Paginator) Exact() bool { return p.spec.Type != Offset && p.spec.Type != Page }

// Done checks a finished walk: received is the rows the walk delivered.
// With a venue total it fails with an *IncompleteError when received
// differs from it, or when the total changed between pages.
func (p *Paginator) Done(received int) error {
	if p.lastTotal < 0 || p.Exact() {
		return nil
	}
	if received != p.lastTotal || p.firstTotal != p.lastTotal {
		return &IncompleteError{Want: p.lastTotal, Got: received, First: p.firstTotal}
	}
	return nil
}

// total reads the venue's total from a page's answer (-1: none).
func (p *Paginator) total(a Answer) int {
	if p.spec.TotalPath == "" {
		return -1
	}
	t, err := strconv.Atoi(scalar(a.Values[p.spec.TotalPath]))
	if err != nil || t < 0 {
		return -1
	}
	if p.firstTotal < 0 {
		p.firstTotal = t
	}
	p.lastTotal = t
	return t
}

// MaxPages is the most pages walked.
func (p *Paginator) MaxPages() int { return p.spec.MaxPages }

// Paths are the body paths the paginator reads.
func (p *Paginator) Paths() []string {
	switch p.spec.Type {
	case Cursor:
		if p.spec.CursorPath == "" {
			return nil
		}
		return []string{p.spec.CursorPath}
	case NextURL:
		return []string{p.spec.NextPath}
	case Offset, Page:
		if p.spec.TotalPath != "" {
			return []string{p.spec.TotalPath}
		}
	}
	return nil
}

// RecordPaths are the paths within a record whose values in a page's last
// record the paginator reads (Answer.Last).
func (p *Paginator) RecordPaths() []string {
	if p.spec.Type == Cursor && p.spec.CursorFromRecord != "" {
		return []string{p.spec.CursorFromRecord}
	}
	return nil
}

func (p *Paginator) params(set ...string) url.Values {
	v := url.Values{}
	for k, vs := range p.base {
		v[k] = append([]string(nil), vs...)
	}
	if p.spec.LimitParam != "" {
		v.Set(p.spec.LimitParam, strconv.Itoa(p.spec.Limit))
	}
	for i := 0; i+1 < len(set); i += 2 {
		v.Set(set[i], set[i+1])
	}
	return v
}

// First is the first page's request.
func (p *Paginator) First() Request {
	switch p.spec.Type {
	case Offset:
		return Request{Params: p.params(p.spec.OffsetParam, "0")}
	case Page:
		return Request{Params: p.params(p.spec.PageParam, strconv.Itoa(p.spec.Start))}
	}
	return Request{Params: p.params()}
}

// Next reads a page's answer and returns the next page's request, or nil
// after the last page. A cursor or URL seen twice fails with ErrLoop.
func (p *Paginator) Next(a Answer) (*Request, error) {
	p.n++
	switch p.spec.Type {
	case Cursor:
		if p.spec.CursorFromRecord != "" {
			return p.recordCursor(a)
		}
		c := scalar(a.Values[p.spec.CursorPath])
		if c == "" {
			return nil, nil
		}
		if err := p.once("cursor", c); err != nil {
			return nil, err
		}
		return &Request{Params: p.params(p.spec.CursorParam, c)}, nil
	case NextURL, LinkHeader:
		var next string
		if p.spec.Type == NextURL {
			next = scalar(a.Values[p.spec.NextPath])
		} else {
			next = NextLink(a.Header.Values("Link"))
		}
		if next == "" {
			return nil, nil
		}
		ref, err := url.Parse(next)
		if err != nil {
			return nil, fmt.Errorf("next page URL is not a URL")
		}
		u := a.URL.ResolveReference(ref)
		if u.Host != a.URL.Host || u.Scheme != a.URL.Scheme {
			return nil, fmt.Errorf("next page URL leaves the venue (%s://%s)", u.Scheme, u.Host)
		}
		if err := p.once("next page URL", u.String()); err != nil {
			return nil, err
		}
		return &Request{URL: u}, nil
	case Offset, Page:
		// The next offset is the rows received, not the limit asked: a
		// venue may cap its pages below it. A short page ends the walk
		// only when there is no total, or the rows reached it.
		p.got += a.Records
		total := p.total(a)
		switch {
		case a.Records == 0:
			return nil, nil
		case total >= 0 && p.got >= total:
			return nil, nil
		case total < 0 && p.spec.Limit > 0 && a.Records < p.spec.Limit:
			return nil, nil
		}
		if p.spec.Type == Offset {
			return &Request{Params: p.params(p.spec.OffsetParam, strconv.Itoa(p.got))}, nil
		}
		return &Request{Params: p.params(p.spec.PageParam, strconv.Itoa(p.spec.Start+p.n))}, nil
	}
	return nil, fmt.Errorf("pagination: unknown type %q", p.spec.Type)
}

// recordCursor is the next request of a cursor read from the page's last
// record. Only an empty page ends the walk: a venue that caps its pages below the
// limit asked for answers a short page that is not the last (one request
// more a walk, never a listing cut short).
func (p *Paginator) recordCursor(a Answer) (*Request, error) {
	if a.Records == 0 {
		return nil, nil
	}
	c := scalar(a.Last[p.spec.CursorFromRecord])
	if c == "" {
		return nil, fmt.Errorf("the last record of page %d has no %s to ask for the next page", p.n, p.spec.CursorFromRecord)
	}
	if p.spec.CursorPlus != 0 {
		n, err := strconv.ParseInt(c, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("the last record's %s is %q, not a whole number to add cursor_plus to", p.spec.CursorFromRecord, c)
		}
		c = strconv.FormatInt(n+int64(p.spec.CursorPlus), 10)
	}
	if err := p.once("cursor", c); err != nil {
		return nil, err
	}
	return &Request{Params: p.params(p.spec.CursorParam, c)}, nil
}

func (p *Paginator) once(what, v string) error {
	if p.seen[v] {
		return fmt.Errorf("%w: the same %s came back after page %d", ErrLoop, what, p.n)
	}
	p.seen[v] = true
	return nil
}

// scalar renders a JSON string or number as text; null, absent, false and
// "" are "".
func scalar(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	switch t := strings.TrimSpace(string(raw)); t {
	case "null", "false", "true", "":
		return ""
	default:
		if t[0] == '{' || t[0] == '[' {
			return ""
		}
		return t
	}
}

// NextLink returns the target of the rel="next" link of Link header
// values (RFC 8288), or "".
func NextLink(values []string) string {
	for _, v := range values {
		for _, link := range splitLinks(v) {
			link = strings.TrimSpace(link)
			if !strings.HasPrefix(link, "<") {
				continue
			}
			end := strings.IndexByte(link, '>')
			if end < 0 {
				continue
			}
			target := link[1:end]
			for _, param := range strings.Split(link[end+1:], ";") {
				k, val, ok := strings.Cut(strings.TrimSpace(param), "=")
				if !ok || !strings.EqualFold(strings.TrimSpace(k), "rel") {
					continue
				}
				for _, rel := range strings.Fields(strings.Trim(strings.TrimSpace(val), `"`)) {
					if strings.EqualFold(rel, "next") {
						return target
					}
				}
			}
		}
	}
	return ""
}

// splitLinks splits a Link header value at the commas between links (not
// those inside <...> or quotes).
func splitLinks(v string) []string {
	var out []string
	depth, quoted, start := 0, false, 0
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"' && depth == 0:
			quoted = !quoted
		case c == '<' && !quoted:
			depth++
		case c == '>' && !quoted && depth > 0:
			depth--
		case c == ',' && depth == 0 && !quoted:
			out = append(out, v[start:i])
			start = i + 1
		}
	}
	return append(out, v[start:])
}
