package jsontok

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"
)

// decode builds the document's value with the scanner's API, the way the
// decoders use it: objects as map[string]any, arrays as []any, numbers as
// json.Number (their text as sent), strings, bools and nil. The document
// must be one value followed by whitespace only.
func decode(s *Scanner) (any, error) {
	v, err := value(s, 0)
	if err != nil {
		return nil, err
	}
	if eof, err := s.AtEOF(); err != nil || !eof {
		return nil, errors.Join(errors.New("data after the value"), err)
	}
	return v, nil
}

func value(s *Scanner, depth int) (any, error) {
	if depth > MaxDepth {
		return nil, ErrTooDeep
	}
	k, err := s.PeekKind()
	if err != nil {
		return nil, err
	}
	switch k {
	case Object:
		if err := s.Expect('{'); err != nil {
			return nil, err
		}
		m := map[string]any{}
		for first := true; ; first = false {
			more, err := s.More('}', first)
			if err != nil {
				return nil, err
			}
			if !more {
				return m, nil
			}
			key, err := s.String()
			if err != nil {
				return nil, err
			}
			name := string(key)
			if err := s.Expect(':'); err != nil {
				return nil, err
			}
			if m[name], err = value(s, depth+1); err != nil {
				return nil, err
			}
		}
	case Array:
		if err := s.Expect('['); err != nil {
			return nil, err
		}
		a := []any{}
		for first := true; ; first = false {
			more, err := s.More(']', first)
			if err != nil {
				return nil, err
			}
			if !more {
				return a, nil
			}
			v, err := value(s, depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
	case StringKind:
		b, err := s.String()
		return string(b), err
	case Number:
		b, err := s.Number()
		return json.Number(b), err
	default:
		k, err := s.Literal()
		switch k {
		case True:
			return true, err
		case False:
			return false, err
		}
		return nil, err
	}
}

// readers gives the same document in different chunkings, so every token
// is also seen split across buffer refills.
func readers(doc []byte) map[string]func() io.Reader {
	return map[string]func() io.Reader{
		"whole":    func() io.Reader { return bytes.NewReader(doc) },
		"one-byte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(doc)) },
		"half":     func() io.Reader { return iotest.HalfReader(bytes.NewReader(doc)) },
		"in memory": func() io.Reader {
			return &inMemory{Reader: bytes.NewReader(doc), doc: doc}
		},
	}
}

// inMemory is a document held whole in memory (InMemory); declined reads
// it with Read.
type inMemory struct {
	*bytes.Reader
	doc      []byte
	declined bool
}

func (m *inMemory) InMemory() ([]byte, bool) {
	if m.declined {
		return nil, false
	}
	m.Reader.Reset(nil)
	return m.doc, true
}

func stdDecode(doc []byte) (any, bool) {
	if !json.Valid(doc) {
		return nil, false
	}
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

// check compares the scanner with encoding/json on one document (valid
// UTF-8: the scanner returns string bytes as sent, encoding/json replaces
// invalid sequences).
func check(t *testing.T, doc []byte) {
	t.Helper()
	want, valid := stdDecode(doc)
	for name, r := range readers(doc) {
		got, err := decode(New(r(), 4096))
		if valid != (err == nil) {
			t.Fatalf("%s: %q: scanner error %v, encoding/json valid=%v", name, doc, err, valid)
		}
		if !valid {
			var se *SyntaxError
			if !errors.As(err, &se) && !errors.Is(err, ErrTooDeep) && !strings.Contains(err.Error(), "data after the value") {
				t.Fatalf("%s: %q: error %v (%T) is not a SyntaxError", name, doc, err, err)
			}
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: %q:\n got %#v\nwant %#v", name, doc, got, want)
		}
	}
}

func TestScannerAgreesWithEncodingJSON(t *testing.T) {
	long := strings.Repeat("x", 10_000) // longer than the 4 KiB buffer: it grows
	for _, doc := range []string{
		`{}`, `[]`, `""`, `0`, `-0`, `1.5e-7`, `true`, `false`, `null`, ` [ 1 , 2 ] `,
		`[{"instruments":[{"instrument_name":"BTC-27DEC26-100000-C","index_price":"97000.5","strike":100000,"is_active":true,"option_type":null}]}]`,
		`{"a":{"b":{"c":[[],[{}],[1,[2,[3]]]]}}}`,
		`"esc \" \\ \/ \b \f \n \r \t \u00e9 \u20ac \ud83d\ude00"`,
		`"lone surrogates \ud800 \udc00 x"`,
		`"unicode: é € 😀"`,
		`{"dup":1,"dup":2}`,
		`{"` + long + `":"` + long + `\n"}`,
		`[12345678901234567890123456789, 1E400, -1e-400, 0.000000000000000000001]`,
		// invalid
		``, ` `, `[`, `]`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[,1]`, `[1 2]`, `{a:1}`, `'x'`,
		`01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`, `0x10`, `NaN`, `tru`, `nul`, `truex`, `[true false]`,
		`"unterminated`, `"bad \x escape"`, `"\u12"`, "\"ctl \x01\"", "\"tab\tinside\"", `[1]x`, `{} {}`,
	} {
		check(t, []byte(doc))
	}
}

// Capture returns a value's bytes exactly as received, across refills.
func TestCaptureIsExact(t *testing.T) {
	obj := `{"instrument_name": "ETH-X",  "nested" : {"k":[1, 2 ,3]}, "s":"` + strings.Repeat("é\\n", 3000) + `"}`
	doc := []byte("[ " + obj + " ,\n\t" + obj + " ]")
	for name, r := range readers(doc) {
		s := New(r(), 4096)
		if err := s.Expect('['); err != nil {
			t.Fatal(err)
		}
		for first, n := true, 0; ; first = false {
			more, err := s.More(']', first)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !more {
				if n != 2 {
					t.Fatalf("%s: captured %d values, want 2", name, n)
				}
				break
			}
			if err := s.StartCapture(); err != nil {
				t.Fatal(err)
			}
			if err := s.Skip(); err != nil {
				t.Fatalf("%s: skip: %v", name, err)
			}
			if got := string(s.EndCapture()); got != obj {
				t.Fatalf("%s: capture %d is %d bytes, want the %d bytes sent", name, n, len(got), len(obj))
			}
			n++
		}
	}
}

// Nesting past MaxDepth is refused by Skip (encoding/json allows 10,000
// levels); MaxDepth itself is fine.
func TestSkipDepthLimit(t *testing.T) {
	for _, tc := range []struct {
		depth int
		ok    bool
	}{{MaxDepth, true}, {MaxDepth + 2, false}, {100_000, false}} {
		doc := strings.Repeat("[", tc.depth) + strings.Repeat("]", tc.depth)
		err := New(strings.NewReader(doc), 4096).Skip()
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), ErrTooDeep.Error())) {
			t.Errorf("depth %d: %v, want ok=%v", tc.depth, err, tc.ok)
		}
	}
}

