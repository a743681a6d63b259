package schema

import (
	"fmt"
	"strings"
)

// Features are the ClickHouse capabilities DDL depends on, chosen by server
// version: Debian ships 18.16, users run 24.x.
type Features struct {
	Major, Minor int
	// DateTime64 (20.1+) keeps milliseconds; without it time columns are
	// DateTime with second precision (raw epoch columns stay exact).
	DateTime64 bool
	// Bool (21.12+); otherwise UInt8 0/1.
	Bool bool
	// LowCardinality is stable from 19.x; on 18.16 it is experimental and is
	// not used.
	LowCardinality bool
}

// FeaturesFor returns the features of a server version.
func FeaturesFor(major, minor int) Features {
	at := func(M, m int) bool { return major > M || (major == M && minor >= m) }
	return Features{
		Major: major, Minor: minor,
		DateTime64:     at(20, 1),
		Bool:           at(21, 12),
		LowCardinality: at(19, 0),
	}
}

// Quote quotes an identifier for ClickHouse.
func Quote(id string) string {
	return "`" + strings.ReplaceAll(strings.ReplaceAll(id, `\`, `\\`), "`", "\\`") + "`"
}

// ClickHouseType is the column's ClickHouse type on a server with f.
func (c Column) ClickHouseType(f Features) string {
	var base string
	switch c.Type {
	case String:
		base = "String"
	case Float64:
		base = "Float64"
	case Int64:
		base = "Int64"
	case Bool:
		if f.Bool {
			base = "Bool"
		} else {
			base = "UInt8"
		}
	case TimestampMs:
		if f.DateTime64 {
			base = "DateTime64(3, 'UTC')"
		} else {
			base = "DateTime('UTC')"
		}
	default:
		panic(fmt.Sprintf("schema: no ClickHouse type for %v", c.Type))
	}
	if c.List {
		return "Array(" + base + ")"
	}
	if c.Nullable {
		base = "Nullable(" + base + ")"
	}
	if c.LowCardinality && f.LowCardinality && c.Type == String {
		base = "LowCardinality(" + base + ")"
	}
	return base
}

// TimeRange is the span of instants a ClickHouse time column can hold, in
// epoch milliseconds; values outside load as null, never clamped.
func (f Features) TimeRange() (minMs, maxMs int64) {
	if f.DateTime64 {
		// DateTime64 covers 1900-01-01 to 2299-12-31.
		return -2208988800000, 10413791999999
	}
	// DateTime is a UInt32 of seconds: 1970-01-01 to 2106-02-07.
	return 0, 4294967295999
}

// ClickHouseDDL renders CREATE TABLE for a single server: a
// ReplacingMergeTree ordered by the table's key (one row per key after
// merges; read with FINAL), partitioned by month of PartitionTime.
func (t *Table) ClickHouseDDL(db string, f Features) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s.%s\n(\n", Quote(db), Quote(t.Name))
	for i, c := range t.Columns {
		fmt.Fprintf(&b, "    %s %s", Quote(c.Name), c.ClickHouseType(f))
		if c.Doc != "" {
			fmt.Fprintf(&b, " COMMENT '%s'", escapeString(c.Doc))
		}
		if i < len(t.Columns)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString(")\n")
	b.WriteString("ENGINE = ReplacingMergeTree\n")
	if t.PartitionTime != "" {
		fmt.Fprintf(&b, "PARTITION BY toYYYYMM(%s)\n", Quote(t.PartitionTime))
	}
	keys := make([]string, len(t.Key))
	for i, k := range t.Key {
		keys[i] = Quote(k)
	}
	fmt.Fprintf(&b, "ORDER BY (%s)", strings.Join(keys, ", "))
	return b.String()
}

// AddColumnDDL renders ALTER TABLE ... ADD COLUMN for an evolved table.
func (t *Table) AddColumnDDL(db string, c Column, f Features) string {
	return fmt.Sprintf("ALTER TABLE %s.%s ADD COLUMN IF NOT EXISTS %s %s", Quote(db), Quote(t.Name), Quote(c.Name), c.ClickHouseType(f))
}

func escapeString(s string) string {
	return strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s)
}
