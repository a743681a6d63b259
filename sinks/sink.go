// Package sinks defines the interface every store implements. Both stores
// consume the same Arrow record batches, whose schemas come from package
// schema.
package sinks

import (
	"context"
	"errors"
	"fmt"
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
	// Parked: the rows are committed to a file parked beside the lake
	// (a snapshot whose day is compacted already: the day's next
	// compaction merges it in), not to the table's folder; a table
	// format must not register it.
	Parked bool
}

// Optional capabilities. A sink has one when it implements the interface
// and says yes; code that needs one asks through the functions below, never
// by its own type assertion. A wrapper (a sink that hands its rows on to
// another: the pipeline's stage, the Iceberg sink, a test hook) implements
// every capability and answers for what it wraps, so wrapping never hides
// one; the no of a wrapper whose inner sink lacks a capability is the
// interface's own (false, nil, errors.ErrUnsupported). sinktest.Forwarding
// checks a wrapper.

// Atomic is a sink whose Writer.Commit makes all of a table's rows visible
// at once and whose Abort leaves nothing (Parquet: one file renamed into
// place). The pipeline stages the rows of paginated requests for other
// sinks (ClickHouse inserts blocks as they stream), so that a page that
// fails after the first ones leaves nothing committed.
type Atomic interface {
	// CommitsAtomically reports whether the sink is atomic.
	CommitsAtomically() bool
}

// CommitsAtomically reports whether s is Atomic and says so.
func CommitsAtomically(s Sink) bool {
	a, ok := s.(Atomic)
	return ok && a.CommitsAtomically()
}

// DaySink is a sink that holds a replay's rows until every snapshot of
// their day is loaded, then writes the day at once (the Parquet lake's
// replay: one file per table and day, compact.DaySink). A Writer's Commit
// hands its rows to the day; they become visible at FlushDay. It takes a
// snapshot once between two FlushDays of its day (a replay loads each
// archived snapshot once): loaded again before, its rows are there twice;
// after, they replace the day's earlier ones.
type DaySink interface {
	// HoldsDays reports whether the sink holds rows until FlushDay.
	HoldsDays() bool
	// FlushDay writes what the sink holds of date (YYYY-MM-DD).
	FlushDay(ctx context.Context, date string) error
}

// HoldsDays returns s as a DaySink when it holds days.
func HoldsDays(s Sink) (DaySink, bool) {
	d, ok := s.(DaySink)
	if !ok || !d.HoldsDays() {
		return nil, false
	}
	return d, true
}

// FlushDay is s's FlushDay when it holds days, else nothing (a wrapper's
// FlushDay).
func FlushDay(ctx context.Context, s Sink, date string) error {
	if d, ok := HoldsDays(s); ok {
		return d.FlushDay(ctx, date)
	}
	return nil
}

// Versioned is a sink that can write a snapshot's table under a version
// of its name (parquet.VersionedName) instead of replacing it: an Iceberg
// lake never rewrites a file its tables may reference.
type Versioned interface {
	// OpenVersion is Open writing under version ("": Open). A wrapper of
	// a sink that is not Versioned returns an error wrapping
	// errors.ErrUnsupported.
	OpenVersion(ctx context.Context, t *schema.Table, snap Snapshot, version string) (Writer, error)
}

// OpenVersion is s's OpenVersion; an error wrapping errors.ErrUnsupported
// when s is not Versioned.
func OpenVersion(ctx context.Context, s Sink, t *schema.Table, snap Snapshot, version string) (Writer, error) {
	v, ok := s.(Versioned)
	if !ok {
		return nil, NotVersioned(s)
	}
	return v.OpenVersion(ctx, t, snap, version)
}

// NotVersioned is the error of OpenVersion on s, which is not Versioned.
func NotVersioned(s Sink) error {
	return fmt.Errorf("the %s sink cannot write a new version of a file: %w", s.Name(), errors.ErrUnsupported)
}
