// Package jsontok is a small streaming JSON tokenizer built for decoding very
// large arrays of objects without holding the document in memory and without
// per-value allocations.
//
// Values are returned as byte slices that alias the scanner's buffer and are
// valid only until the next call. Numbers are returned as their raw text so
// callers keep exactly what was sent. A scanner can capture the raw bytes of
// a region (one object, say) as received, across buffer refills.
package jsontok

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"unicode/utf16"
	"unicode/utf8"
)

// Kind is the JSON type of the next value.
type Kind byte

const (
	Invalid Kind = iota
	Object
	Array
	StringKind
	Number
	True
	False
	Null
)

func (k Kind) String() string {
	switch k {
	case Object:
		return "object"
	case Array:
		return "array"
	case StringKind:
		return "string"
	case Number:
		return "number"
	case True, False:
		return "bool"
	case Null:
		return "null"
	}
	return "invalid"
}

// SyntaxError is a malformed document. Offset counts bytes from the start.
type SyntaxError struct {
	Offset int64
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at byte %d: %s", e.Offset, e.Msg)
}

// ErrTooDeep is returned when nesting exceeds MaxDepth.
var ErrTooDeep = errors.New("JSON nested too deeply")

// MaxDepth bounds nesting of skipped values, so hostile input cannot exhaust
// the stack or hang the scanner.
const MaxDepth = 512

// Scanner reads JSON tokens from an io.Reader.
type Scanner struct {
	r      io.Reader
	buf    []byte
	pos    int   // next unread byte
	end    int   // bytes valid in buf
	base   int64 // offset of buf[0] in the stream
	rerr   error // sticky read error (io.EOF at end)
	tokBeg int   // start of the token being read, kept across refills; -1 when none

	capturing bool
	deepOK    bool   // SkipDeep: a value past MaxDepth is consumed, not an error
	wentDeep  bool   // SkipDeep: such a value was consumed
	capBeg    int    // start of the captured region still in buf
	capBuf    []byte // captured bytes that were moved out of buf by refills

	scratch []byte // unescaped string text
	own     []byte // the scanner's buffer while buf is an InMemory reader's content

	beforeRefill func() // OnRefill
}

// InMemory is a reader that can hand over the rest of its content at
// once. A scanner reads such a reader's content in place (New, Reset),
// without copying it into its buffer; it reads exactly as it would with
// Read.
type InMemory interface {
	io.Reader
	// InMemory returns the rest of the content and consumes it, or false
	// when it cannot (having consumed nothing): the content is then read
	// with Read. The bytes must stay as they are until the scanner that
	// took them is Reset.
	InMemory() ([]byte, bool)
}

// New returns a scanner reading from r with a buffer of the given size
// (minimum 4 KiB; 256 KiB is a good default for large bodies).
func New(r io.Reader, bufSize int) *Scanner {
	if bufSize < 4096 {
		bufSize = 4096
	}
	s := &Scanner{buf: make([]byte, bufSize)}
	s.Reset(r)
	return s
}

// Reset makes s read a new document from r, keeping its buffers (nil
// drops the reader it held).
func (s *Scanner) Reset(r io.Reader) {
	buf := s.buf
	if s.own != nil {
		buf = s.own
	}
	*s = Scanner{r: r, buf: buf, tokBeg: -1, capBuf: s.capBuf[:0], scratch: s.scratch[:0]}
	if m, ok := r.(InMemory); ok {
		if b, ok := m.InMemory(); ok {
			// The whole input is in buf: fill finds the end at once.
			s.own, s.buf, s.end, s.rerr = buf, b, len(b), io.EOF
		}
	}
}

// OnRefill makes f (nil: nothing) run before a read of more input moves
// the buffer's bytes, while the bytes Window returned so far are still as
// they were: a caller that holds on to consumed bytes of the window
// (Advance) uses them there for the last time. f must not call s. Reset
// drops it.
func (s *Scanner) OnRefill(f func()) { s.beforeRefill = f }

// Offset is the stream offset of the next unread byte.
func (s *Scanner) Offset() int64 { return s.base + int64(s.pos) }

