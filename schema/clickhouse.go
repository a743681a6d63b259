package schema

import (
	"fmt"
	"slices"
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

// SnapshotMs is the column that gives a table's key millisecond precision
// on servers whose time columns are DateTime (seconds: 18.16, 19.x): the
// millisecond of snapshot_time, 0-999, a UInt16 right after snapshot_time
// in the columns and in ORDER BY. Without it two snapshots less than a
// second apart share a key there, and the ReplacingMergeTree keeps one.
// Where time columns are DateTime64(3) (20.1+) snapshot_time itself holds
// the milliseconds: no such column, the key is the table's Key as is.
//
// It is a ClickHouse-only column (not in Table.Columns: Arrow and Parquet
// keep the full instant in snapshot_time); the ClickHouse sink fills it
// from snapshot_time. Rows that predate migration 5 have 0 (the server
// never had their milliseconds).
const SnapshotMs = "snapshot_ms"

// SnapshotMsType is SnapshotMs's ClickHouse type.
const SnapshotMsType = "UInt16"

// HasSnapshotMs reports whether t has the SnapshotMs column on a server
// with f: time columns without milliseconds and snapshot_time in t's key.
func (t *Table) HasSnapshotMs(f Features) bool {
	if f.DateTime64 {
		return false
	}
	for _, k := range t.Key {
		if k == "snapshot_time" {
			return true
		}
	}
	return false
}

// CHColumn is a column as ClickHouse declares it: name, ClickHouse type and
// comment.
type CHColumn struct {
	Name, Type, Doc string
}

// snapshotMsColumn is SnapshotMs as declared.
var snapshotMsColumn = CHColumn{Name: SnapshotMs, Type: SnapshotMsType, Doc: "millisecond of snapshot_time (0-999): part of the key where time columns have second precision"}

// ClickHouseColumns are t's columns as ClickHouse declares them on a server
// with f: t.Columns, plus SnapshotMs right after snapshot_time where
// HasSnapshotMs.
func (t *Table) ClickHouseColumns(f Features) []CHColumn {
	out := make([]CHColumn, 0, len(t.Columns)+1)
	ms := t.HasSnapshotMs(f)
	for _, c := range t.Columns {
		out = append(out, CHColumn{Name: c.Name, Type: c.ClickHouseType(f), Doc: c.Doc})
		if ms && c.Name == "snapshot_time" {
			out = append(out, snapshotMsColumn)
		}
	}
	return out
}

// ClickHouseKey is t's ORDER BY on a server with f: t.Key, with SnapshotMs
// right after snapshot_time where HasSnapshotMs.
func (t *Table) ClickHouseKey(f Features) []string {
	return withSnapshotMs(t.Key, t.HasSnapshotMs(f))
}

func withSnapshotMs(key []string, ms bool) []string {
	out := make([]string, 0, len(key)+1)
	for _, k := range key {
		out = append(out, k)
		if ms && k == "snapshot_time" {
			out = append(out, SnapshotMs)
		}
	}
	return out
}

// ClickHouseDDL renders CREATE TABLE for a single server: a
// ReplacingMergeTree ordered by the table's key (ClickHouseKey: one row
// per key after merges; read with FINAL), partitioned by month of
// PartitionTime.
func (t *Table) ClickHouseDDL(db string, f Features) string {
	return t.createTable(db, t.Name, "", f, "ReplacingMergeTree", true, true)
}

// createTable renders CREATE TABLE IF NOT EXISTS db.name [ON CLUSTER] with
// t's columns (with their docs as comments if comments) and the given
// engine; keyed adds t's PARTITION BY and ORDER BY.
func (t *Table) createTable(db, name, cluster string, f Features, engine string, keyed, comments bool) string {
	return t.createTableAt(db, name, cluster, f, engine, keyed, comments, t.HasSnapshotMs(f))
}

// createTableAt is createTable with or without the SnapshotMs column
// (migrations 1 to 3 create their tables as released, without it;
// migration 5 adds it).
func (t *Table) createTableAt(db, name, cluster string, f Features, engine string, keyed, comments, ms bool) string {
	var key []string
	if keyed {
		key = withSnapshotMs(t.Key, ms)
	}
	cols := t.ClickHouseColumns(f)
	if !ms {
		cols = slices.DeleteFunc(cols, func(c CHColumn) bool { return c.Name == SnapshotMs })
	}
	return createTable(db, name, cluster, cols, engine, t.PartitionTime, key, comments)
}

// createTable renders CREATE TABLE IF NOT EXISTS db.name [ON CLUSTER] with
// cols and engine; a non-empty key adds PARTITION BY toYYYYMM(partition)
// (when partition is set) and ORDER BY key.
func createTable(db, name, cluster string, cols []CHColumn, engine, partition string, key []string, comments bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s.%s%s\n(\n", Quote(db), Quote(name), onCluster(cluster))
	for i, c := range cols {
		fmt.Fprintf(&b, "    %s %s", Quote(c.Name), c.Type)
		if c.Doc != "" && comments {
			fmt.Fprintf(&b, " COMMENT '%s'", escapeString(c.Doc))
		}
		if i < len(cols)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString(")\n")
	b.WriteString("ENGINE = " + engine)
	if len(key) == 0 {
		return b.String()
	}
	b.WriteString("\n")
	if partition != "" {
		fmt.Fprintf(&b, "PARTITION BY toYYYYMM(%s)\n", Quote(partition))
	}
	keys := make([]string, len(key))
	for i, k := range key {
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
	return t.createDDL(tg, t.Name, t.HasSnapshotMs(tg.Features))
}

// createDDL is CreateDDL under the public name name (its local table
// name+LocalSuffix), with or without the SnapshotMs column.
func (t *Table) createDDL(tg Target, name string, ms bool) []string {
	if !tg.OnCluster() {
		return []string{t.createTableAt(tg.DB, name, "", tg.Features, "ReplacingMergeTree", true, true, ms)}
	}
	local := name + LocalSuffix
	engine := fmt.Sprintf("ReplicatedReplacingMergeTree('%s', '{replica}')", escapeString(ReplicationPath(tg.DB, local)))
	return []string{
		t.createTableAt(tg.DB, local, tg.Cluster, tg.Features, engine, true, tg.Features.ReplicatedComments, ms),
		t.distributedDDL(tg, name, local, ms),
	}
}

// DistributedDDL renders CREATE TABLE IF NOT EXISTS for t's Distributed
// table on a cluster (see CreateDDL).
func (t *Table) DistributedDDL(tg Target) string {
	return t.distributedDDL(tg, t.Name, t.LocalName(), t.HasSnapshotMs(tg.Features))
}

func (t *Table) distributedDDL(tg Target, name, local string, ms bool) string {
	engine := fmt.Sprintf("Distributed('%s', '%s', '%s', %s)", escapeString(tg.Cluster), escapeString(tg.DB), escapeString(local), t.ShardingKey())
	return t.createTableAt(tg.DB, name, tg.Cluster, tg.Features, engine, false, true, ms)
}

// AddColumnStatements renders the statements that add column c (already in
// t.Columns) to t on tg. On one server: AddColumnDDL. On a cluster the
// column goes to the local tables (the Distributed table is then made anew,
// RecreateDistributedDDL: 18.16 refuses ALTER ... ON CLUSTER of a
// non-replicated table on a cluster whose shards use internal_replication,
// "Table isn't replicated, but shard #N is replicated according to its
// cluster definition"; a Distributed table holds no data when loads insert
// synchronously, so nothing is lost; readers see it missing for a moment):
//
//   - where the server parses IF NOT EXISTS (AlterPerShard false): ALTER
//     TABLE <name>_local ON CLUSTER ADD COLUMN IF NOT EXISTS — idempotent,
//     so a replica that runs it after replication brought the column, or a
//     second attempt, changes nothing;
//   - otherwise (18.16): ALTER TABLE <name>_local ADD COLUMN without ON
//     CLUSTER, to be run on one replica of every shard that lacks the
//     column (see AlterPerShard).
func (t *Table) AddColumnStatements(tg Target, c Column) []string {
	switch {
	case !tg.OnCluster():
		return []string{t.AddColumnDDL(tg.DB, c, tg.Features)}
	case tg.AlterPerShard():
		return []string{addColumn(tg.DB, t.LocalName(), "", c, tg.Features)}
	}
	return []string{addColumn(tg.DB, t.LocalName(), tg.Cluster, c, tg.Features)}
}

// AlterPerShard reports whether AddColumnStatements on tg are to be run on
// one replica of each shard that lacks the column, rather than once ON
// CLUSTER: on a cluster whose servers have no ADD COLUMN IF NOT EXISTS
// (18.16). There an ALTER ... ON CLUSTER of a Replicated table is run by
// each replica's DDL worker, which take turns through a ZooKeeper lock per
// shard that a slow replica (a busy machine, a ZooKeeper session lost)
// gives up or loses: the replica that runs it after replication brought
// the column fails ("column with this name already exists"), another may
// never finish, and every later ON CLUSTER query waits behind it in that
// server's DDL queue. The statement on one replica is replicated to the
// shard's others by the table itself.
func (tg Target) AlterPerShard() bool { return tg.OnCluster() && !tg.Features.AlterIfNotExists }

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
