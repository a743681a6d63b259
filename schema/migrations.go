package schema

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// Migration is one versioned step of the ClickHouse schema. Statements are
// rendered for the target database and server features, and are idempotent
// (IF NOT EXISTS), so a half-applied migration can be re-run.
type Migration struct {
	Version int
	Name    string
	// Statements renders the migration for database db on one server; it
	// is Render(Target{DB: db, Features: f}).
	Statements func(db string, f Features) []string

	steps []step // what the migration creates, for any Target
}

// step is one object a migration creates: a table (one statement on a
// server, a local and a Distributed table on a cluster) or a view. A view
// step with replace set first drops the view of that name (a view holds no
// data), so a later migration can give an existing view a new definition.
type step struct {
	table   *Table
	view    func(tg Target) string
	replace string
	// rekey: the table gets the SnapshotMs column in its key where time
	// columns have second precision (Rekey); nothing elsewhere.
	rekey *Table
	// secondTimesOnly: the step renders nothing on servers with
	// DateTime64.
	secondTimesOnly bool
}

func newMigration(version int, name string, steps ...step) Migration {
	m := Migration{Version: version, Name: name, steps: steps}
	m.Statements = func(db string, f Features) []string { return m.Render(Target{DB: db, Features: f}) }
	return m
}

// Render returns the migration's statements for tg: on a cluster every
// statement is ON CLUSTER, tables are created as Replicated local tables
// under Distributed ones (Table.CreateDDL), and views read the Distributed
// tables. A table rebuild (migration 5) renders as Rebuild.All, the
// statements for a table still at the old layout.
func (m Migration) Render(tg Target) []string {
	var out []string
	for _, a := range m.Actions(tg) {
		if a.Rebuild != nil {
			out = append(out, a.Rebuild.All()...)
		} else {
			out = append(out, a.SQL)
		}
	}
	return out
}

// Action is one thing a migration does: run a statement (SQL), or rebuild
// a table (Rebuild), which migrate does resumably (see Rebuild).
type Action struct {
	SQL     string
	Rebuild *Rebuild
}

// Actions are the migration's actions on tg, in order.
func (m Migration) Actions(tg Target) []Action {
	var out []Action
	add := func(sql ...string) {
		for _, s := range sql {
			out = append(out, Action{SQL: s})
		}
	}
	for _, s := range m.steps {
		switch {
		case s.secondTimesOnly && tg.Features.DateTime64:
		case s.rekey != nil:
			if s.rekey.HasSnapshotMs(tg.Features) {
				r := Rekey(tg, s.rekey, nil)
				out = append(out, Action{Rebuild: &r})
			}
		case s.table != nil:
			// As released: migrations 1 to 3 predate SnapshotMs.
			add(s.table.createDDL(tg, s.table.Name, false)...)
		case s.replace != "":
			add(dropView(tg, s.replace), s.view(tg))
		default:
			add(s.view(tg))
		}
	}
	return out
}

// Checksum identifies the rendered statements, so a changed migration is
// noticed.
func (m Migration) Checksum(db string, f Features) string {
	return m.ChecksumFor(Target{DB: db, Features: f})
}