func (s *Scanner) syntax(format string, args ...any) error {
	return &SyntaxError{Offset: s.Offset(), Msg: fmt.Sprintf(format, args...)}
}

// fill reads more input, keeping the token in progress and any captured
// region. It returns false at end of input or on a read error (in s.rerr).
func (s *Scanner) fill() bool {
	if s.rerr != nil {
		return false
	}
	keep := s.pos
	if s.tokBeg >= 0 && s.tokBeg < keep {
		keep = s.tokBeg
	}
	// What is kept moves to the front only when the buffer's free tail is
	// short: until then more input is read into the tail, and the bytes
	// before it stay as they were.
	if keep > 0 && len(s.buf)-s.end < len(s.buf)/4 {
		if s.beforeRefill != nil {
			s.beforeRefill()
		}
		if s.capturing {
			if s.capBeg < keep {
				s.capBuf = append(s.capBuf, s.buf[s.capBeg:keep]...)
			}
			s.capBeg = 0
		}
		n := copy(s.buf, s.buf[keep:s.end])
		s.base += int64(keep)
		s.pos -= keep
		s.end = n
		if s.tokBeg >= 0 {
			s.tokBeg -= keep
		}
	}
	if s.end == len(s.buf) { // one token fills the buffer: grow
		nb := make([]byte, 2*len(s.buf))
		copy(nb, s.buf[:s.end])
		s.buf = nb
	}
	for {
		n, err := s.r.Read(s.buf[s.end:])
		s.end += n
		if err != nil {
			s.rerr = err
			return n > 0
		}
		if n > 0 {
			return true
		}
	}
}

// readErr turns running out of input into the right error.
func (s *Scanner) readErr(what string) error {
	if s.rerr == nil || errors.Is(s.rerr, io.EOF) {
		return &SyntaxError{Offset: s.Offset(), Msg: "unexpected end of input in " + what}
	}
	return s.rerr
}

// Peek skips whitespace and returns the kind of the next value without
// consuming it, or the delimiter byte via PeekByte.
func (s *Scanner) PeekByte() (byte, error) {
	for {
		for s.pos < s.end {
			c := s.buf[s.pos]
			if c == ' ' || c == '\n' || c == '\r' || c == '\t' {
				s.pos++
				continue
			}
			return c, nil
		}
		if !s.fill() {
			return 0, s.readErr("document")
		}
	}
}

// AtEOF reports whether only whitespace remains. A read error is returned.
func (s *Scanner) AtEOF() (bool, error) {
	_, err := s.PeekByte()
	if err == nil {
		return false, nil
	}
	var se *SyntaxError
	if errors.As(err, &se) {
		return true, nil
	}
	return false, err
}

// PeekKind returns the kind of the next value.
func (s *Scanner) PeekKind() (Kind, error) {
	c, err := s.PeekByte()
	if err != nil {
		return Invalid, err
	}
	switch c {
	case '{':
		return Object, nil
	case '[':
		return Array, nil
	case '"':
		return StringKind, nil
	case 't':
		return True, nil
	case 'f':
		return False, nil
	case 'n':
		return Null, nil
	}
	if c == '-' || (c >= '0' && c <= '9') {
		return Number, nil
	}
	return Invalid, s.syntax("unexpected character %q", c)
}

// Expect consumes the delimiter c ('{', '}', '[', ']', ':', ',').
func (s *Scanner) Expect(c byte) error {
	if s.pos < s.end && s.buf[s.pos] == c {
		s.pos++
		return nil
	}
	got, err := s.PeekByte()
	if err != nil {
		return err
	}
	if got != c {
		return s.syntax("expected %q, found %q", c, got)
	}
	s.pos++
	return nil
}

// Consume consumes the next byte if it is c and reports whether it did.
func (s *Scanner) Consume(c byte) (bool, error) {
	got, err := s.PeekByte()
	if err != nil {
		return false, err
	}
	if got == c {
		s.pos++
		return true, nil
	}
	return false, nil
}

