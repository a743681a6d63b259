package main

import (
	"log/slog"
	"sort"
	"strings"

	"github.com/optlake/optlake/internal/redact"
	"github.com/optlake/optlake/lake"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/clickhouse"
	"github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/storage"
)

// sinkKind is how the CLI checks and opens one kind of sink.
type sinkKind struct {
	// check validates the job's settings for the sink without touching
	// the disk or the network (validate, config check).
	check func(j *job, red *redact.Redactor) error
	// open builds the sink (wire) on the data directory st, whose lake
	// has the table format f.
	open func(j *job, st storage.Store, f *lake.Format, log *slog.Logger, red *redact.Redactor) (sinks.Sink, error)
	// lake: the sink writes the lake's files (made with f.Files), which
	// the table format turns into its live sink and a replay's sink.
	lake bool
}

// sinkKinds is the one sink factory: --sink NAME picks an entry. A new sink
// is one entry here.
func sinkKinds() map[string]sinkKind {
	return map[string]sinkKind{
		"parquet": {
			check: func(*job, *redact.Redactor) error { return nil },
			lake:  true,
			open: func(_ *job, st storage.Store, f *lake.Format, log *slog.Logger, _ *redact.Redactor) (sinks.Sink, error) {
				return parquet.New(f.Files(parquet.Options{Store: st, Logger: log}))
			},
		},
		"clickhouse": {
			check: func(j *job, red *redact.Redactor) error {
				_, err := clickhouse.New(clickhouse.Options{DSN: j.ClickHouseDSN, Cluster: j.Cluster, Redactor: red}) // does not connect
				return usageErr(err)
			},
			open: func(j *job, _ storage.Store, _ *lake.Format, log *slog.Logger, red *redact.Redactor) (sinks.Sink, error) {
				s, err := clickhouse.New(clickhouse.Options{DSN: j.ClickHouseDSN, Cluster: j.Cluster, Migrate: j.Migrate, MaxAttempts: j.CHMaxAttempts, Logger: log, Redactor: red})
				if err != nil {
					return nil, usageError{err}
				}
				return s, nil
			},
		},
	}
}

// checkSinks validates --sink (comma lists split, repeats dropped) and each
// sink's settings; it returns the sink names in order.
func checkSinks(j *job, red *redact.Redactor) ([]string, error) {
	kinds := sinkKinds()
	var names []string
	seen := map[string]bool{}
	for _, s := range splitList(j.Sinks) {
		if seen[s] {
			continue
		}
		seen[s] = true
		k, ok := kinds[s]
		if !ok {
			known := make([]string, 0, len(kinds))
			for n := range kinds {
				known = append(known, n)
			}
			sort.Strings(known)
			return nil, usagef("--sink %q: want %s", s, strings.Join(known, " or "))
		}
		if err := k.check(j, red); err != nil {
			return nil, err
		}
		names = append(names, s)
	}
	return names, nil
}

// openSinks opens the named (checked) sinks; on an error it closes those
// already open.
func openSinks(names []string, j *job, st storage.Store, f *lake.Format, log *slog.Logger, red *redact.Redactor) ([]sinks.Sink, error) {
	kinds := sinkKinds()
	var ss []sinks.Sink
	for _, n := range names {
		s, err := kinds[n].open(j, st, f, log, red)
		if err != nil {
			closeSinks(ss)
			return nil, err
		}
		s = crashSinks([]sinks.Sink{s})[0]
		if kinds[n].lake {
			live := f.Sink(s)
			if j.Replay {
				if live, err = f.ReplaySink(s, live); err != nil {
					closeSinks(append(ss, s))
					return nil, err
				}
			}
			s = live
		}
		ss = append(ss, s)
	}
	return ss, nil
}

func usageErr(err error) error {
	if err == nil {
		return nil
	}
	return usageError{err}
}
