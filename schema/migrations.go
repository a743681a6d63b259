package schema

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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
}

func newMigration(version int, name string, steps ...step) Migration {
	m := Migration{Version: version, Name: name, steps: steps}
	m.Statements = func(db string, f Features) []string { return m.Render(Target{DB: db, Features: f}) }
	return m
}

// Render returns the migration's statements for tg: on a cluster every
// statement is ON CLUSTER, tables are created as Replicated local tables
// under Distributed ones (Table.CreateDDL), and views read the Distributed
// tables.
func (m Migration) Render(tg Target) []string {
	var out []string
	for _, s := range m.steps {
		switch {
		case s.table != nil:
			out = append(out, s.table.CreateDDL(tg)...)
		case s.replace != "":
			out = append(out, dropView(tg, s.replace), s.view(tg))
		default:
			out = append(out, s.view(tg))
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
	}
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