// More is for loops over array elements or object members: after the opening
// bracket (first=true) or after an element, it consumes ',' and reports true,
// or consumes the closing bracket and reports false.
func (s *Scanner) More(closing byte, first bool) (bool, error) {
	// Fast path for compact JSON: ',' followed by the next value.
	if !first && s.pos+1 < s.end && s.buf[s.pos] == ',' {
		if c := s.buf[s.pos+1]; c != closing && c > ' ' {
			s.pos++
			return true, nil
		}
	}
	c, err := s.PeekByte()
	if err != nil {
		return false, err
	}
	if c == closing {
		s.pos++
		return false, nil
	}
	if first {
		return true, nil
	}
	if c != ',' {
		return false, s.syntax("expected ',' or %q, found %q", closing, c)
	}
	s.pos++
	if c, err = s.PeekByte(); err != nil {
		return false, err
	}
	if c == closing {
		return false, s.syntax("trailing comma before %q", closing)
	}
	return true, nil
}

// String reads a string value and returns its unescaped bytes, which alias
// internal buffers until the next call. The bytes are not checked for valid
// UTF-8 (see utf8.Valid); escapes are decoded, lone surrogates become U+FFFD.
func (s *Scanner) String() ([]byte, error) {
	if s.pos < s.end && s.buf[s.pos] == '"' {
		s.pos++
	} else if err := s.Expect('"'); err != nil {
		return nil, err
	}
	s.tokBeg = s.pos
	// Fast path: find the closing quote, then make sure nothing before it
	// needs unescaping.
	i := s.pos
	for {
		if q := bytes.IndexByte(s.buf[i:s.end], '"'); q >= 0 {
			seg := s.buf[s.tokBeg : i+q]
			clean := true
			for _, c := range seg {
				if c == '\\' || c < 0x20 {
					clean = false
					break
				}
			}
			if clean {
				s.pos = i + q + 1
				s.tokBeg = -1
				return seg, nil
			}
			i = s.tokBeg
			for s.buf[i] != '\\' && s.buf[i] >= 0x20 {
				i++
			}
			goto slow
		}
		off := s.end - s.tokBeg
		if !s.fill() {
			s.tokBeg = -1
			return nil, s.readErr("string")
		}
		i = s.tokBeg + off
	}
slow:
	s.scratch = append(s.scratch[:0], s.buf[s.tokBeg:i]...)
	s.pos = i
	for {
		if s.pos >= s.end {
			s.tokBeg = s.pos
			if !s.fill() {
				return nil, s.readErr("string")
			}
		}
		c := s.buf[s.pos]
		switch {
		case c == '"':
			s.pos++
			s.tokBeg = -1
			return s.scratch, nil
		case c < 0x20:
			return nil, s.syntax("control character %#x in string", c)
		case c != '\\':
			s.scratch = append(s.scratch, c)
			s.pos++
			continue
		}
		// escape: need up to 6 bytes (\uXXXX)
		s.tokBeg = s.pos
		for s.end-s.pos < 2 {
			if !s.fill() {
				return nil, s.readErr("string escape")
			}
		}
		e := s.buf[s.pos+1]
		switch e {
		case '"', '\\', '/':
			s.scratch = append(s.scratch, e)
		case 'b':
			s.scratch = append(s.scratch, '\b')
		case 'f':
			s.scratch = append(s.scratch, '\f')
		case 'n':
			s.scratch = append(s.scratch, '\n')
		case 'r':
			s.scratch = append(s.scratch, '\r')
		case 't':
			s.scratch = append(s.scratch, '\t')
		case 'u':
			r, n, err := s.unicodeEscape()
			if err != nil {
				return nil, err
			}
			s.scratch = utf8.AppendRune(s.scratch, r)
			s.pos += n
			continue
		default:
			return nil, s.syntax("invalid escape \\%c", e)
		}
		s.pos += 2
	}
}

// unicodeEscape decodes \uXXXX (and a following low surrogate) at s.pos.
func (s *Scanner) unicodeEscape() (rune, int, error) {
	r, err := s.hex4(s.pos)
	if err != nil {
		return 0, 0, err
	}
	if !utf16.IsSurrogate(r) {
		return r, 6, nil
	}
	// try a low surrogate right after
	for s.end-s.pos < 12 {
		if !s.fill() {
			break
		}
	}
	if s.end-s.pos >= 12 && s.buf[s.pos+6] == '\\' && s.buf[s.pos+7] == 'u' {
		if r2, err := s.hex4(s.pos + 6); err == nil {
			if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
				return d, 12, nil
			}
		}
	}
	return utf8.RuneError, 6, nil
}