// SkipDeep consumes a value of any depth up to MaxSkipDepth, objects and
// arrays alike, reports whether it went past MaxDepth, and leaves the
// scanner just after it; malformed JSON inside is still an error.
func TestSkipDeep(t *testing.T) {
	nested := func(depth int) string {
		var open, close strings.Builder
		for i := range depth {
			if i%3 == 1 {
				open.WriteString(`{"k\"}":`)
				close.WriteString("}")
			} else {
				open.WriteString(`[1,"]",`)
				close.WriteString("]")
			}
		}
		c := []byte(close.String())
		slices.Reverse(c)
		return open.String() + `{"x":null}` + string(c)
	}
	for _, tc := range []struct {
		name string
		doc  string
		deep bool
		err  string
	}{
		{"scalar", `"a"`, false, ""},
		{"at MaxDepth", nested(MaxDepth - 1), false, ""},
		{"past MaxDepth", nested(MaxDepth + 2), true, ""},
		{"10,000 levels", nested(10_000), true, ""},
		{"100,000 brackets", strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000), true, ""},
		{"mismatched inside", strings.Repeat("[", 1000) + "}" + strings.Repeat("]", 999), false, "unexpected character '}'"},
		{"cut short inside", strings.Repeat("[", 1000), false, "unexpected end"},
		{"trailing comma inside", strings.Repeat("[", 1000) + "1," + strings.Repeat("]", 1000), false, "trailing comma"},
		{"past MaxSkipDepth", strings.Repeat("[", MaxSkipDepth+MaxDepth+2), false, ErrTooDeep.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := tc.doc
			if tc.err == "" {
				doc += ` ,"next"`
			}
			sc := New(strings.NewReader(doc), 4096)
			deep, err := sc.SkipDeep()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || deep != tc.deep {
				t.Fatalf("deep=%v err=%v, want deep=%v", deep, err, tc.deep)
			}
			if more, err := sc.More(0, false); !more || err != nil {
				t.Fatalf("after the value: more=%v err=%v", more, err)
			}
			if s, err := sc.String(); string(s) != "next" || err != nil {
				t.Fatalf("after the value: %q %v", s, err)
			}
			// Skip refuses what SkipDeep reports deep, and only that.
			err = New(strings.NewReader(tc.doc), 4096).Skip()
			if (err != nil) != tc.deep {
				t.Errorf("Skip: %v", err)
			}
		})
	}
}

