package lake_test

import (
	"context"
	"errors"
	"testing"

	"github.com/optlake/optlake/lake"
	"github.com/optlake/optlake/storage"
)

func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ledger   bool        // the lake has a load ledger (written before formats were recorded)
		runs     []lake.Kind // --table-format of each run, in order
		want     lake.Kind   // the last run's format
		mismatch bool        // the last run is refused
		recorded lake.Kind
	}{
		{name: "new lake, default", runs: []lake.Kind{""}, want: lake.Parquet, recorded: lake.Parquet},
		{name: "new lake, iceberg, kept", runs: []lake.Kind{lake.Iceberg, ""}, want: lake.Iceberg, recorded: lake.Iceberg},
		{name: "iceberg lake refuses parquet", runs: []lake.Kind{lake.Iceberg, lake.Parquet}, mismatch: true, recorded: lake.Iceberg},
		{name: "parquet lake refuses iceberg", runs: []lake.Kind{"", lake.Iceberg}, mismatch: true, recorded: lake.Parquet},
		{name: "old lake is parquet", ledger: true, runs: []lake.Kind{lake.Iceberg}, mismatch: true, recorded: lake.Parquet},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st := storage.NewLocal(t.TempDir())
			if tc.ledger {
				if err := st.Put(ctx, "_ledger/x.json", []byte("{}")); err != nil {
					t.Fatal(err)
				}
			}
			var got lake.Kind
			var err error
			for _, asked := range tc.runs {
				got, err = lake.Resolve(ctx, st, asked)
			}
			var m *lake.MismatchError
			if tc.mismatch != errors.As(err, &m) {
				t.Fatalf("last run: %q, %v", got, err)
			}
			if !tc.mismatch && (err != nil || got != tc.want) {
				t.Errorf("last run: %q, %v; want %q", got, err, tc.want)
			}
			if rec, err := lake.Recorded(ctx, st); err != nil || rec != tc.recorded {
				t.Errorf("recorded %q, %v; want %q", rec, err, tc.recorded)
			}
		})
	}
	if _, err := lake.ParseFormat("delta"); err == nil {
		t.Error("--table-format delta accepted")
	}
}