func (s *Scanner) hex4(at int) (rune, error) {
	for s.end-at < 6 {
		off := at - s.pos
		if !s.fill() {
			return 0, s.readErr("unicode escape")
		}
		at = s.pos + off
	}
	var r rune
	for _, c := range s.buf[at+2 : at+6] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, s.syntax("invalid unicode escape")
		}
	}
	return r, nil
}

// Number reads a number and returns its text exactly as sent (aliasing the
// buffer until the next call), after checking it against the JSON grammar.
func (s *Scanner) Number() ([]byte, error) {
	if _, err := s.PeekByte(); err != nil {
		return nil, err
	}
	s.tokBeg = s.pos
	i := s.pos
	for {
		for i < s.end {
			c := s.buf[i]
			if (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
				i++
				continue
			}
			goto done
		}
		off := i - s.tokBeg
		if !s.fill() {
			if s.rerr != nil && !errors.Is(s.rerr, io.EOF) {
				return nil, s.rerr
			}
			i = s.tokBeg + off
			goto done
		}
		i = s.tokBeg + off
	}
done:
	v := s.buf[s.tokBeg:i]
	s.tokBeg = -1
	if !ValidNumber(v) {
		return nil, s.syntax("invalid number %q", v)
	}
	s.pos = i
	return v, nil
}

// ValidNumber reports whether b is a JSON number.
func ValidNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return false
	}
	if b[i] == '0' {
		i++
	} else if b[i] >= '1' && b[i] <= '9' {
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	} else {
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == j {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == j {
			return false
		}
	}
	return i == len(b)
}

// Literal consumes true, false or null and returns its kind.
func (s *Scanner) Literal() (Kind, error) {
	c, err := s.PeekByte()
	if err != nil {
		return Invalid, err
	}
	var word string
	var k Kind
	switch c {
	case 't':
		word, k = "true", True
	case 'f':
		word, k = "false", False
	case 'n':
		word, k = "null", Null
	default:
		return Invalid, s.syntax("unexpected character %q", c)
	}
	for s.end-s.pos < len(word) {
		s.tokBeg = s.pos
		ok := s.fill()
		s.tokBeg = -1
		if !ok {
			return Invalid, s.readErr("literal")
		}
	}
	if string(s.buf[s.pos:s.pos+len(word)]) != word {
		return Invalid, s.syntax("invalid literal")
	}
	s.pos += len(word)
	return k, nil
}

// Skip consumes one value of any kind. A value nesting deeper than
// MaxDepth is an error (ErrTooDeep).
func (s *Scanner) Skip() error { return s.skip(0) }

// SkipDeep consumes one value of any kind like Skip, except that a value
// nesting deeper than MaxDepth is consumed too (without recursion, up to
// MaxSkipDepth levels) and reported as deep instead of failing, so the
// caller can carry on after it: a decoder rejects the one row that holds
// it rather than the whole document. Malformed JSON inside it is an error
// as in Skip.
func (s *Scanner) SkipDeep() (deep bool, err error) {
	s.deepOK = true
	err = s.skip(0)
	deep = s.wentDeep
	s.deepOK, s.wentDeep = false, false
	return deep, err
}

// MaxSkipDepth bounds the nesting SkipDeep consumes: past it a value is an
// error (ErrTooDeep) as in Skip. SkipDeep keeps one bit per open level.
const MaxSkipDepth = 1 << 24