// Offsets in syntax errors point at the offending byte.
func TestSyntaxErrorOffset(t *testing.T) {
	for _, tc := range []struct {
		doc    string
		offset int64
	}{
		{`[1,2,x]`, 5},
		{`{"a":1 "b":2}`, 7},
		{"[\n\n  01]", 5},
	} {
		_, err := decode(New(iotest.OneByteReader(strings.NewReader(tc.doc)), 4096))
		var se *SyntaxError
		if !errors.As(err, &se) || se.Offset != tc.offset {
			t.Errorf("%q: error %v, want a SyntaxError at byte %d", tc.doc, err, tc.offset)
		}
	}
}

// A read error that is not the end of input is returned as it is, not as
// malformed JSON: the caller retries a cut connection, not a bad body.
func TestReadErrorIsNotSyntax(t *testing.T) {
	cut := errors.New("connection reset")
	r := io.MultiReader(strings.NewReader(`[{"a":"abc`), iotest.ErrReader(cut))
	_, err := decode(New(r, 4096))
	if !errors.Is(err, cut) {
		t.Fatalf("error %v, want the read error", err)
	}
}

func TestValidNumber(t *testing.T) {
	for _, tc := range []struct {
		s  string
		ok bool
	}{
		{"0", true}, {"-0", true}, {"10", true}, {"1.25", true}, {"1e5", true}, {"1E+5", true}, {"-1.5e-5", true},
		{"", false}, {"-", false}, {"01", false}, {"1.", false}, {".1", false}, {"1e", false}, {"1e+", false},
		{"+1", false}, {"1.2.3", false}, {"--1", false}, {"1-", false}, {"0x1", false},
	} {
		if got := ValidNumber([]byte(tc.s)); got != tc.ok {
			t.Errorf("ValidNumber(%q) = %v, want %v", tc.s, got, tc.ok)
		}
		if want := json.Valid([]byte(tc.s)); want != tc.ok {
			t.Errorf("table is wrong for %q: encoding/json says %v", tc.s, want)
		}
	}
}

