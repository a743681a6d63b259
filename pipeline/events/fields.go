package events

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/optlake/optlake/schema"
)

// field is one compared column of schema.Instruments.
type field struct {
	name string
	typ  schema.Type
}

// compared reports whether a column of schema.Instruments is compared: the
// venue fields (schema's JSON kind; not the meta columns nor the columns
// derived from other fields) except the key and the index price, which
// moves every snapshot (history, not events).
func compared(c schema.Column) bool {
	return c.JSON != schema.NotJSON && !slices.Contains(schema.Instruments.Key, c.Name) && c.Name != "index_price"
}

// fields are the compared columns in schema order (alphabetical for the venue
// fields), which is also the order of their items in a payload. A payload is
// the items of fields followed by one item holding expiration_time (ms).
var fields = func() []field {
	var out []field
	for _, c := range schema.Instruments.Columns {
		if !compared(c) {
			continue
		}
		switch {
		case c.List:
			panic("events: list column " + c.Name + " in schema.Instruments is not supported")
		case c.Type == schema.TimestampMs:
			panic("events: timestamp column " + c.Name + " in schema.Instruments is neither compared nor excluded")
		}
		out = append(out, field{name: c.Name, typ: c.Type})
	}
	if len(out) > 250 {
		panic("events: too many compared fields")
	}
	return out
}()

// fieldSignature identifies the compared field set in state files.
var fieldSignature = func() string {
	var b strings.Builder
	for i, f := range fields {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s:%s", f.name, f.typ)
	}
	return b.String() + ";expiration_time:timestamp_ms"
}()

func fieldIndex(name string) int {
	for i, f := range fields {
		if f.name == name {
			return i
		}
	}
	return -1
}

var (
	isActiveField = fieldIndex("is_active")
	deployedField = fieldIndex("deployed")
)

// Payload items. Every value has exactly one encoding, so two items are equal
// as bytes exactly when their values are equal:
//
//	null                     0x00
//	string                   0x01 uvarint(len) bytes
//	float64, integral        0x02 zigzag varint (|v| < 2^53, not -0)
//	float64, other           0x01 8 bytes little-endian IEEE 754 bits
//	int64, timestamp (ms)    0x01 zigzag varint
//	bool                     0x01 false, 0x02 true
const (
	tagNull  = 0x00
	tagValue = 0x01
	tagInt   = 0x02 // integral float64
	tagTrue  = 0x02
)

var errItem = errors.New("malformed payload item")

// nextItem splits the item of a value of type t off the front of p.
func nextItem(p []byte, t schema.Type) (item, rest []byte, err error) {
	if len(p) == 0 {
		return nil, nil, errItem
	}
	n := 1
	switch tag := p[0]; {
	case tag == tagNull:
	case t == schema.Bool:
		if tag != tagValue && tag != tagTrue {
			return nil, nil, errItem
		}
	case t == schema.String:
		if tag != tagValue {
			return nil, nil, errItem
		}
		l, k := binary.Uvarint(p[1:])
		if k <= 0 || l > uint64(len(p)-1-k) {
			return nil, nil, errItem
		}
		n += k + int(l)
	case t == schema.Float64 && tag == tagValue:
		if len(p) < 9 {
			return nil, nil, errItem
		}
		n += 8
	case t == schema.Float64 && tag == tagInt, t == schema.Int64 && tag == tagValue, t == schema.TimestampMs && tag == tagValue:
		_, k := binary.Varint(p[1:])
		if k <= 0 {
			return nil, nil, errItem
		}
		n += k
	default:
		return nil, nil, errItem
	}
	return p[:n], p[n:], nil
}

// mustItem is nextItem on a payload known to be valid (built here or checked
// by validPayload on load).
func mustItem(p []byte, t schema.Type) (item, rest []byte) {
	item, rest, err := nextItem(p, t)
	if err != nil {
		panic("events: " + err.Error())
	}
	return item, rest
}

// validPayload checks that p is a well-formed payload.
func validPayload(p []byte) error {
	var err error
	for _, f := range fields {
		if _, p, err = nextItem(p, f.typ); err != nil {
			return fmt.Errorf("field %s: %w", f.name, err)
		}
	}
	if _, p, err = nextItem(p, schema.TimestampMs); err != nil {
		return fmt.Errorf("expiration_time: %w", err)
	}
	if len(p) != 0 {
		return fmt.Errorf("%d bytes after the last field", len(p))
	}
	return nil
}

// itemAt returns the item of compared field k of payload p.
func itemAt(p []byte, k int) []byte {
	var it []byte
	for i := 0; i <= k; i++ {
		it, p = mustItem(p, fields[i].typ)
	}
	return it
}

// expirationMs returns the expiration time item of payload p.
func expirationMs(p []byte) (int64, bool) {
	for _, f := range fields {
		_, p = mustItem(p, f.typ)
	}
	if p[0] == tagNull {
		return 0, false
	}
	v, _ := binary.Varint(p[1:])
	return v, true
}

// boolOf decodes a bool item.
func boolOf(it []byte) (v, null bool) { return it[0] == tagTrue, it[0] == tagNull }

// appendRender appends the event text of the item of a value of type t to
// dst; null reports a null item (nothing appended).
func appendRender(dst, it []byte, t schema.Type) (out []byte, null bool) {
	if it[0] == tagNull {
		return dst, true
	}
	switch t {
	case schema.String:
		_, k := binary.Uvarint(it[1:])
		return append(dst, it[1+k:]...), false
	case schema.Bool:
		return strconv.AppendBool(dst, it[0] == tagTrue), false
	case schema.Float64:
		if it[0] == tagInt {
			v, _ := binary.Varint(it[1:])
			return strconv.AppendFloat(dst, float64(v), 'g', -1, 64), false
		}
		return strconv.AppendFloat(dst, math.Float64frombits(binary.LittleEndian.Uint64(it[1:])), 'g', -1, 64), false
	default: // Int64, TimestampMs
		v, _ := binary.Varint(it[1:])
		return strconv.AppendInt(dst, v, 10), false
	}
}

// diffPayloads calls fn with each compared field whose items differ between
// payloads a and b (field order).
func diffPayloads(a, b []byte, fn func(k int, ai, bi []byte)) {
	var x, y []byte
	for k, f := range fields {
		x, a = mustItem(a, f.typ)
		y, b = mustItem(b, f.typ)
		if !bytes.Equal(x, y) {
			fn(k, x, y)
		}
	}
}