func (s *Scanner) skip(depth int) error {
	if depth > MaxDepth {
		if !s.deepOK {
			return &SyntaxError{Offset: s.Offset(), Msg: ErrTooDeep.Error()}
		}
		s.wentDeep = true
		return s.skipNested()
	}
	k, err := s.PeekKind()
	if err != nil {
		return err
	}
	switch k {
	case Object:
		s.pos++
		for first := true; ; first = false {
			more, err := s.More('}', first)
			if err != nil {
				return err
			}
			if !more {
				return nil
			}
			if _, err := s.String(); err != nil {
				return err
			}
			if err := s.Expect(':'); err != nil {
				return err
			}
			if err := s.skip(depth + 1); err != nil {
				return err
			}
		}
	case Array:
		s.pos++
		for first := true; ; first = false {
			more, err := s.More(']', first)
			if err != nil {
				return err
			}
			if !more {
				return nil
			}
			if err := s.skip(depth + 1); err != nil {
				return err
			}
		}
	case StringKind:
		_, err := s.String()
		return err
	case Number:
		_, err := s.Number()
		return err
	default:
		_, err := s.Literal()
		return err
	}
}

// skipNested consumes one value of any depth with a loop: a stack of one bit
// per open container (set for an object) instead of a call per level.
func (s *Scanner) skipNested() error {
	var objs []uint64
	depth, first := 0, false
	for {
		k, err := s.PeekKind()
		if err != nil {
			return err
		}
		switch k {
		case Object, Array:
			if depth >= MaxSkipDepth {
				return &SyntaxError{Offset: s.Offset(), Msg: ErrTooDeep.Error()}
			}
			s.pos++
			if depth/64 == len(objs) {
				objs = append(objs, 0)
			}
			bit := uint64(1) << (depth % 64)
			if k == Object {
				objs[depth/64] |= bit
			} else {
				objs[depth/64] &^= bit
			}
			depth++
			first = true
		case StringKind:
			_, err = s.String()
		case Number:
			_, err = s.Number()
		default:
			_, err = s.Literal()
		}
		if err != nil {
			return err
		}
		// After a value or an opening: on to the next value, closing the
		// containers that end here.
		for depth > 0 {
			obj := objs[(depth-1)/64]>>((depth-1)%64)&1 == 1
			closing := byte(']')
			if obj {
				closing = '}'
			}
			more, err := s.More(closing, first)
			if err != nil {
				return err
			}
			first = false
			if !more {
				depth--
				continue
			}
			if obj {
				if _, err := s.String(); err != nil {
					return err
				}
				if err := s.Expect(':'); err != nil {
					return err
				}
			}
			break
		}
		if depth == 0 {
			return nil
		}
	}
}

// StartCapture begins recording raw input from the next non-whitespace byte.
// Captures do not nest.
func (s *Scanner) StartCapture() error {
	if _, err := s.PeekByte(); err != nil {
		return err
	}
	s.capturing = true
	s.capBeg = s.pos
	s.capBuf = s.capBuf[:0]
	return nil
}

// CaptureLen is the number of bytes captured so far; use it to remember
// sub-regions of the capture.
func (s *Scanner) CaptureLen() int { return len(s.capBuf) + s.pos - s.capBeg }

// EndCapture stops recording and returns the bytes consumed since
// StartCapture, exactly as received. They alias internal buffers until the
// next call.
func (s *Scanner) EndCapture() []byte {
	s.capturing = false
	if len(s.capBuf) == 0 {
		return s.buf[s.capBeg:s.pos]
	}
	s.capBuf = append(s.capBuf, s.buf[s.capBeg:s.pos]...)
	return s.capBuf
}

// Window returns the unread bytes already in the buffer (possibly none),
// for callers with a fast path over whole values; it aliases the buffer
// until the next call. Consume what was used with Advance.
func (s *Scanner) Window() []byte { return s.buf[s.pos:s.end] }

// Advance consumes n bytes of Window. The caller must have checked them:
// the scanner does not look at them again.
func (s *Scanner) Advance(n int) {
	if n < 0 || n > s.end-s.pos {
		panic("jsontok: Advance beyond the window")
	}
	s.pos += n
}

// Fill reads more input when fewer than n bytes (at most half the buffer)
// are unread in the buffer, and returns Window. Read errors are kept for
// the next token call to report.
func (s *Scanner) Fill(n int) []byte {
	n = min(n, len(s.buf)/2)
	for s.end-s.pos < n && s.tokBeg < 0 && !s.capturing {
		if !s.fill() {
			break
		}
	}
	return s.Window()
}
