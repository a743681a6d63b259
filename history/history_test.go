package history

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks/clickhouse"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// FromClickHouse's queries run on Debian's 18.16 and on the newest
// ClickHouse (chDB) against optlake's own DDL for each, and give the column
// types FromClickHouse scans into (LowCardinality aside, which the client
// reads as its inner type). End to end, with rows, `optlake history
// --clickhouse-dsn` is tested on 18.16 (cmd/optlake TestHistoryCommand);
// chDB has no native protocol for the client to reach.
func TestQueriesOnEveryVersion(t *testing.T) {
	wantInstruments := "Nullable(Int64) Nullable(String) Nullable(Float64) Nullable(UInt8) Nullable(UInt8) Nullable(Float64) Nullable(Float64) Nullable(Float64) Nullable(Float64) Nullable(Int64)"
	wantEvents := "Nullable(Int64) Nullable(Int64) Nullable(String) Nullable(String) Nullable(String) Nullable(String) Nullable(String) Nullable(UInt8)"
	engines := []struct {
		name    string
		version string
		query   func(t *testing.T, sql string) string
	}{
		{"18.16 (clickhouse-server)", "", func(t *testing.T, sql string) string {
			out, err := testenv.SharedClickHouse(t).Query(context.Background(), sql)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}},
		{"newest (chDB)", schema.NewestKnownVersion, func(t *testing.T, sql string) string {
			out, err := testenv.NewChDB(t).Query(context.Background(), sql)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}},
	}
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			version, db := e.version, "history_types"
			if version == "" {
				c := testenv.SharedClickHouse(t)
				version, db = c.Version(), testenv.FreshDatabase(t, c)
			}
			f, err := schema.ParseVersion(version)
			if err != nil {
				t.Fatal(err)
			}
			var sql strings.Builder
			for _, st := range schema.Script(schema.Target{DB: db, Features: f}) {
				sql.WriteString(st + ";\n")
			}
			instruments, events := Queries(db, f)
			for _, q := range []string{instruments, events} {
				q = strings.Replace(q, "?", "'BTC-PERPETUAL'", 1)
				sql.WriteString("SELECT * FROM (" + q + ") LIMIT 0 FORMAT TabSeparatedWithNamesAndTypes;\n")
			}
			out := e.query(t, sql.String())
			lines := strings.Split(out, "\n")
			if len(lines) != 4 {
				t.Fatalf("want names and types of two queries, got:\n%s", out)
			}
			for i, want := range []string{wantInstruments, wantEvents} {
				types := strings.Split(lines[2*i+1], "\t")
				for j, ty := range types {
					if strings.HasPrefix(ty, "LowCardinality(") {
						types[j] = strings.TrimSuffix(strings.TrimPrefix(ty, "LowCardinality("), ")")
					}
				}
				if got := strings.Join(types, " "); got != want {
					t.Errorf("query %d types on %s:\n got %s\nwant %s", i+1, version, got, want)
				}
			}
		})
	}
}

// FromClickHouse connects through the ClickHouse sink: the DSN's password
// never appears in its errors, which keep their cause.
func TestFromClickHouseErrors(t *testing.T) {
	_, err := FromClickHouse(context.Background(), "clickhouse://u:hunter22pw@127.0.0.1:1/db", "BTC-PERPETUAL")
	if err == nil || strings.Contains(err.Error(), "hunter22pw") || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("refused: %v", err)
	}
	c := testenv.SharedClickHouse(t)
	db := testenv.FreshDatabase(t, c)
	var ood *clickhouse.OutOfDateError
	if _, err := FromClickHouse(context.Background(), c.DSN(db), "BTC-PERPETUAL"); !errors.As(err, &ood) {
		t.Errorf("a database without optlake's schema: %v", err)
	}
}

// The CSV columns, derived from the projections, are the documented ones.
func TestCSVHeader(t *testing.T) {
	var b strings.Builder
	if err := timeline().Write(&b, "csv"); err != nil {
		t.Fatal(err)
	}
	want := "kind,snapshot_time,event,field,old_value,new_value,index_price,is_active,deployed,maker_commission,taker_commission,tick_size,strike\n"
	if got, _, _ := strings.Cut(b.String(), "\n"); got+"\n" != want {
		t.Errorf("header %q", got)
	}
}
