// Package lake knows the lake's table format: parquet (hive folders of
// files, the default, package lake/hive) or iceberg (the same files
// registered as Iceberg tables, package lake/iceberg). A lake's format is
// chosen at its first run and recorded in the data directory; every later
// command keeps it. Open reads the record once and returns the Format
// every command asks (tableformat.Format: the sinks, compaction, the
// readers' view, upkeep, status).
package lake

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/optlake/optlake/storage"
)

// Kind names a lake's table format, as recorded and as --table-format
// takes it.
type Kind string

const (
	Parquet Kind = "parquet"
	Iceberg Kind = "iceberg"
)

// FormatName is the object that records the format, at the data
// directory's root beside the lock and lease.
const FormatName = ".optlake.format"

// ParseFormat checks a --table-format value; "" is "whatever the lake has".
func ParseFormat(s string) (Kind, error) {
	f := Kind(strings.ToLower(strings.TrimSpace(s)))
	if _, ok := formats[f]; ok || f == "" {
		return f, nil
	}
	return "", fmt.Errorf("--table-format %q: want %s", s, strings.Join(kinds(), " or "))
}

// MismatchError is a command asking for the other format than the lake's.
type MismatchError struct {
	Lake, Asked Kind
	Where       string // the data directory, never a secret
}

func (e *MismatchError) Error() string {
	msg := fmt.Sprintf("the lake in %s is %s; --table-format %s is refused (a lake keeps the format of its first run)", e.Where, e.Lake, e.Asked)
	if e.Lake == Parquet && e.Asked == Iceberg {
		msg += "; `optlake lake convert --to iceberg` registers a Parquet lake's files as Iceberg tables"
	}
	return msg
}

// Recorded is the lake's recorded format, "" when none is recorded.
func Recorded(ctx context.Context, st storage.Store) (Kind, error) {
	b, err := storage.ReadAll(ctx, st, FormatName)
	if errors.Is(err, storage.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("table format: %w", err)
	}
	f, err := ParseFormat(string(b))
	if err != nil || f == "" {
		return "", fmt.Errorf("table format: %s holds %q", FormatName, strings.TrimSpace(string(b)))
	}
	return f, nil
}

// Resolve is the format a writing command (run, replay) uses on st,
// recording it at the lake's first run: the recorded one; else asked, or
// parquet when asked is "". A lake that holds a load ledger but no record
// was written before formats were recorded, so it is parquet. Asking for
// the other format than the lake's is a *MismatchError.
func Resolve(ctx context.Context, st storage.Store, asked Kind) (Kind, error) {
	have, err := Recorded(ctx, st)
	if err != nil {
		return "", err
	}
	if have == "" {
		have = asked
		old, err := st.List(ctx, "_ledger/")
		if err != nil {
			return "", fmt.Errorf("table format: %w", err)
		}
		if len(old) > 0 || have == "" {
			have = Parquet
		}
		if err := record(ctx, st, have); err != nil {
			return "", err
		}
		// Another process may have recorded first: its record wins.
		if have, err = Recorded(ctx, st); err != nil {
			return "", err
		}
	}
	if asked != "" && asked != have {
		return "", &MismatchError{Lake: have, Asked: asked, Where: st.String()}
	}
	return have, nil
}

// record writes f as the lake's format unless one is recorded already.
func record(ctx context.Context, st storage.Store, f Kind) error {
	w, err := st.CreateExclusive(ctx, FormatName)
	if err != nil {
		return fmt.Errorf("table format: %w", err)
	}
	if _, err := w.Write([]byte(string(f) + "\n")); err != nil {
		w.Abort()
		return fmt.Errorf("table format: %w", err)
	}
	if err := w.Commit(); err != nil && !errors.Is(err, storage.ErrExist) {
		return fmt.Errorf("table format: %w", err)
	}
	return nil
}
