// Package envelope takes the rows out of a venue's response body: the
// records at a dotted path (the rest of the body is envelope, kept only in
// the raw archive), values at other paths (pagination cursors, totals) and
// error bodies ("venue error CODE: MESSAGE"). It streams: one element is
// held at a time, never the whole body.
package envelope

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/optlake/optlake/internal/jsontok"
	"github.com/optlake/optlake/pipeline/extract/dotpath"
	"github.com/optlake/optlake/pipeline/values"
)

// Errors says where a venue reports an error inside a 2xx body.
type Errors struct {
	Path    string // present and not null: the body is an error
	Code    string // dotted path of the code (absolute, or relative to Path)
	Message string // dotted path of the message (absolute, or relative to Path)
	// RetryCodes are codes retried like a 429.
	RetryCodes []string
}

// Spec is what to take out of a body.
type Spec struct {
	Records string // dotted path of the rows; "" the whole body
	// Instruments: the rows are instruments, either bare or grouped as
	// {"instruments": [...]}; the stream is the seed's grouped listing.
	Instruments bool
	Errors      *Errors
	// Capture lists more paths whose values Splice returns.
	Capture []string
}

// Result is what Splice found besides the rows.
type Result struct {
	Records int                        // elements written
	Found   bool                       // the records path was in the body
	Values  map[string]json.RawMessage // values at the Capture paths found
}

// VenueError is an error reported in a 2xx body.
type VenueError struct {
	Code, Message string
	// Retry: the code is one of RetryCodes and no row of the body was
	// written, so the request may be made again.
	Retry bool
}

