package clickhouse

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/sinktest"
)

// serverReader reads a table back from the server, with FINAL.
type serverReader struct {
	c  *testenv.ClickHouse
	s  *Sink
	db string
}

func (r serverReader) features(t testing.TB) schema.Features {
	f, err := r.s.Features(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (r serverReader) Rows(t testing.TB, tb *schema.Table) []sinktest.Row {
	t.Helper()
	f := r.features(t)
	cols := make([]string, len(tb.Columns))
	for i, c := range tb.Columns {
		q := schema.Quote(c.Name)
		switch {
		case c.Type == schema.TimestampMs && f.DateTime64:
			cols[i] = "toUnixTimestamp64Milli(" + q + ")"
		case c.Type == schema.TimestampMs:
			cols[i] = "toInt64(toUnixTimestamp(" + q + ")) * 1000"
		case c.Type == schema.Bool:
			cols[i] = "toUInt8(" + q + ")"
		default:
			cols[i] = q
		}
	}
	out := query(t, r.c, fmt.Sprintf("SELECT %s FROM %s.%s FINAL FORMAT TSV", strings.Join(cols, ", "), r.db, schema.Quote(tb.Name)))
	if out == "" {
		return nil
	}
	var rows []sinktest.Row
	for _, line := range strings.Split(out, "\n") {
		vals := strings.Split(line, "\t")
		if len(vals) != len(tb.Columns) {
			t.Fatalf("%s: %d values in %q", tb.Name, len(vals), line)
		}
		row := make(sinktest.Row, len(vals))
		for i, v := range vals {
			row[i] = tsvValue(t, tb.Columns[i], v)
		}
		rows = append(rows, row)
	}
	return rows
}

func tsvValue(t testing.TB, c schema.Column, v string) string {
	if v == `\N` {
		return sinktest.Null
	}
	switch c.Type {
	case schema.Float64:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		return sinktest.Float(f)
	case schema.Bool:
		return strconv.FormatBool(v == "1")
	case schema.String:
		return unescapeTSV(v)
	}
	return v
}

// unescapeTSV undoes ClickHouse's TabSeparated escaping.
func unescapeTSV(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case '0':
			b.WriteByte(0)
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func (r serverReader) Time(ms int64) (int64, bool) {
	f, err := r.s.Features(context.Background())
	if err != nil {
		panic(err)
	}
	lo, hi := f.TimeRange()
	if ms < lo || ms > hi {
		return 0, false
	}
	if !f.DateTime64 {
		ms = floorDiv(ms, 1000) * 1000
	}
	return ms, true
}

func TestConformance(t *testing.T) {
	c := testenv.SharedClickHouse(t)
	sinktest.Run(t, sinktest.Harness{
		PartialAbort: true,
		New: func(t testing.TB) (sinks.Sink, sinktest.Reader) {
			db := testenv.FreshDatabase(t, c)
			s, err := New(Options{DSN: c.DSN(db), Migrate: true})
			if err != nil {
				t.Fatal(err)
			}
			return s, serverReader{c: c, s: s, db: db}
		},
	})
}
