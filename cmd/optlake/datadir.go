package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/optlake/optlake/internal/datadir"
	"github.com/optlake/optlake/lake/layout"
	"github.com/optlake/optlake/pipeline/ledger"
	"github.com/optlake/optlake/storage"
)

// isDataDirURL reports whether a --data-dir is a URL (s3://, gs://,
// azblob://, file://) rather than a plain path.
func isDataDirURL(s string) bool { return strings.Contains(s, "://") }

// openStore is the one place where a command opens its --data-dir: a plain
// path or file:// URL is a local folder, s3://, gs:// and azblob:// a
// bucket prefix (storage.Open; credentials come from each cloud's chain,
// never from the URL). Every reader and writer of the data directory goes
// through the returned store. mustExist is for commands that only read
// what a run wrote (a bucket prefix has no existence of its own: it is
// checked by what the command finds there). The caller closes the store.
func openStore(ctx context.Context, dataDir string, mustExist bool) (storage.Store, error) {
	if dataDir == "" {
		return nil, usagef("--data-dir must not be empty")
	}
	st, err := storage.Open(ctx, dataDir)
	if err != nil {
		return nil, usagef("--data-dir: %v", err)
	}
	if dir := storage.LocalDir(st); dir != "" && mustExist {
		if _, err := os.Stat(dir); err != nil {
			st.Close()
			return nil, usagef("--data-dir: %v", err)
		}
	}
	return st, nil
}

// openLedger opens the load ledger of a --data-dir, a path or a URL (a
// bucket prefix's ledger lives under PREFIX/_ledger/). close releases the
// store.
func openLedger(ctx context.Context, dataDir string, mustExist bool) (l *ledger.Ledger, close func() error, err error) {
	st, err := openStore(ctx, dataDir, mustExist)
	if err != nil {
		return nil, nil, err
	}
	return ledger.New(st, nil), st.Close, nil
}

// lockStore takes the data directory for this process (runs never
// overlap): the flock of a local folder, the lease object of a bucket
// prefix (renewed until released). It then removes what a crashed run left
// behind — temp files, incomplete multipart uploads (a compaction cut
// short is the lake's: openLake). A refusal names the holder and exits 4.
func lockStore(ctx context.Context, st storage.Store, ttl time.Duration, log *slog.Logger) (*storage.Lease, error) {
	l, err := storage.AcquireDataDir(ctx, st, ttl)
	if err != nil {
		if errors.Is(err, datadir.ErrLocked) {
			return nil, codedError{exitLocked, err}
		}
		return nil, fmt.Errorf("data directory %s: %w", st, err)
	}
	if n, err := storage.CleanIncomplete(ctx, st, layout.TrashDir); err != nil {
		log.Warn("cleaning what an interrupted run left", "err", err)
	} else if n > 0 {
		if storage.LocalDir(st) != "" {
			log.Info("removed temp files of an interrupted run", "files", n)
		} else {
			log.Info("aborted the incomplete uploads of an interrupted run", "uploads", n)
		}
	}
	return l, nil
}
