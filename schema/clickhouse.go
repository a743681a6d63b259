package schema

import (
	"fmt"
	"strconv"
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
	// AlterIfNotExists: ALTER TABLE ... ADD COLUMN IF NOT EXISTS (18.16's
	// parser rejects it; certainly there from 20.1).
	AlterIfNotExists bool
	// ReplicatedComments: column COMMENTs on Replicated tables. 18.16
	// writes a comment to ZooKeeper in a form its own structure check then
	// rejects for every further replica ("Table structure in ZooKeeper is
	// too different from local table structure"); there the local tables
	// get no comments (the Distributed tables keep them).
	ReplicatedComments bool
}

// FeaturesFor returns the features of a server version.
func FeaturesFor(major, minor int) Features {
	at := func(M, m int) bool { return major > M || (major == M && minor >= m) }
	return Features{
		Major: major, Minor: minor,
		DateTime64:         at(20, 1),
		Bool:               at(21, 12),
		LowCardinality:     at(19, 0),
		AlterIfNotExists:   at(20, 1),
		ReplicatedComments: at(20, 1),
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
		// Elements of a JSON array may be null.
		return "Array(Nullable(" + base + "))"
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
	return t.createTable(db, t.Name, "", f, "ReplacingMergeTree", true, true)
}

// createTable renders CREATE TABLE IF NOT EXISTS db.name [ON CLUSTER] with
// t's columns (with their docs as comments if comments) and the given
// engine; keyed adds t's PARTITION BY and ORDER BY.
func (t *Table) createTable(db, name, cluster string, f Features, engine string, keyed, comments bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s.%s%s\n(\n", Quote(db), Quote(name), onCluster(cluster))
	for i, c := range t.Columns {
		fmt.Fprintf(&b, "    %s %s", Quote(c.Name), c.ClickHouseType(f))
		if c.Doc != "" && comments {
			fmt.Fprintf(&b, " COMMENT '%s'", escapeString(c.Doc))
		}
		if i < len(t.Columns)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString(")\n")
	b.WriteString("ENGINE = " + engine)
	if !keyed {
		return b.String()
	}
	b.WriteString("\n")
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

// AddColumnDDL renders ALTER TABLE ... ADD COLUMN for an evolved table on a
// single server. IF NOT EXISTS is used where the server knows it (not on
// 18.16, whose parser rejects it): callers add only columns missing from
// system.columns.
func (t *Table) AddColumnDDL(db string, c Column, f Features) string {
	return addColumn(db, t.Name, "", c, f)
}

func addColumn(db, table, cluster string, c Column, f Features) string {
	ifNotExists := ""
	if f.AlterIfNotExists {
		ifNotExists = "IF NOT EXISTS "
	}
	return fmt.Sprintf("ALTER TABLE %s.%s%s ADD COLUMN %s%s %s", Quote(db), Quote(table), onCluster(cluster), ifNotExists, Quote(c.Name), c.ClickHouseType(f))
}

// ---- clusters ----------------------------------------------------------------

// Target is where DDL goes: database DB on one server (Cluster empty), or on
// every server of the cluster named Cluster in the servers' remote_servers
// configuration. Features are those of the server the DDL is sent to (all
// servers of a cluster are expected to run the same release).
type Target struct {
	DB       string
	Cluster  string
	Features Features
}

// OnCluster reports whether the target is a cluster.
func (tg Target) OnCluster() bool { return tg.Cluster != "" }

// LocalSuffix ends the name of a table's per-shard (local) table on a
// cluster: the public name is the Distributed table over it.
const LocalSuffix = "_local"

// LocalName is the name of t's per-shard table on a cluster.
func (t *Table) LocalName() string { return t.Name + LocalSuffix }

// ReplicationPath is the ZooKeeper (Keeper) path of a local table's
// replicas: /clickhouse/tables/{shard}/<db>/<local>. The server expands the
// {shard} macro, so each shard replicates within itself; the replica name
// is the {replica} macro, which must be unique within a shard.
func ReplicationPath(db, local string) string {
	return "/clickhouse/tables/{shard}/" + db + "/" + local
}

// ShardingKey is the expression the Distributed table of t spreads rows over
// the shards with: cityHash64 of source and the table's entity, the first of
// instrument_name, account and endpoint that is in t.Key (cityHash64(source)
// when none is). The entity columns are a prefix of the ReplacingMergeTree
// key, so every version of a key lives on one shard and FINAL, argMax and
// per-instrument (per-account) window questions are answered correctly by
// each shard on its own:
//
//   - instruments, instrument_events: cityHash64(source, instrument_name) —
//     one instrument's whole history on one shard;
//   - inferred account tables and their child tables:
//     cityHash64(source, account) — one account's history (parents and
//     children together) on one shard;
//   - rejects, runs: cityHash64(source, endpoint) — small bookkeeping tables.
func (t *Table) ShardingKey() string {
	cols := t.ShardingColumns()
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = Quote(c)
	}
	return "cityHash64(" + strings.Join(q, ", ") + ")"
}

// ShardingColumns are the columns ShardingKey hashes (see there).
func (t *Table) ShardingColumns() []string {
	inKey := func(n string) bool {
		for _, k := range t.Key {
			if k == n {
				return true
			}
		}
		return false
	}
	cols := []string{}
	if inKey("source") {
		cols = append(cols, "source")
	}
	for _, e := range []string{"instrument_name", "account", "endpoint"} {
		if inKey(e) {
			cols = append(cols, e)
			break
		}
	}
	if len(cols) == 0 {
		// No known entity: the whole key keeps duplicates together.
		cols = append(cols, t.Key...)
	}
	return cols
}

// CreateDDL renders the statements that create t on tg. On one server: the
// ReplacingMergeTree of ClickHouseDDL. On a cluster, both ON CLUSTER:
//
//  1. <name>_local, a ReplicatedReplacingMergeTree with the same columns,
//     key and partitions, replicated within its shard under
//     ReplicationPath(db, <name>_local) with replica '{replica}';
//  2. <name>, a Distributed(cluster, db, <name>_local, ShardingKey) table
//     with the same columns: what loads insert into and queries read.
func (t *Table) CreateDDL(tg Target) []string {
	if !tg.OnCluster() {
		return []string{t.ClickHouseDDL(tg.DB, tg.Features)}
	}
	return []string{t.localDDL(tg), t.DistributedDDL(tg)}
}

func (t *Table) localDDL(tg Target) string {
	engine := fmt.Sprintf("ReplicatedReplacingMergeTree('%s', '{replica}')", escapeString(ReplicationPath(tg.DB, t.LocalName())))
	return t.createTable(tg.DB, t.LocalName(), tg.Cluster, tg.Features, engine, true, tg.Features.ReplicatedComments)
}

// DistributedDDL renders CREATE TABLE IF NOT EXISTS for t's Distributed
// table on a cluster (see CreateDDL).
func (t *Table) DistributedDDL(tg Target) string {
	engine := fmt.Sprintf("Distributed('%s', '%s', '%s', %s)", escapeString(tg.Cluster), escapeString(tg.DB), escapeString(t.LocalName()), t.ShardingKey())
	return t.createTable(tg.DB, t.Name, tg.Cluster, tg.Features, engine, false, true)
}

// AddColumnStatements renders the statements that add column c (already in
// t.Columns) to t on tg. On one server: AddColumnDDL. On a cluster: ALTER
// TABLE <name>_local ON CLUSTER ADD COLUMN (a Replicated table: the server
// runs it once per shard and replication applies it to every replica), then
// the Distributed table is dropped and created again ON CLUSTER with t's
// columns — 18.16 refuses ALTER ... ON CLUSTER of a non-replicated table on
// a cluster whose shards use internal_replication ("Table isn't replicated,
// but shard #N is replicated according to its cluster definition"). A
// Distributed table holds no data when loads insert synchronously, so
// nothing is lost; readers see it missing for a moment.
func (t *Table) AddColumnStatements(tg Target, c Column) []string {
	if !tg.OnCluster() {
		return []string{t.AddColumnDDL(tg.DB, c, tg.Features)}
	}
	return []string{addColumn(tg.DB, t.LocalName(), tg.Cluster, c, tg.Features)}
}

// RecreateDistributedDDL renders the statements that replace t's
// Distributed table with one of t's current columns (see
// AddColumnStatements).
func (t *Table) RecreateDistributedDDL(tg Target) []string {
	return []string{
		fmt.Sprintf("DROP TABLE IF EXISTS %s.%s%s", Quote(tg.DB), Quote(t.Name), onCluster(tg.Cluster)),
		t.DistributedDDL(tg),
	}
}

// CreateDatabaseDDL renders CREATE DATABASE IF NOT EXISTS for tg.
func CreateDatabaseDDL(tg Target) string {
	return "CREATE DATABASE IF NOT EXISTS " + Quote(tg.DB) + onCluster(tg.Cluster)
}

// onCluster is " ON CLUSTER `name`", or "" for a single server.
func onCluster(cluster string) string {
	if cluster == "" {
		return ""
	}
	return " ON CLUSTER " + Quote(cluster)
}

func escapeString(s string) string {
	return strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s)
}

// NewestKnownVersion is the newest ClickHouse release this build's DDL is
// tested on (through chDB, see README "Query the history in SQL"); what
// `optlake migrate --print` renders for by default.
const NewestKnownVersion = "26.7"

// ParseVersion parses a server version "MAJOR.MINOR" (further parts, as in
// "24.8.4.13", are ignored) into its features.
func ParseVersion(v string) (Features, error) {
	parts := strings.Split(strings.TrimSpace(v), ".")
	if len(parts) < 2 {
		return Features{}, fmt.Errorf("server version %q: want MAJOR.MINOR, e.g. %s", v, NewestKnownVersion)
	}
	var n [2]int
	for i := range n {
		x, err := strconv.Atoi(parts[i])
		if err != nil || x < 0 {
			return Features{}, fmt.Errorf("server version %q: want MAJOR.MINOR, e.g. %s", v, NewestKnownVersion)
		}
		n[i] = x
	}
	if n[0] < 18 {
		return Features{}, fmt.Errorf("server version %q: ClickHouse before 18.16 is not supported", v)
	}
	return FeaturesFor(n[0], n[1]), nil
}
