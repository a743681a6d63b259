package infer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/optlake/optlake/internal/jsontok"
	"github.com/optlake/optlake/pipeline/values"
)

// MaxNesting is the deepest nesting of arrays and objects a body may have:
// a row holding a value nested deeper is rejected (ReasonTooDeep), the
// other rows load.
const MaxNesting = 512

type nodeKind uint8

const (
	nNull nodeKind = iota
	nBool
	nNumber
	nString
	nObject
	nArray
)

func (k nodeKind) String() string {
	return [...]string{"null", "bool", "number", "string", "object", "array"}[k]
}

// node is one parsed JSON value. Objects keep their members in the order
// received; a key that occurs twice keeps its first position and its last
// value (encoding/json's rule).
type node struct {
	kind nodeKind
	b    bool
	// deep: the value is, or holds, an object or array nested deeper than
	// MaxNesting, kept only as its text (s) without its members.
	deep  bool
	s     string // string value, or the number's literal text
	keys  []string
	vals  []*node // object members, parallel to keys
	elems []*node // array elements
}

// parse reads exactly one JSON value from r. Errors are *SyntaxError or
// *values.ShapeError (the body's fault) or the reader's own error, wrapped.
func parse(r io.Reader) (*node, error) {
	sc := jsontok.New(r, 64<<10)
	p := parser{sc: sc}
	root, err := p.value(0)
	if err == nil {
		var eof bool
		if eof, err = sc.AtEOF(); err == nil && !eof {
			err = &jsontok.SyntaxError{Offset: sc.Offset(), Msg: "unexpected data after the top-level value"}
		}
	}
	if err == nil {
		return root, nil
	}
	var se *values.ShapeError
	if errors.As(err, &se) {
		return nil, err
	}
	var syn *jsontok.SyntaxError
	if errors.As(err, &syn) {
		return nil, &SyntaxError{Offset: syn.Offset, Err: errors.New(syn.Msg)}
	}
	return nil, fmt.Errorf("infer: read body: %w", err)
}

type parser struct {
	sc *jsontok.Scanner
}

func (p *parser) value(depth int) (*node, error) {
	k, err := p.sc.PeekKind()
	if err != nil {
		return nil, err
	}
	switch k {
	case jsontok.Object, jsontok.Array:
		if depth >= MaxNesting {
			return p.tooDeep(k)
		}
		if k == jsontok.Object {
			return p.object(depth + 1)
		}
		return p.array(depth + 1)
	case jsontok.StringKind:
		b, err := p.sc.String()
		if err != nil {
			return nil, err
		}
		return &node{kind: nString, s: validUTF8(b)}, nil
	case jsontok.Number:
		b, err := p.sc.Number()
		if err != nil {
			return nil, err
		}
		return &node{kind: nNumber, s: string(b)}, nil
	default:
		k, err := p.sc.Literal()
		if err != nil {
			return nil, err
		}
		switch k {
		case jsontok.True:
			return &node{kind: nBool, b: true}, nil
		case jsontok.False:
			return &node{kind: nBool}, nil
		}
		return &node{kind: nNull}, nil
	}
}

// tooDeep consumes a value nested deeper than MaxNesting (without
// recursion) and keeps its text as received: the row that holds it is
// rejected.
func (p *parser) tooDeep(k jsontok.Kind) (*node, error) {
	if err := p.sc.StartCapture(); err != nil {
		return nil, err
	}
	_, err := p.sc.SkipDeep()
	raw := p.sc.EndCapture()
	if err != nil {
		return nil, err
	}
	n := &node{kind: nArray, deep: true, s: validUTF8(raw)}
	if k == jsontok.Object {
		n.kind = nObject
	}
	return n, nil
}

func (p *parser) object(depth int) (*node, error) {
	if err := p.sc.Expect('{'); err != nil {
		return nil, err
	}
	n := &node{kind: nObject}
	var index map[string]int
	for first := true; ; first = false {
		more, err := p.sc.More('}', first)
		if err != nil {
			return nil, err
		}
		if !more {
			return n, nil
		}
		kb, err := p.sc.String()
		if err != nil {
			return nil, err
		}
		key := validUTF8(kb)
		if err := p.sc.Expect(':'); err != nil {
			return nil, err
		}
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		// Duplicate keys: keep the first position, the last value.
		if len(n.keys) >= 8 && index == nil {
			index = make(map[string]int, 16)
			for i, k := range n.keys {
				if _, dup := index[k]; !dup {
					index[k] = i
				}
			}
		}
		at := -1
		if index != nil {
			if i, ok := index[key]; ok {
				at = i
			}
		} else {
			for i, k := range n.keys {
				if k == key {
					at = i
					break
				}
			}
		}
		n.deep = n.deep || v.deep
		if at >= 0 {
			n.vals[at] = v
			continue
		}
		if index != nil {
			index[key] = len(n.keys)
		}
		n.keys = append(n.keys, key)
		n.vals = append(n.vals, v)
	}
}