func (e *VenueError) Error() string {
	msg := "venue error"
	if e.Code != "" {
		msg += " " + e.Code
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Stream is the normalised body the decoders read: a JSON array of every
// page's records ([{"instruments": [...]}] for instruments).
type Stream struct {
	w           io.Writer
	instruments bool
	n           int
}

// NewStream starts a stream on w.
func NewStream(w io.Writer, instruments bool) *Stream { return &Stream{w: w, instruments: instruments} }

// Elements is the number of elements written so far.
func (s *Stream) Elements() int { return s.n }

func (s *Stream) element(raw []byte) error {
	var sep string
	switch {
	case s.n > 0:
		sep = ","
	case s.instruments:
		sep = `[{"instruments":[`
	default:
		sep = "["
	}
	if _, err := io.WriteString(s.w, sep); err != nil {
		return err
	}
	if _, err := s.w.Write(raw); err != nil {
		return err
	}
	s.n++
	return nil
}

// Close ends the array.
func (s *Stream) Close() error {
	var out string
	switch {
	case s.instruments && s.n == 0:
		out = "[]"
	case s.instruments:
		out = "]}]"
	case s.n == 0:
		out = "[]"
	default:
		out = "]"
	}
	_, err := io.WriteString(s.w, out)
	return err
}

const maxCapture = 64 << 10

// Splice reads one body from r and writes the records' elements to out
// (an array's elements, or a non-array value as one element; null is
// none). A body whose error path is present and not null returns a
// *VenueError. A body that is not JSON fails with an error that is
// values.ErrBadInput.
func Splice(r io.Reader, out *Stream, spec Spec) (Result, error) {
	sp := &splicer{sc: jsontok.New(r, 256<<10), out: out, spec: spec, res: Result{Values: map[string]json.RawMessage{}}}
	sp.want = append(sp.want, spec.Capture...)
	if e := spec.Errors; e != nil {
		sp.want = append(sp.want, e.Path, e.Code, e.Message, join(e.Path, e.Code), join(e.Path, e.Message))
	}
	before := out.n
	err := sp.value("", 0)
	if err == nil {
		var eof bool
		if eof, err = sp.sc.AtEOF(); err == nil && !eof {
			err = &jsontok.SyntaxError{Offset: sp.sc.Offset(), Msg: "unexpected data after the body"}
		}
	}
	sp.res.Records = out.n - before
	if err != nil {
		return sp.res, values.BadInput(err)
	}
	if e := spec.Errors; e != nil {
		if v, ok := sp.res.Values[e.Path]; ok && string(v) != "null" {
			ve := &VenueError{Code: sp.text(e.Code, e.Path), Message: sp.text(e.Message, e.Path)}
			ve.Retry = sp.res.Records == 0 && slices.Contains(e.RetryCodes, ve.Code)
			return sp.res, ve
		}
	}
	if !sp.res.Found {
		return sp.res, &values.ShapeError{Pkg: "envelope", Msg: fmt.Sprintf("no records at %q in the body", spec.Records)}
	}
	return sp.res, nil
}

func join(a, b string) string {
	if a == "" || b == "" {
		return ""
	}
	return a + "." + b
}

type splicer struct {
	sc   *jsontok.Scanner
	out  *Stream
	spec Spec
	want []string
	res  Result
}

// text renders the value at path (or base.path) as text: a string
// unquoted, anything else as JSON, at most 200 bytes.
func (sp *splicer) text(path, base string) string {
	if path == "" {
		return ""
	}
	v, ok := sp.res.Values[path]
	if !ok {
		if v, ok = sp.res.Values[join(base, path)]; !ok {
			return ""
		}
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		s = string(v)
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

func child(path, seg string) string {
	if path == "" {
		return seg
	}
	return path + "." + seg
}

// leads reports whether p is a proper prefix of some wanted path or of the
// records path.
func (sp *splicer) leads(p string) bool {
	pre := p + "."
	if p == "" {
		pre = ""
	}
	if strings.HasPrefix(sp.spec.Records, pre) && sp.spec.Records != p {
		return true
	}
	for _, w := range sp.want {
		if w != "" && w != p && strings.HasPrefix(w, pre) {
			return true
		}
	}
	return false
}

func (sp *splicer) value(path string, depth int) error {
	if depth > jsontok.MaxDepth {
		return &jsontok.SyntaxError{Offset: sp.sc.Offset(), Msg: jsontok.ErrTooDeep.Error()}
	}
	if path == sp.spec.Records {
		sp.res.Found = true
		return sp.records()
	}
	if path != "" && slices.Contains(sp.want, path) {
		return sp.capture(path)
	}
	if !sp.leads(path) {
		return sp.sc.Skip()
	}
	k, err := sp.sc.PeekKind()
	if err != nil {
		return err
	}
	switch k {
	case jsontok.Object:
		sp.sc.Expect('{')
		for first := true; ; first = false {
			more, err := sp.sc.More('}', first)
			if err != nil || !more {
				return err
			}
			key, err := sp.sc.String()
			if err != nil {
				return err
			}
			p := child(path, string(key))
			if err := sp.sc.Expect(':'); err != nil {
				return err
			}
			if err := sp.value(p, depth+1); err != nil {
				return err
			}
		}
	case jsontok.Array:
		sp.sc.Expect('[')
		for i, first := 0, true; ; i, first = i+1, false {
			more, err := sp.sc.More(']', first)
			if err != nil || !more {
				return err
			}
			if err := sp.value(child(path, strconv.Itoa(i)), depth+1); err != nil {
				return err
			}
		}
	}
	return sp.sc.Skip()
}

// capture keeps the raw value at path (and the values below it that are
// wanted too).
func (sp *splicer) capture(path string) error {
	if err := sp.sc.StartCapture(); err != nil {
		return err
	}
	if err := sp.sc.Skip(); err != nil {
		sp.sc.EndCapture()
		return err
	}
	raw := sp.sc.EndCapture()
	if len(raw) > maxCapture {
		raw = []byte(`"(value too large)"`)
	}
	sp.res.Values[path] = bytes.Clone(raw)
	var doc any
	if sp.leads(path) && json.Unmarshal(raw, &doc) == nil {
		for _, w := range sp.want {
			if rest, ok := strings.CutPrefix(w, path+"."); ok {
				if v, ok := dotpath.Lookup(doc, rest); ok {
					b, _ := json.Marshal(v)
					sp.res.Values[w] = b
				}
			}
		}
	}
	return nil
}

func (sp *splicer) records() error {
	k, err := sp.sc.PeekKind()
	if err != nil {
		return err
	}
	switch k {
	case jsontok.Null:
		_, err := sp.sc.Literal()
		return err
	case jsontok.Array:
	default:
		return sp.element()
	}
	sp.sc.Expect('[')
	for first := true; ; first = false {
		more, err := sp.sc.More(']', first)
		if err != nil || !more {
			return err
		}
		if err := sp.element(); err != nil {
			return err
		}
	}
}

// element writes one record. For instruments, a group {"instruments":
// [...]} (the key anywhere in the object) gives its array's elements; any
// other object is an instrument itself.
func (sp *splicer) element() error {
	sc := sp.sc
	if !sp.spec.Instruments {
		return sp.emitValue()
	}
	if k, err := sc.PeekKind(); err != nil {
		return err
	} else if k != jsontok.Object {
		return &values.ShapeError{Pkg: "envelope", Msg: fmt.Sprintf("a listing element is a JSON %s, expected an instrument or an {\"instruments\": [...]} group", k)}
	}
	if err := sc.StartCapture(); err != nil {
		return err
	}
	sc.Expect('{')
	more, err := sc.More('}', true)
	if err != nil {
		sc.EndCapture()
		return err
	}
	if !more {
		sc.EndCapture() // {}: an empty group
		return nil
	}
	key, err := sc.String()
	if err != nil {
		sc.EndCapture()
		return err
	}
	group := string(key) == "instruments"
	if group {
		sc.EndCapture()
	}
	if err := sc.Expect(':'); err != nil {
		return err
	}
	if group {
		if err := sp.records(); err != nil {
			return err
		}
	} else if err := sc.Skip(); err != nil {
		sc.EndCapture()
		return err
	}
	for {
		more, err := sc.More('}', false)
		if err == nil && more {
			var k []byte
			if k, err = sc.String(); err == nil {
				if err = sc.Expect(':'); err == nil {
					if !group && string(k) == "instruments" {
						// A group after all (its key need not come first,
						// as in the default decoder): the members before it
						// are not an instrument.
						sc.EndCapture()
						group = true
						err = sp.records()
					} else {
						err = sc.Skip()
					}
				}
			}
		}
		if err != nil {
			if !group {
				sc.EndCapture()
			}
			return err
		}
		if !more {
			break
		}
	}
	if group {
		return nil
	}
	return sp.out.element(sc.EndCapture())
}

func (sp *splicer) emitValue() error {
	if err := sp.sc.StartCapture(); err != nil {
		return err
	}
	if err := sp.sc.Skip(); err != nil {
		sp.sc.EndCapture()
		return err
	}
	return sp.out.element(sp.sc.EndCapture())
}
