// Package envelope takes the rows out of a venue's response body: the
// records at a dotted path (the rest of the body is envelope, kept only in
// the raw archive), values at other paths (pagination cursors, totals) and
// error bodies ("venue error CODE: MESSAGE"). It streams: one element is
// held at a time, never the whole body.
package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/optlake/optlake/internal/jsontok"
	"github.com/optlake/optlake/pipeline/extract/dotpath"
	"github.com/optlake/optlake/pipeline/values"
)

// Errors says where a venue reports an error inside a 2xx body, and how
// to read the code of a 4xx answer's body.
type Errors struct {
	Path    string // present and not null: the body is an error
	Code    string // dotted path of the code (absolute, or relative to Path)
	Message string // dotted path of the message (absolute, or relative to Path)
	// OK lists the codes of success: a body whose code is not one of them
	// (or that has none) is an error (OKX "0", Bybit 0).
	OK []string
	// NonEmpty: the value at Path is an error only when not empty (not
	// null, [], {} or ""): Kraken's "error": [].
	NonEmpty bool
	// RetryCodes are codes retried like a 429.
	RetryCodes []string
}

// Check reports the first mistake in e.
func (e *Errors) Check() error {
	switch {
	case e.Path == "" && e.Code == "":
		return errors.New("path or code is required")
	case len(e.OK) > 0 && e.Code == "":
		return errors.New("ok lists the codes of success: code is required")
	case e.NonEmpty && e.Path == "":
		return errors.New("non_empty: path is required")
	}
	return nil
}

// paths are the body paths e reads.
func (e *Errors) paths() []string {
	return []string{e.Path, e.Code, e.Message, join(e.Path, e.Code), join(e.Path, e.Message)}
}

// judge returns the body's error, or nil: values holds the body's values at
// e.paths(); text renders one of them.
func (e *Errors) judge(values map[string]json.RawMessage, text func(path, base string) string) *VenueError {
	failed := false
	if e.Path != "" {
		if v, ok := values[e.Path]; ok {
			failed = !empty(v, e.NonEmpty)
		}
	}
	if len(e.OK) > 0 {
		_, abs := values[e.Code]
		_, rel := values[join(e.Path, e.Code)]
		failed = failed || !(abs || rel) || !slices.Contains(e.OK, text(e.Code, e.Path))
	}
	if !failed {
		return nil
	}
	ve := &VenueError{Code: text(e.Code, e.Path), Message: text(e.Message, e.Path)}
	if ve.Code == "" && ve.Message == "" {
		ve.Message = text(e.Path, "")
	}
	if ve.Code == "" && ve.Message == "" {
		ve.Message = "no code at " + e.Code + " (success is " + strings.Join(e.OK, " or ") + ")"
	}
	return ve
}

// empty reports whether an error value says "no error": null, or with
// nonEmpty also [], {} and "".
func empty(v json.RawMessage, nonEmpty bool) bool {
	t := strings.TrimSpace(string(v))
	if t == "null" {
		return true
	}
	if !nonEmpty {
		return false
	}
	switch t {
	case `""`:
		return true
	}
	if len(t) >= 2 && (t[0] == '[' || t[0] == '{') && strings.TrimSpace(t[1:len(t)-1]) == "" {
		return true
	}
	return false
}

// Classify reads the error of a non-2xx answer's body (its start, as the
// client keeps it): a *VenueError with the code and message at e's paths,
// retryable when the code is one of RetryCodes; nil when the body is not
// JSON or names no code nor message.
func Classify(body []byte, e *Errors) *VenueError {
	if e == nil {
		return nil
	}
	var doc any
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if d.Decode(&doc) != nil {
		return nil
	}
	vals := map[string]json.RawMessage{}
	for _, p := range e.paths() {
		if p == "" {
			continue
		}
		if v, ok := dotpath.Lookup(doc, p); ok {
			vals[p], _ = json.Marshal(v)
		}
	}
	sp := &splicer{res: Result{Values: vals}}
	ve := &VenueError{Code: sp.text(e.Code, e.Path), Message: sp.text(e.Message, e.Path)}
	if ve.Code == "" && ve.Message == "" {
		return nil
	}
	ve.Retry = slices.Contains(e.RetryCodes, ve.Code)
	return ve
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
	// Last lists paths within a record whose values in the body's last
	// record Splice returns (a cursor read from the last row).
	Last []string
	Shape
	// Rewrite turns each record into the row written (a field mapping,
	// appending to dst[:0]); nil writes it as received.
	Rewrite func(dst, raw []byte) []byte
}