func (p *parser) array(depth int) (*node, error) {
	if err := p.sc.Expect('['); err != nil {
		return nil, err
	}
	n := &node{kind: nArray}
	for first := true; ; first = false {
		more, err := p.sc.More(']', first)
		if err != nil {
			return nil, err
		}
		if !more {
			return n, nil
		}
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		n.deep = n.deep || v.deep
		n.elems = append(n.elems, v)
	}
}

// validUTF8 copies b into a string, replacing each byte that is not part of
// valid UTF-8 with U+FFFD (as encoding/json does).
func validUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 8)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			sb.WriteString("\uFFFD")
		} else {
			sb.Write(b[:size])
		}
		b = b[size:]
	}
	return sb.String()
}

// compactJSON renders n as compact JSON text, members in the order received.
func compactJSON(n *node) string {
	var b bytes.Buffer
	writeJSON(&b, n)
	return b.String()
}

func writeJSON(b *bytes.Buffer, n *node) {
	if n.deep && n.keys == nil && n.elems == nil {
		b.WriteString(n.s) // too deep: its text as received
		return
	}
	switch n.kind {
	case nNull:
		b.WriteString("null")
	case nBool:
		b.WriteString(strconv.FormatBool(n.b))
	case nNumber:
		b.WriteString(n.s)
	case nString:
		writeString(b, n.s)
	case nObject:
		b.WriteByte('{')
		for i, k := range n.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k)
			b.WriteByte(':')
			writeJSON(b, n.vals[i])
		}
		b.WriteByte('}')
	case nArray:
		b.WriteByte('[')
		for i, e := range n.elems {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSON(b, e)
		}
		b.WriteByte(']')
	}
}

// writeString writes s (valid UTF-8: the decoder replaced invalid bytes) as
// a JSON string, escaping only what JSON requires.
func writeString(b *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b.WriteByte('\\')
				b.WriteByte(c)
			case c == '\n':
				b.WriteString(`\n`)
			case c == '\r':
				b.WriteString(`\r`)
			case c == '\t':
				b.WriteString(`\t`)
			case c < 0x20:
				b.WriteString(`\u00`)
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&0xf])
			default:
				b.WriteByte(c)
			}
			i++
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		b.WriteString(s[i : i+size])
		i += size
	}
	b.WriteByte('"')
}

// scalar kinds of values routed to columns.
type vkind uint8

const (
	vNull vkind = iota
	vBool
	vInt
	vFloat
	vString
	vList
)

// kindName is the name of a scalar kind in variant column suffixes.
func (k vkind) kindName() string {
	switch k {
	case vBool:
		return "bool"
	case vInt:
		return "int"
	case vFloat:
		return "float"
	case vString:
		return "text"
	case vList:
		return "list"
	}
	return "null"
}

// value is one cell: a scalar with its text (numbers keep their literal as
// received), or a list of scalars.
type value struct {
	k    vkind
	b    bool
	lit  bool // s is a JSON number literal as received (whatever k)
	i    int64
	f    float64
	s    string
	list []value
}

// scalarValue classifies a scalar node: an integer literal within int64 is
// vInt, another number within float64's finite range vFloat, and a number
// outside both (1e400, 2^70) is treated as the text of its literal (vString),
// so that nothing is rounded or lost.
func scalarValue(n *node) value {
	switch n.kind {
	case nBool:
		return value{k: vBool, b: n.b}
	case nString:
		return value{k: vString, s: n.s}
	case nNumber:
		if i, err := strconv.ParseInt(n.s, 10, 64); err == nil {
			return value{k: vInt, i: i, s: n.s, lit: true}
		}
		if isIntLiteral(n.s) {
			return value{k: vString, s: n.s, lit: true}
		}
		if f, err := strconv.ParseFloat(n.s, 64); err == nil && !math.IsInf(f, 0) && !values.Underflows(f, n.s) {
			return value{k: vFloat, f: f, s: n.s, lit: true}
		}
		return value{k: vString, s: n.s, lit: true}
	}
	return value{}
}

func isIntLiteral(s string) bool {
	if len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// appendValueJSON appends a scalar value as the JSON it was received as.
func appendValueJSON(b *bytes.Buffer, v value) {
	switch {
	case v.k == vNull:
		b.WriteString("null")
	case v.k == vBool:
		b.WriteString(strconv.FormatBool(v.b))
	case v.lit:
		b.WriteString(v.s)
	default:
		writeString(b, v.s)
	}
}
