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
	Version    int
	Name       string
	Statements func(db string, f Features) []string
}

// Checksum identifies the rendered statements, so a changed migration is
// noticed.
func (m Migration) Checksum(db string, f Features) string {
	h := sha256.New()
	for _, s := range m.Statements(db, f) {
		h.Write([]byte(strings.ReplaceAll(s, Quote(db)+".", "")))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Migrations lists every migration in order. Append only: never edit a
// released one, add the next version instead.
func Migrations() []Migration {
	return []Migration{
		{Version: 1, Name: "instruments, rejects, runs and history views", Statements: func(db string, f Features) []string {
			return []string{
				Instruments.ClickHouseDDL(db, f),
				Rejects.ClickHouseDDL(db, f),
				Runs.ClickHouseDDL(db, f),
				instrumentsLatestView(db),
				indexPriceHistoryView(db),
			}
		}},
		{Version: 2, Name: "instrument_events", Statements: func(db string, f Features) []string {
			return []string{InstrumentEvents.ClickHouseDDL(db, f)}
		}},
	}
}

// LatestVersion is the schema version this build expects.
func LatestVersion() int {
	ms := Migrations()
	return ms[len(ms)-1].Version
}

// instrumentsLatestView: the last known state of every instrument of every
// source (deduplicated), with when it was first and last seen.
func instrumentsLatestView(db string) string {
	return fmt.Sprintf(`CREATE VIEW IF NOT EXISTS %[1]s.instruments_latest AS
SELECT i.*, s.first_seen, s.last_seen
FROM %[1]s.instruments AS i FINAL
ANY INNER JOIN
(
    SELECT source, instrument_name, min(snapshot_time) AS first_seen, max(snapshot_time) AS last_seen
    FROM %[1]s.instruments
    GROUP BY source, instrument_name
) AS s USING (source, instrument_name)
WHERE i.snapshot_time = s.last_seen`, Quote(db))
}

// indexPriceHistoryView: one index price per source, currency and snapshot.
// All instruments of a currency quote the same index; the most frequent
// value is taken so a few bad rows cannot move it.
func indexPriceHistoryView(db string) string {
	return fmt.Sprintf(`CREATE VIEW IF NOT EXISTS %[1]s.index_price_history AS
SELECT source, base_currency AS currency, snapshot_time AS time, topK(1)(index_price)[1] AS price, count() AS instruments
FROM %[1]s.instruments FINAL
WHERE index_price IS NOT NULL AND base_currency IS NOT NULL
GROUP BY source, currency, time`, Quote(db))
}

// MigrationsTable records applied migrations in the target database.
func MigrationsTableDDL(db string) string {
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s.optlake_migrations
(
    version UInt32,
    name String,
    checksum String,
    applied_at DateTime('UTC')
)
ENGINE = ReplacingMergeTree
ORDER BY version`, Quote(db))
}
