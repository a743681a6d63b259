// Package sinks defines the interface every store implements. Both stores
// consume the same Arrow record batches, whose schemas come from package
// schema.
package sinks

import (
	"context"
	"errors"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/optlake/optlake/schema"
)

// Snapshot identifies the rows a Writer receives: one table's rows from one
// endpoint of one run. It is the one snapshot identity of the pipeline: the
// decoders (packages transform, infer and events) take it too.
type Snapshot struct {
	Time     time.Time // snapshot time (UTC, ms)
	RunID    string
	Source   string
	Endpoint string // logical endpoint name, e.g. "instruments"
	// Part tells apart the requests of an endpoint whose parameters fan out
	// into several requests ("" when there is one).
	Part string
}

// Sink is a store. Implementations:
//
//  1. Open returns a Writer for one table of one snapshot; several Writers may
//     be open at once (one per table), each used from one goroutine.
//  2. Loading the same snapshot again (a retry or a replay) must not duplicate
//     rows: Parquet replaces the snapshot's file, ClickHouse deduplicates by
//     the table's key.
//  3. Close releases connections; it does not commit open Writers.
type Sink interface {
	// Name is the sink's name as used by --sink ("parquet", "clickhouse").
	Name() string
	// Open prepares to receive the rows of table t for snap.
	Open(ctx context.Context, t *schema.Table, snap Snapshot) (Writer, error)
	// Close releases the sink's resources.
	Close(ctx context.Context) error
}

// Writer receives one table's rows for one snapshot.
type Writer interface {
	// Write appends rec, whose schema is the table's Arrow schema. The
	// caller releases rec after Write returns: a Writer that keeps it, or
	// anything that views its buffers (an array.String's Value is such a
	// view), must Retain it until done, or copy what it keeps. A replay
	// recycles the buffers once their last holder releases them.
	Write(ctx context.Context, rec arrow.Record) error
	// Commit makes every row written visible, atomically where the store
	// allows it (Parquet: all or nothing). It reports where the rows went.
	Commit(ctx context.Context) (Committed, error)
	// Abort discards rows not yet committed. It is safe to call after Commit
	// or Abort, and then does nothing.
	Abort() error
}

// RejectedError reports that a store refused the rows themselves (a value
// it cannot take), not that it was unavailable: loading the same rows again
// fails the same way, so the load ledger marks it failed instead of
// retrying it at every catch-up.
type RejectedError struct{ Err error }

func (e *RejectedError) Error() string { return e.Err.Error() }
func (e *RejectedError) Unwrap() error { return e.Err }

// IsRejected reports whether err (or an error it wraps) is a RejectedError.
func IsRejected(err error) bool {
	var r *RejectedError
	return errors.As(err, &r)
}

// Committed describes what a Commit made visible.
type Committed struct {
	Rows  int64
	Bytes int64  // bytes written to the store, when known
	Where string // a file path or table name, for the run summary
	// TableSnapshot is the table format's commit of the rows: the
	// Iceberg snapshot id of an Iceberg lake's append, 0 for none.
	TableSnapshot int64
}
