package clickhouse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/pipeline/transform"
	"github.com/optlake/optlake/pipeline/values"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/venuesim"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func query(t testing.TB, c *testenv.ClickHouse, sql string) string {
	t.Helper()
	out, err := c.Query(context.Background(), sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return strings.TrimSpace(out)
}

func newSink(t *testing.T, dsn string, migrate bool) *Sink {
	t.Helper()
	s, err := New(Options{DSN: dsn, Migrate: migrate, Backoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func TestMigrateFreshRerunUpgrade(t *testing.T) {
	ctx := context.Background()
	c := testenv.SharedClickHouse(t)
	db := testenv.FreshDatabase(t, c)
	s := newSink(t, c.DSN(db), false)

	applied, v, err := s.Migrate(ctx)
	if err != nil || len(applied) != len(schema.Migrations()) || v != schema.LatestVersion() {
		t.Fatalf("fresh migrate: applied=%v v=%d err=%v", applied, v, err)
	}
	want := []string{"index_price_history", "inferred_columns", "instrument_events", "instruments", "instruments_latest", "optlake_migrations", "rejects", "runs"}
	if got := query(t, c, fmt.Sprintf("SELECT arrayStringConcat(groupArray(name), ',') FROM (SELECT name FROM system.tables WHERE database = '%s' ORDER BY name)", db)); got != strings.Join(want, ",") {
		t.Errorf("tables = %s, want %s", got, strings.Join(want, ","))
	}
	// Columns in ClickHouse are exactly schema's, in order (with
	// snapshot_ms where time columns have seconds).
	f, err := schema.ParseVersion(c.Version())
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range schema.Tables() {
		got := query(t, c, fmt.Sprintf("SELECT arrayStringConcat(groupArray(name), ',') FROM (SELECT name FROM system.columns WHERE database = '%s' AND table = '%s')", db, tb.Name))
		if got != strings.Join(chNames(tb, f), ",") {
			t.Errorf("%s columns = %s", tb.Name, got)
		}
	}

	applied, _, err = s.Migrate(ctx)
	if err != nil || len(applied) != 0 {
		t.Fatalf("re-run: applied=%v err=%v", applied, err)
	}
	if n := query(t, c, fmt.Sprintf("SELECT count() FROM %s.optlake_migrations FINAL", db)); n != fmt.Sprint(len(schema.Migrations())) {
		t.Errorf("migrations recorded: %s", n)
	}

	// Upgrade: a database at version 1 gets exactly the later migrations.
	old := testenv.FreshDatabase(t, c)
	f = schema.FeaturesFor(18, 16)
	stmts := append([]string{"CREATE DATABASE IF NOT EXISTS " + old, schema.MigrationsTableDDL(old)}, schema.Migrations()[0].Statements(old, f)...)
	stmts = append(stmts, fmt.Sprintf("INSERT INTO %s.optlake_migrations (version, name, checksum, applied_at) VALUES (1, 'v1', '', now())", old))
	for _, st := range stmts {
		if err := c.Exec(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	s2 := newSink(t, c.DSN(old), false)
	_, err = s2.Open(ctx, schema.Instruments, sinks.Snapshot{})
	var ood *OutOfDateError
	if !errors.As(err, &ood) || ood.Have != 1 || !strings.Contains(err.Error(), "run `optlake migrate`") {
		t.Fatalf("open on an old schema: %v", err)
	}
	applied, _, err = s2.Migrate(ctx)
	if err != nil || len(applied) != len(schema.Migrations())-1 || applied[0].Version != 2 {
		t.Fatalf("upgrade: applied=%v err=%v", applied, err)
	}
	if n := query(t, c, fmt.Sprintf("SELECT count() FROM system.tables WHERE database = '%s' AND name = 'instrument_events'", old)); n != "1" {
		t.Error("upgrade did not create instrument_events")
	}
	// Migration 4 replaced migration 1's instruments_latest (ANY INNER JOIN,
	// wrong from 20.x on) in the existing database.
	for _, d := range []string{db, old} {
		def := query(t, c, fmt.Sprintf("SELECT create_table_query FROM system.tables WHERE database = '%s' AND name = 'instruments_latest'", d))
		if !strings.Contains(def, "ALL INNER JOIN") || strings.Contains(def, "ANY INNER JOIN") {
			t.Errorf("%s.instruments_latest after migrate: %s", d, def)
		}
	}
}

func TestOpenWithoutSchema(t *testing.T) {
	c := testenv.SharedClickHouse(t)
	db := testenv.FreshDatabase(t, c)
	_, err := newSink(t, c.DSN(db), false).Open(context.Background(), schema.Instruments, sinks.Snapshot{})
	if err == nil || !strings.Contains(err.Error(), "has no optlake schema: run `optlake migrate` first") {
		t.Fatalf("err = %v", err)
	}
	// --migrate instead: migrates and opens.
	if _, err := newSink(t, c.DSN(db), true).Open(context.Background(), schema.Instruments, sinks.Snapshot{}); err != nil {
		t.Fatal(err)
	}
}

// listing decodes a simulator listing into instrument records.
func listing(t *testing.T, sim *venuesim.Sim, meta sinks.Snapshot, batch int) []arrow.Record {
	t.Helper()
	var body bytes.Buffer
	if err := sim.WriteInstruments(&body); err != nil {
		t.Fatal(err)
	}
	d := transform.NewInstrumentDecoder(transform.Options{BatchRows: batch})
	defer d.Release()
	var recs []arrow.Record
	_, err := d.Decode(context.Background(), &body, meta, func(tb *schema.Table, rec arrow.Record) error {
		if tb == schema.Instruments {
			rec.Retain()
			recs = append(recs, rec)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func load(t *testing.T, s *Sink, snap sinks.Snapshot, recs []arrow.Record) {
	t.Helper()
	ctx := context.Background()
	w, err := s.Open(ctx, schema.Instruments, snap)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestLoadValuesAndIdempotency(t *testing.T) {
	c := testenv.SharedClickHouse(t)
	db := testenv.FreshDatabase(t, c)
	s := newSink(t, c.DSN(db), true)
	sim := venuesim.New(venuesim.Config{Seed: 11, Faults: venuesim.Faults{IndexPriceVariants: true, ExtraFields: true}})
	snap := sinks.Snapshot{Time: time.Date(2026, 11, 22, 9, 30, 0, 0, time.UTC), RunID: "run-1", Source: "sim", Endpoint: "instruments"}
	recs := listing(t, sim, snap, 500)
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	load(t, s, snap, recs)

	// Expected values, computed from the simulator's own listing.
	insts := sim.Instruments()
	var n, nullPrice, active int
	var strikeSum float64
	var perpetual int
	for _, in := range insts {
		n++
		// A JSON number is accepted as the value; a string is parsed.
		switch raw := string(in.IndexPriceJSON); {
		case raw == "null":
			nullPrice++
		case strings.HasPrefix(raw, `"`):
			if _, ok := values.ParseDecimal([]byte(*in.IndexPrice)); !ok {
				nullPrice++
			}
		}
		if in.IsActive {
			active++
		}
		if in.Strike != nil {
			strikeSum += *in.Strike
		}
		if in.ExpirationTimestamp > 10413791999999 { // beyond DateTime64/DateTime range
			perpetual++
		}
	}
	got := query(t, c, fmt.Sprintf(`SELECT count(), countIf(index_price IS NULL), countIf(is_active = 1), round(sum(strike)), countIf(expiration_time IS NULL),
		toString(min(snapshot_time)), countIf(extra IS NOT NULL) > 0 FROM %s.instruments FINAL`, db))
	want := fmt.Sprintf("%d\t%d\t%d\t%.0f\t%d\t2026-11-22 09:30:00\t1", n, nullPrice, active, strikeSum, perpetual)
	if got != want {
		t.Errorf("loaded  %q\nexpected %q", got, want)
	}
	if nullPrice == 0 || perpetual == 0 {
		t.Fatalf("the simulator produced no null index price (%d) or no perpetual (%d): the checks above prove less", nullPrice, perpetual)
	}
	// Every instrument's expiration equals the simulator's (where in range).
	one := insts[len(insts)/2]
	for one.IndexPrice == nil {
		one = insts[len(insts)/2+1]
	}
	got = query(t, c, fmt.Sprintf("SELECT toUnixTimestamp(expiration_time), strike, index_price_raw FROM %s.instruments WHERE instrument_name = '%s'", db, one.InstrumentName))
	strike := "\\N"
	if one.Strike != nil {
		strike = fmt.Sprint(*one.Strike)
	}
	if want := fmt.Sprintf("%d\t%s\t%s", one.ExpirationTimestamp/1000, strike, *one.IndexPrice); got != want {
		t.Errorf("%s: %q, want %q", one.InstrumentName, got, want)
	}

	// The same snapshot loaded again (a retry): one row per key after dedup.
	load(t, s, snap, recs)
	if got := query(t, c, fmt.Sprintf("SELECT count() FROM %s.instruments FINAL", db)); got != fmt.Sprint(n) {
		t.Errorf("count() FINAL after a second load = %s, want %d", got, n)
	}
	if got := query(t, c, fmt.Sprintf("SELECT count() FROM %s.instruments_latest", db)); got != fmt.Sprint(n) {
		t.Errorf("instruments_latest = %s rows, want %d", got, n)
	}
	if got := query(t, c, fmt.Sprintf("SELECT count() FROM %s.instruments", db)); got == fmt.Sprint(n) {
		t.Log("merges already removed the duplicates")
	}
	if got := query(t, c, fmt.Sprintf("SELECT count() FROM %s.index_price_history", db)); got != "3" {
		t.Errorf("index_price_history rows = %s, want 3 (BTC, ETH, SOL)", got)
	}
}

func TestTransient(t *testing.T) {
	s := newSink(t, "clickhouse://u:pw@127.0.0.1:1/db", false)
	_, err := s.Open(context.Background(), schema.Instruments, sinks.Snapshot{})
	if err == nil || !strings.Contains(err.Error(), "clickhouse connect") || strings.Contains(err.Error(), "pw@") {
		t.Fatalf("err = %v", err)
	}
	for _, err := range []error{syscall.ECONNREFUSED, fmt.Errorf("send: %w", io.ErrUnexpectedEOF), fmt.Errorf("x: %w", syscall.ECONNRESET)} {
		if !Transient(err) {
			t.Errorf("Transient(%v) = false", err)
		}
	}
	if Transient(errors.New("Code: 62. DB::Exception: Syntax error")) {
		t.Error("a syntax error is not transient")
	}
	if Transient(context.Canceled) {
		t.Error("cancel is not transient")
	}
}

// The server's refusals of values are rejections (the load ledger marks
// them failed); a server down or an unmigrated table are not.
func TestRejection(t *testing.T) {
	for _, tc := range []struct {
		err      error
		rejected bool
	}{
		{fmt.Errorf("insert: %w", &ch.Exception{Code: 53, Message: "Type mismatch"}), true},
		{&ch.Exception{Code: 27, Message: "Cannot parse input"}, true},
		{&ch.Exception{Code: 60, Message: "Table doesn't exist"}, false},
		{&ch.Exception{Code: 210, Message: "Network error"}, false},
		{syscall.ECONNREFUSED, false},
	} {
		if got := sinks.IsRejected(rejection(tc.err)); got != tc.rejected {
			t.Errorf("rejection(%v) rejected = %v", tc.err, got)
		}
	}
}

func TestDSNErrors(t *testing.T) {
	for _, dsn := range []string{"", "http://h:8123/db", "clickhouse://u:secretpw@h:notaport/db"} {
		_, err := New(Options{DSN: dsn})
		if err == nil || strings.Contains(err.Error(), "secretpw") {
			t.Errorf("New(%q) = %v", dsn, err)
		}
	}
}

// chNames are the names of tb's columns in ClickHouse on a server with f.
func chNames(tb *schema.Table, f schema.Features) []string {
	var out []string
	for _, c := range tb.ClickHouseColumns(f) {
		out = append(out, c.Name)
	}
	return out
}
