package main

import (
	"context"
	"os"
	"strings"

	"github.com/optlake/optlake/pipeline/ledger"
	"github.com/optlake/optlake/storage"
)

// isDataDirURL reports whether a --data-dir is a URL (s3://, gs://,
// azblob://, file://) rather than a plain path.
func isDataDirURL(s string) bool { return strings.Contains(s, "://") }

// openDataDir is the one place where a command opens its --data-dir (run,
// demo, replay, status, schema, history all call it): it returns the
// directory the command works in. mustExist is for commands that only read
// what a run wrote. A storage layer (local or object store) replaces the
// body of this function, not its callers.
//
// A file:// URL is its local path. A bucket URL (s3://, gs://, azblob://)
// is refused here until the command works on the storage layer (issue 14;
// `status` does, through openLedger); the message names the store, never a
// credential the URL may carry.
func openDataDir(path string, mustExist bool) (string, error) {
	if path == "" {
		return "", usagef("--data-dir must not be empty")
	}
	if isDataDirURL(path) {
		st, err := storage.Open(context.Background(), path)
		if err != nil {
			return "", usagef("--data-dir: %v", err)
		}
		defer st.Close()
		l, ok := st.(*storage.Local)
		if !ok {
			return "", usagef("--data-dir %s: a bucket data directory is only supported by `optlake status` so far", st)
		}
		path = l.Root()
	}
	if mustExist {
		if _, err := os.Stat(path); err != nil {
			return "", usagef("--data-dir: %v", err)
		}
	}
	return path, nil
}

// openLedger opens the load ledger of a --data-dir, a path or a URL (a
// bucket prefix's ledger lives under PREFIX/_ledger/). close releases the
// store.
func openLedger(ctx context.Context, dataDir string, mustExist bool) (l *ledger.Ledger, close func() error, err error) {
	if !isDataDirURL(dataDir) {
		dir, err := openDataDir(dataDir, mustExist)
		if err != nil {
			return nil, nil, err
		}
		return ledger.Open(dir), func() error { return nil }, nil
	}
	st, err := storage.Open(ctx, dataDir)
	if err != nil {
		return nil, nil, usagef("--data-dir: %v", err)
	}
	if loc, ok := st.(*storage.Local); ok {
		st.Close()
		return openLedger(ctx, loc.Root(), mustExist)
	}
	return ledger.New(storage.KV(ctx, st, ledger.Dir), nil), st.Close, nil
}
