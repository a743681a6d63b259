package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/optlake/optlake/internal/redact"
	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks/sinktest"
)

// The sink's errors keep their chain (callers test for cancellation, a
// refused connection or a server exception) and never show the DSN's
// password, even when the caller gave no Redactor.
func TestErrorsKeepTheirChain(t *testing.T) {
	ctx := context.Background()
	c := testenv.SharedClickHouse(t)
	db := testenv.FreshDatabase(t, c)
	d := sinktest.Snapshot(t, 0, 1024)
	defer d.Release()

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err := newSink(t, c.DSN(db), true).Open(canceled, schema.Runs, d.Snap)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("open with a canceled context: %v is not context.Canceled", err)
	}

	s := newSink(t, c.DSN(db), true)
	w, err := s.Open(ctx, schema.Runs, d.Snap)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(canceled, d.Runs[0]); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "clickhouse insert into runs") {
		t.Errorf("write with a canceled context: %v", err)
	}
	w.Abort()

	// A server exception: the table is gone.
	query(t, c, fmt.Sprintf("DROP TABLE %s.runs", db))
	w, err = s.Open(ctx, schema.Runs, d.Snap)
	if err != nil {
		t.Fatal(err)
	}
	err = w.Write(ctx, d.Runs[0])
	var ex *ch.Exception
	if !errors.As(err, &ex) || ex.Code != 60 { // UNKNOWN_TABLE
		t.Errorf("write into a dropped table: %v, want a *ch.Exception code 60", err)
	}
	w.Abort()

	// A refused connection, with a password in the DSN and no Redactor.
	_, err = newSink(t, "clickhouse://u:hunter22pw@127.0.0.1:1/db", false).Open(ctx, schema.Runs, d.Snap)
	var re *redact.Error
	if err == nil || strings.Contains(err.Error(), "hunter22pw") || !errors.Is(err, syscall.ECONNREFUSED) || !errors.As(err, &re) {
		t.Errorf("refused connection: %v", err)
	}
}