// ChecksumFor is Checksum for any target. The database's and the cluster's
// names do not enter it.
func (m Migration) ChecksumFor(tg Target) string {
	var names []string
	if tg.OnCluster() {
		names = append(names, onCluster(tg.Cluster), "'"+escapeString(tg.Cluster)+"'",
			"/"+escapeString(tg.DB)+"/", "'"+escapeString(tg.DB)+"'")
	}
	names = append(names, Quote(tg.DB)+".")
	h := sha256.New()
	for _, s := range m.Render(tg) {
		for _, n := range names {
			s = strings.ReplaceAll(s, n, "")
		}
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Migrations lists every migration in order. Append only: never edit a
// released one, add the next version instead.
func Migrations() []Migration {
	return []Migration{
		newMigration(1, "instruments, rejects, runs and history views",
			step{table: Instruments}, step{table: Rejects}, step{table: Runs},
			step{view: instrumentsLatestViewV1}, step{view: indexPriceHistoryView}),
		newMigration(2, "instrument_events", step{table: InstrumentEvents}),
		newMigration(3, "inferred_columns", step{table: InferredColumns}),
		newMigration(4, "instruments_latest right on every server version (ALL INNER JOIN)",
			step{view: instrumentsLatestView, replace: "instruments_latest"}),
		newMigration(5, "snapshots distinct to the millisecond where time columns have seconds (snapshot_ms in the key)",
			step{rekey: Instruments}, step{rekey: Rejects}, step{rekey: Runs}, step{rekey: InstrumentEvents},
			step{view: instrumentsLatestViewMs, replace: "instruments_latest", secondTimesOnly: true},
			step{view: indexPriceHistoryViewMs, replace: "index_price_history", secondTimesOnly: true}),
	}
}

// RekeysAccountTables reports whether migration version v also rebuilds
// the inferred (account) tables the database holds, which no static
// script can list: the ClickHouse sink's migrate finds them (tables with
// the AccountKey columns) and runs Rekey for each, with the columns the
// server has.
func RekeysAccountTables(v int) bool { return v == 5 }

// ---- migration 5: the millisecond key ----------------------------------------

// Rebuild is how a table gets a new sort key, which no ClickHouse release
// can ALTER in place (18.16 cannot even add a column to ORDER BY): copy it
// into a table of the new layout, swap the names, drop the old one. Each
// group is idempotent; the ClickHouse sink looks at what exists to resume
// after a crash (Resume) and otherwise runs All. Loads must not run
// meanwhile (rows inserted into the old table after its copy are lost).
//
// Names: the new table is <name>__v5 while it fills (<name>__v5_local on a
// cluster), the old one <name>__v4 (<name>__v4_local) between the swap
// and its drop.
type Rebuild struct {
	Table, New, Old string // public names: the table, the copy, the old table after the swap
	// Copy drops a copy left by an interrupted attempt, creates the new
	// table and copies every row into it (SnapshotMs 0: the old rows have
	// no milliseconds).
	Copy []string
	// Swap renames the old table away and the copy in its place in one
	// RENAME (on a cluster the local tables).
	Swap []string
	// Rename gives the copy the table's name, to finish a swap a crash
	// interrupted after the old table was renamed away.
	Rename []string
	// Redistribute, on a cluster only, creates the Distributed table anew
	// over the new local table (with its columns).
	Redistribute []string
	// Cleanup drops the old table (and on a cluster the copy's
	// Distributed table).
	Cleanup []string
}

// All is Copy, Swap, Redistribute and Cleanup: the whole rebuild of a
// table at the old layout.
func (r Rebuild) All() []string { return slices.Concat(r.Copy, r.Swap, r.Redistribute, r.Cleanup) }

// Rekey renders the Rebuild that gives t the SnapshotMs column and key on
// tg. cols are the table's columns as the server has them, in order,
// without SnapshotMs (nil: t's own, as migrations 1 to 3 created them);
// t gives the name, the key, the partition and the sharding key.
func Rekey(tg Target, t *Table, cols []CHColumn) Rebuild {
	if cols == nil {
		for _, c := range t.Columns {
			cols = append(cols, CHColumn{Name: c.Name, Type: c.ClickHouseType(tg.Features), Doc: c.Doc})
		}
	}
	var withMs []CHColumn
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = Quote(c.Name)
		withMs = append(withMs, c)
		if c.Name == "snapshot_time" {
			withMs = append(withMs, snapshotMsColumn)
		}
	}
	key := withSnapshotMs(t.Key, true)
	r := Rebuild{Table: t.Name, New: t.Name + "__v5", Old: t.Name + "__v4"}
	db := Quote(tg.DB)
	colList := strings.Join(names, ", ")
	name := func(n string) string { return db + "." + Quote(n) }
	copyRows := fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s", name(r.New), colList, colList, name(t.Name))
	if !tg.OnCluster() {
		r.Copy = []string{
			"DROP TABLE IF EXISTS " + name(r.New),
			createTable(tg.DB, r.New, "", withMs, "ReplacingMergeTree", t.PartitionTime, key, true),
			copyRows,
		}
		r.Swap = []string{fmt.Sprintf("RENAME TABLE %s TO %s, %s TO %s", name(t.Name), name(r.Old), name(r.New), name(t.Name))}
		r.Rename = []string{fmt.Sprintf("RENAME TABLE %s TO %s", name(r.New), name(t.Name))}
		r.Cleanup = []string{"DROP TABLE IF EXISTS " + name(r.Old)}
		return r
	}
	on := onCluster(tg.Cluster)
	local, newLocal, oldLocal := t.Name+LocalSuffix, r.New+LocalSuffix, r.Old+LocalSuffix
	engine := fmt.Sprintf("ReplicatedReplacingMergeTree('%s', '{replica}')", escapeString(ReplicationPath(tg.DB, newLocal)))
	dist := func(n, over string) string {
		return createTable(tg.DB, n, tg.Cluster, withMs, fmt.Sprintf("Distributed('%s', '%s', '%s', %s)", escapeString(tg.Cluster), escapeString(tg.DB), escapeString(over), t.ShardingKey()), "", nil, true)
	}
	localCols := withMs
	if !tg.Features.ReplicatedComments {
		localCols = nil
		for _, c := range withMs {
			c.Doc = ""
			localCols = append(localCols, c)
		}
	}
	r.Copy = []string{
		"DROP TABLE IF EXISTS " + name(r.New) + on,
		"DROP TABLE IF EXISTS " + name(newLocal) + on,
		createTable(tg.DB, newLocal, tg.Cluster, localCols, engine, t.PartitionTime, key, true),
		dist(r.New, newLocal),
		copyRows,
	}
	r.Swap = []string{fmt.Sprintf("RENAME TABLE %s TO %s, %s TO %s%s", name(local), name(oldLocal), name(newLocal), name(local), on)}
	r.Rename = []string{fmt.Sprintf("RENAME TABLE %s TO %s%s", name(newLocal), name(local), on)}
	r.Redistribute = []string{"DROP TABLE IF EXISTS " + name(t.Name) + on, dist(t.Name, local)}
	r.Cleanup = []string{"DROP TABLE IF EXISTS " + name(r.New) + on, "DROP TABLE IF EXISTS " + name(oldLocal) + on}
	return r
}

// AccountTable is an inferred table as the server has it, for Rekey: its
// name with AccountKey and AccountPartitionTime.
func AccountTable(name string) *Table {
	return &Table{Name: name, Key: AccountKey, PartitionTime: AccountPartitionTime}
}

// dropView renders DROP TABLE IF EXISTS for a view on tg. DROP TABLE, not
// DROP VIEW: 18.16 drops a view only that way, and every later release
// still accepts it for views.
func dropView(tg Target, name string) string {
	return fmt.Sprintf("DROP TABLE IF EXISTS %s.%s%s", Quote(tg.DB), Quote(name), onCluster(tg.Cluster))
}

// LatestVersion is the schema version this build expects.
func LatestVersion() int {
	ms := Migrations()
	return ms[len(ms)-1].Version
}

// instrumentsLatestView: the last known state of every instrument of every
// source (deduplicated), with when it was first and last seen: one row per
// (source, instrument_name), its row of the last snapshot that listed it.
//
// The join is ALL INNER JOIN: every version of an instrument meets its one
// aggregate row, and the WHERE keeps the last one. (Migration 1's view said
// ANY INNER JOIN, which on 18.16 picks one right row per left row, but
// since 20.x keeps one row per key on the left side too, so the WHERE threw
// away nearly every instrument: 13 rows for 3,022 instruments on 26.7.)
//
// On a cluster the outer query reads the Distributed table, so each shard
// runs the whole query, JOIN included, on its own rows; the subquery must
// then read instruments_local: a subquery over a Distributed table inside a
// distributed query is refused ("Double-distributed IN/JOIN subqueries is
// denied"), and as a GLOBAL JOIN it would ship every shard's aggregate to
// every shard. The local subquery is correct because the sharding key keeps
// one instrument's whole history on one shard.
func instrumentsLatestView(tg Target) string {
	return latestView(tg, "ALL")
}

// instrumentsLatestViewV1 is migration 1's instruments_latest, kept as it
// was released (a released migration is never edited): wrong from
// ClickHouse 20.x on, replaced by migration 4.
func instrumentsLatestViewV1(tg Target) string {
	return latestView(tg, "ANY")
}

func latestView(tg Target, strictness string) string {
	sub := "instruments"
	if tg.OnCluster() {
		sub = Instruments.LocalName()
	}
	return fmt.Sprintf(`CREATE VIEW IF NOT EXISTS %[1]s.instruments_latest%[2]s AS
SELECT i.*, s.first_seen, s.last_seen
FROM %[1]s.instruments AS i FINAL
%[4]s INNER JOIN
(
    SELECT source, instrument_name, min(snapshot_time) AS first_seen, max(snapshot_time) AS last_seen
    FROM %[1]s.%[3]s
    GROUP BY source, instrument_name
) AS s USING (source, instrument_name)
WHERE i.snapshot_time = s.last_seen`, Quote(tg.DB), onCluster(tg.Cluster), sub, strictness)
}

// instrumentsLatestViewMs is instrumentsLatestView where time columns
// have second precision (migration 5): the last snapshot of an instrument
// is the greatest (snapshot_time, snapshot_ms), so of two snapshots within
// one second the later one wins. first_seen and last_seen stay DateTime
// (seconds).
func instrumentsLatestViewMs(tg Target) string {
	sub := "instruments"
	if tg.OnCluster() {
		sub = Instruments.LocalName()
	}
	return fmt.Sprintf(`CREATE VIEW IF NOT EXISTS %[1]s.instruments_latest%[2]s AS
SELECT i.*, s.first_seen, s.last_seen
FROM %[1]s.instruments AS i FINAL
ALL INNER JOIN
(
    SELECT source, instrument_name, min(snapshot_time) AS first_seen, max(snapshot_time) AS last_seen,
        max(toUInt64(snapshot_time) * 1000 + %[4]s) AS last_seen_ms
    FROM %[1]s.%[3]s
    GROUP BY source, instrument_name
) AS s USING (source, instrument_name)
WHERE toUInt64(i.snapshot_time) * 1000 + i.%[4]s = s.last_seen_ms`, Quote(tg.DB), onCluster(tg.Cluster), sub, SnapshotMs)
}

// indexPriceHistoryViewMs is indexPriceHistoryView where time columns have
// second precision (migration 5): one row per snapshot, so snapshots
// within one second stay apart, told by snapshot_ms.
func indexPriceHistoryViewMs(tg Target) string {
	return fmt.Sprintf(`CREATE VIEW IF NOT EXISTS %[1]s.index_price_history%[2]s AS
SELECT source, base_currency AS currency, snapshot_time AS time, %[3]s, topK(1)(index_price)[1] AS price, count() AS instruments
FROM %[1]s.instruments FINAL
WHERE index_price IS NOT NULL AND base_currency IS NOT NULL
GROUP BY source, currency, time, %[3]s`, Quote(tg.DB), onCluster(tg.Cluster), SnapshotMs)
}

// indexPriceHistoryView: one index price per source, currency and snapshot.
// All instruments of a currency quote the same index; the most frequent
// value is taken so a few bad rows cannot move it. On a cluster it reads
// the Distributed table (FINAL is applied by each shard, which holds every
// version of its keys); the aggregation is merged across shards.
func indexPriceHistoryView(tg Target) string {
	return fmt.Sprintf(`CREATE VIEW IF NOT EXISTS %[1]s.index_price_history%[2]s AS
SELECT source, base_currency AS currency, snapshot_time AS time, topK(1)(index_price)[1] AS price, count() AS instruments
FROM %[1]s.instruments FINAL
WHERE index_price IS NOT NULL AND base_currency IS NOT NULL
GROUP BY source, currency, time`, Quote(tg.DB), onCluster(tg.Cluster))
}

// MigrationsTable is the name of the table that records applied migrations.
const MigrationsTable = "optlake_migrations"

// MigrationsTableDDL records applied migrations in the target database (one
// server).
func MigrationsTableDDL(db string) string {
	return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s\n%s\nENGINE = ReplacingMergeTree\nORDER BY version", Quote(db), MigrationsTable, migrationsColumnsDDL())
}

// migrationsColumns are the columns of MigrationsTable with their ClickHouse
// types (the same on every server version: the table predates them all).
var migrationsColumns = [...]struct{ name, typ string }{
	{"version", "UInt32"}, {"name", "String"}, {"checksum", "String"}, {"applied_at", "DateTime('UTC')"},
}

// MigrationsColumns are the column names of MigrationsTable, in order, as
// an INSERT lists them ("version, name, checksum, applied_at").
func MigrationsColumns() string {
	names := make([]string, len(migrationsColumns))
	for i, c := range migrationsColumns {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}

func migrationsColumnsDDL() string {
	var b strings.Builder
	b.WriteString("(\n")
	for i, c := range migrationsColumns {
		fmt.Fprintf(&b, "    %s %s", c.name, c.typ)
		if i < len(migrationsColumns)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString(")")
	return b.String()
}

// MigrationsTableStatements creates the migrations table on tg. On one
// server: MigrationsTableDDL. On a cluster the record is kept once for the
// whole cluster: optlake_migrations_local is a ReplicatedReplacingMergeTree
// on every node (ON CLUSTER, replicated within each shard like the data
// tables) and optlake_migrations a Distributed table over it, sharded by
// version, so each version is one row on one shard, read from any node
// through the Distributed table.
func MigrationsTableStatements(tg Target) []string {
	if !tg.OnCluster() {
		return []string{MigrationsTableDDL(tg.DB)}
	}
	cols := migrationsColumnsDDL()
	local := MigrationsTable + LocalSuffix
	return []string{
		fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s%s\n%s\nENGINE = ReplicatedReplacingMergeTree('%s', '{replica}')\nORDER BY version",
			Quote(tg.DB), local, onCluster(tg.Cluster), cols, escapeString(ReplicationPath(tg.DB, local))),
		fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s%s\n%s\nENGINE = Distributed('%s', '%s', '%s', version)",
			Quote(tg.DB), MigrationsTable, onCluster(tg.Cluster), cols, escapeString(tg.Cluster), escapeString(tg.DB), local),
	}
}

// RecordStatement renders the INSERT that records m as applied on tg, as
// migrate records it (in optlake_migrations, the Distributed one on a
// cluster; a ReplacingMergeTree keyed by version, so recording twice is
// harmless).
func (m Migration) RecordStatement(tg Target) string {
	return fmt.Sprintf("INSERT INTO %s.%s (%s) VALUES (%d, '%s', '%s', now())",
		Quote(tg.DB), MigrationsTable, MigrationsColumns(), m.Version, escapeString(m.Name), m.ChecksumFor(tg))
}

// Script is every statement migrate runs to bring an empty database on tg
// to LatestVersion, in order: the database, the migrations table, then each
// migration's statements followed by its record. Every statement is
// idempotent, so the script also upgrades a database at any earlier
// version (one laid out for the same mode, single server or cluster).
func Script(tg Target) []string {
	out := []string{CreateDatabaseDDL(tg)}
	out = append(out, MigrationsTableStatements(tg)...)
	for _, m := range Migrations() {
		out = append(out, m.Render(tg)...)
		out = append(out, m.RecordStatement(tg))
	}
	return out
}