// Shape is how records become rows beyond their path (kept in the raw
// archive's metadata, so a replay makes the same rows).
type Shape struct {
	// Key: an object at the records path holds rows by name (Kraken's
	// {"XXBTZUSD": {...}}): one row per member, its name in the column Key.
	Key string `json:"key,omitempty"`
	// Columns names the values of rows that are arrays, by position
	// (positions beyond them are named by their number).
	Columns []string `json:"columns,omitempty"`
}

// Check reports a key that would name a second member of its rows: one of
// the columns, or "value" (the member of a row that is neither an object
// nor an array).
func (s Shape) Check() error {
	if s.Key == "" {
		return nil
	}
	for _, c := range s.Columns {
		if c == s.Key {
			return fmt.Errorf("key %q is also a column: name the rows' key otherwise", s.Key)
		}
	}
	if s.Key == "value" {
		return errors.New(`key "value" names the value of a row that is not an object: name the rows' key otherwise`)
	}
	return nil
}

// Shaped reports whether s changes the records.
func (s Shape) Shaped() bool { return s.Key != "" || len(s.Columns) > 0 }

// Result is what Splice found besides the rows.
type Result struct {
	Records int                        // elements written
	Found   bool                       // the records path was in the body
	Values  map[string]json.RawMessage // values at the Capture paths found
	Last    map[string]json.RawMessage // values at the Last paths in the last record
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
//
// A body that r can read twice (an io.ReadSeeker: the page's scratch file)
// is judged first, so an error body writes no row whatever the order of
// its members (and its error paths may lie inside the records, as when
// the records are the whole body).
func Splice(r io.Reader, out *Stream, spec Spec) (Result, error) {
	if spec.Errors != nil && spec.Errors.Path == "" && len(spec.Errors.OK) == 0 {
		spec.Errors = nil // a code for 4xx answers only: a 2xx body is never an error
	}
	if rs, ok := r.(io.ReadSeeker); ok && spec.Errors != nil {
		first := spec
		first.Capture = nil
		sp := newSplicer(rs, out, first, true)
		if err := sp.run(); err != nil {
			return sp.res, values.BadInput(err)
		}
		if ve := spec.Errors.judge(sp.res.Values, sp.text); ve != nil {
			ve.Retry = slices.Contains(spec.Errors.RetryCodes, ve.Code)
			return sp.res, ve
		}
		if _, err := rs.Seek(0, io.SeekStart); err != nil {
			return Result{}, err
		}
		spec.Errors = nil
	}
	sp := newSplicer(r, out, spec, false)
	before := out.n
	err := sp.run()
	sp.res.Records = out.n - before
	if err != nil {
		return sp.res, values.BadInput(err)
	}
	if e := spec.Errors; e != nil {
		if ve := e.judge(sp.res.Values, sp.text); ve != nil {
			ve.Retry = sp.res.Records == 0 && slices.Contains(e.RetryCodes, ve.Code)
			return sp.res, ve
		}
	}
	if !sp.res.Found {
		return sp.res, &values.ShapeError{Pkg: "envelope", Msg: fmt.Sprintf("no records at %q in the body", spec.Records)}
	}
	if len(spec.Last) > 0 && sp.res.Records > 0 {
		sp.res.Last = lookup(sp.last, spec.Last)
	}
	return sp.res, nil
}

// newSplicer starts a pass over one body; scan only captures values.
func newSplicer(r io.Reader, out *Stream, spec Spec, scan bool) *splicer {
	sp := &splicer{sc: jsontok.New(r, 256<<10), out: out, spec: spec, scan: scan, res: Result{Values: map[string]json.RawMessage{}}}
	sp.want = append(sp.want, spec.Capture...)
	if e := spec.Errors; e != nil {
		sp.want = append(sp.want, e.paths()...)
	}
	return sp
}

func (sp *splicer) run() error {
	err := sp.value("", 0)
	if err == nil {
		var eof bool
		if eof, err = sp.sc.AtEOF(); err == nil && !eof {
			err = &jsontok.SyntaxError{Offset: sp.sc.Offset(), Msg: "unexpected data after the body"}
		}
	}
	return err
}

// lookup returns the values at paths in the JSON document raw.
func lookup(raw []byte, paths []string) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	var doc any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if d.Decode(&doc) != nil {
		return out
	}
	for _, p := range paths {
		if v, ok := dotpath.Lookup(doc, p); ok {
			out[p], _ = json.Marshal(v)
		}
	}
	return out
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
	scan bool // only capture the wanted values (the records are not rows)
	want []string
	res  Result
	last []byte // the last record as received (Spec.Last)
	buf  []byte // the rewritten record
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
	if !sp.scan && strings.HasPrefix(sp.spec.Records, pre) && sp.spec.Records != p {
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
	if path == sp.spec.Records && !sp.scan {
		sp.res.Found = true
		return sp.records()
	}
	if path != "" && slices.Contains(sp.want, path) {
		return sp.capture(path)
	}
	if !sp.leads(path) {
		return sp.skip()
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
	case jsontok.Object:
		if sp.spec.Key != "" {
			return sp.keyed()
		}
		return sp.element()
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
	if !sp.spec.Instruments || sp.spec.Shaped() {
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
	} else if err := sp.skip(); err != nil {
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
						err = sp.skip()
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
	return sp.emit(sc.EndCapture())
}

func (sp *splicer) emitValue() error {
	raw, err := sp.captureValue()
	if err != nil {
		return err
	}
	if len(sp.spec.Columns) > 0 && raw[0] == '[' {
		if raw, err = sp.positional(nil, raw); err != nil {
			return err
		}
	}
	return sp.emit(raw)
}

func (sp *splicer) captureValue() ([]byte, error) {
	if err := sp.sc.StartCapture(); err != nil {
		return nil, err
	}
	if err := sp.skip(); err != nil {
		sp.sc.EndCapture()
		return nil, err
	}
	return sp.sc.EndCapture(), nil
}

// skip consumes one value. A value nested past jsontok.MaxDepth is
// consumed too (Scanner.SkipDeep) and passed on as received: the decoder
// (a listing's or an account endpoint's) rejects the one row that holds it
// instead of the whole body failing here.
func (sp *splicer) skip() error {
	_, err := sp.sc.SkipDeep()
	return err
}

// emit writes one record, rewritten when the spec says so.
func (sp *splicer) emit(raw []byte) error {
	if len(sp.spec.Last) > 0 {
		sp.last = append(sp.last[:0], raw...)
	}
	if sp.spec.Rewrite != nil {
		sp.buf = sp.spec.Rewrite(sp.buf, raw)
		raw = sp.buf
	}
	return sp.out.element(raw)
}

// keyed writes one row per member of the object at the scanner: the
// member's value with its name in the column Key (an object gains the
// member; an array is named by Columns; another value is "value").
func (sp *splicer) keyed() error {
	sc := sp.sc
	if err := sc.Expect('{'); err != nil {
		return err
	}
	var row []byte
	for first := true; ; first = false {
		more, err := sc.More('}', first)
		if err != nil || !more {
			return err
		}
		key, err := sc.String()
		if err != nil {
			return err
		}
		name, _ := json.Marshal(string(key))
		if err := sc.Expect(':'); err != nil {
			return err
		}
		raw, err := sp.captureValue()
		if err != nil {
			return err
		}
		head := append(append(append([]byte{'{'}, sp.keyJSON()...), ':'), name...)
		switch {
		case raw[0] == '{':
			if err := sp.keyFree(raw, key); err != nil {
				return err
			}
			row = append(row[:0], head...)
			if rest := bytes.TrimSpace(raw[1:]); len(rest) > 0 && rest[0] != '}' {
				row = append(row, ',')
			}
			row = append(row, raw[1:]...)
		case raw[0] == '[' && len(sp.spec.Columns) > 0:
			if row, err = sp.positional(head, raw); err != nil {
				return err
			}
		default:
			row = append(append(append(row[:0], head...), `,"value":`...), raw...)
			row = append(row, '}')
		}
		if err := sp.emit(row); err != nil {
			return err
		}
	}
}

// keyFree fails when the object row named name already has a member named
// like the key: the row would hold the key twice, and one would be lost.
func (sp *splicer) keyFree(raw, name []byte) error {
	if !bytes.Contains(raw, sp.keyJSON()) {
		return nil
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(raw, &members) != nil {
		return nil // the decoder rejects the row with its reason
	}
	if _, ok := members[sp.spec.Key]; ok {
		return fmt.Errorf("records key %q: the row %q has a member %q of its own: name the rows' key otherwise", sp.spec.Key, name, sp.spec.Key)
	}
	return nil
}

func (sp *splicer) keyJSON() []byte {
	b, _ := json.Marshal(sp.spec.Key)
	return b
}

// positional writes the array raw as an object of Columns by position,
// after head (an object's opening and members, or nil).
func (sp *splicer) positional(head, raw []byte) ([]byte, error) {
	var vals []json.RawMessage
	if err := json.Unmarshal(raw, &vals); err != nil {
		return nil, &jsontok.SyntaxError{Offset: sp.sc.Offset(), Msg: err.Error()}
	}
	out := append([]byte(nil), head...)
	if len(out) == 0 {
		out = append(out, '{')
	}
	for i, v := range vals {
		if len(out) > 1 {
			out = append(out, ',')
		}
		name := strconv.Itoa(i)
		if i < len(sp.spec.Columns) {
			name = sp.spec.Columns[i]
		}
		k, _ := json.Marshal(name)
		out = append(append(append(out, k...), ':'), v...)
	}
	return append(out, '}'), nil
}
