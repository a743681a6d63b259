package main

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/optlake/optlake/lake"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/storage"
)

// openLake reads the table format of the data directory st, built with
// opt (lakeOptions), under its lock (lockStore), and finishes or undoes a
// compaction a crash cut short: for a command that writes the lake (write:
// run, replay, demo with the Parquet sink) the format asked by
// --table-format (asked), recorded at the lake's first run; otherwise the
// recorded one. Asking for the other format than the lake's exits 2.
func openLake(ctx context.Context, st storage.Store, asked lake.Kind, write bool, opt lake.Options) (*lake.Format, error) {
	var f *lake.Format
	var err error
	if write {
		f, err = lake.Open(ctx, st, asked, opt)
	} else {
		f, err = lake.Read(ctx, st, opt)
	}
	if err != nil {
		return nil, formatErr(err)
	}
	log := opt.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	recoverCompaction(ctx, f, log)
	return f, nil
}

// commitCrash returns the test-only crash hook at a step of the
// instruments table's commit into the lake's table format
// (tableformat.Options.CommitCrash, e.g. iceberg-manifest), when
// loadCrashEnv names one; nil otherwise.
func commitCrash() func(table, step string) {
	at := os.Getenv(loadCrashEnv)
	if at == "" {
		return nil
	}
	return func(table, step string) {
		if table == schema.Instruments.Name && step == at {
			killSelf()
		}
	}
}

// formatErr makes a format mismatch a usage error (exit 2).
func formatErr(err error) error {
	var m *lake.MismatchError
	if errors.As(err, &m) {
		return usageError{err}
	}
	return err
}