// FuzzScanner: on any valid UTF-8 input the scanner accepts exactly what
// encoding/json accepts and decodes the same values, whole or byte by byte.
func FuzzScanner(f *testing.F) {
	for _, s := range []string{`{"a":[1,"x",null,true,{"b":-1.5e3}]}`, `"\ud83d\ude00"`, `[1,]`, `01`, `{"a" 1}`} {
		f.Add([]byte(s))
	}
	// Values SkipDeep takes past MaxDepth.
	for _, s := range []string{`[{"a":[]},"]",{"b":{"c":[1,{}]}}]`, `{"a":[}`, `[1,[2,]]`, `{"a":1,}`, `[[[[`, `{"a" "b"}`, `["\"]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if !utf8.Valid(doc) || bytes.Count(doc, []byte("[")) > 64 || bytes.Count(doc, []byte("{")) > 64 {
			return
		}
		check(t, doc)
		checkSkipDeep(t, doc)
	})
}

// checkSkipDeep: SkipDeep takes doc nested past MaxDepth exactly when
// encoding/json takes it, reports it deep, and ends just after it.
func checkSkipDeep(t *testing.T, doc []byte) {
	t.Helper()
	wrap := MaxDepth + 2 // levels around doc: doc's values are past MaxDepth
	deepDoc := strings.Repeat(`{"k":[`, wrap/2) + string(doc) + strings.Repeat("]}", wrap/2)
	valid := json.Valid([]byte(deepDoc))
	for name, r := range readers([]byte(deepDoc + ` 7`)) {
		// Taken: the value, then exactly the 7 after it.
		sc := New(r(), 4096)
		deep, err := sc.SkipDeep()
		var n []byte
		if err == nil {
			n, err = sc.Number()
		}
		if err == nil {
			if eof, e := sc.AtEOF(); e != nil || !eof || string(n) != "7" {
				err = errors.Join(errors.New("not just 7 after the value"), e)
			}
		}
		if valid != (err == nil) {
			t.Fatalf("%s: %q nested %d deep: SkipDeep then 7: %v, encoding/json valid=%v", name, doc, wrap, err, valid)
		}
		if valid && !deep {
			t.Fatalf("%s: %q nested %d deep: not reported deep", name, doc, wrap)
		}
	}
}

// A Reset scanner reads the next document from its start, whatever the
// previous one left (a capture, a token cut off, an error, a grown buffer).
func TestReset(t *testing.T) {
	long := `"` + strings.Repeat("x", 9000) + `"`
	docs := []string{`{"a":[1,2,{"b":null}]}`, `[1,`, long, `{"k":"v\u00e9"}`, `[` + long + `,true]`, `"x"`}
	s := New(strings.NewReader(""), 4096)
	for i, doc := range docs {
		s.Reset(strings.NewReader(doc))
		if i == 3 {
			if err := s.StartCapture(); err != nil {
				t.Fatal(err)
			}
		}
		got, gerr := decode(s)
		want, werr := decode(New(strings.NewReader(doc), 4096))
		if !reflect.DeepEqual(got, want) || (gerr == nil) != (werr == nil) {
			t.Fatalf("doc %d after Reset: %v, %v; a new scanner: %v, %v", i, got, gerr, want, werr)
		}
		if gerr == nil && s.Offset() != int64(len(doc)) {
			t.Fatalf("doc %d: offset %d, want %d", i, s.Offset(), len(doc))
		}
	}
}

// A document held in memory is scanned in place: the scanner's own buffer
// comes back on Reset, so the next streamed document never writes into the
// previous one's bytes; a reader that declines is read with Read.
func TestInMemoryInPlace(t *testing.T) {
	long := `["` + strings.Repeat("y", 9000) + `",1]` // grows a 4 KiB buffer
	held := []byte(`{"a":[1,"` + strings.Repeat("z", 5000) + `",{"b":null}]}`)
	keep := bytes.Clone(held)
	s := New(&inMemory{Reader: bytes.NewReader(held), doc: held}, 4096)
	if w := s.Window(); len(w) != len(held) || &w[0] != &held[0] {
		t.Fatalf("window of %d bytes, want the %d held bytes themselves", len(w), len(held))
	}
	wantHeld, _ := decode(New(bytes.NewReader(held), 4096))
	wantLong, _ := decode(New(strings.NewReader(long), 4096))
	for i, r := range []io.Reader{
		nil, // the held document, scanned first by New
		strings.NewReader(long),
		&inMemory{Reader: bytes.NewReader(held), doc: held},
		&inMemory{Reader: bytes.NewReader([]byte(long)), doc: []byte(long), declined: true},
		iotest.OneByteReader(strings.NewReader(long)),
	} {
		if r != nil {
			s.Reset(r)
		}
		got, err := decode(s)
		if err != nil {
			t.Fatalf("doc %d: %v", i, err)
		}
		want := wantLong
		if i%2 == 0 && i < 4 {
			want = wantHeld
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("doc %d: not the document's values", i)
		}
		if !bytes.Equal(held, keep) {
			t.Fatalf("doc %d: the held document's bytes changed", i)
		}
	}
}
