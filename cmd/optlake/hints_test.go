package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/pipeline/extract"
	"github.com/optlake/optlake/sinks/clickhouse"
)

// Library errors name no flag; the one-line reason names the flag that
// fixes them, also when the error reached cmd as a run summary's text.
func TestFlagHints(t *testing.T) {
	t.Parallel()
	_, caErr := extract.New(extract.Options{BaseURL: "https://venue.example", CAFile: "/nonexistent/ca.pem"})
	_, paramErr := pipeline.ParseParams([]string{"bad"})
	_, missingErr := pipeline.New(pipeline.Config{Endpoints: []pipeline.Endpoint{{Name: "position", Requires: "instrument_name"}}})
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"no DSN", fmt.Errorf("sinks: %w", clickhouse.ErrNoDSN), "clickhouse: no DSN (--clickhouse-dsn or OPTLAKE_CLICKHOUSE_DSN)"},
		{"out of date", &clickhouse.OutOfDateError{Database: "hist"}, "run `optlake migrate` first (or pass --migrate)"},
		{"out of date as summary text", errors.New("instruments: clickhouse: " + (&clickhouse.OutOfDateError{Database: "hist", Have: 2, Want: 5}).Error() + "; 1 pending"), "run `optlake migrate` first (or pass --migrate); 1 pending"},
		{"cluster missing", &clickhouse.ClusterMismatchError{Database: "hist"}, "give its cluster name (--cluster)"},
		{"cluster extra", &clickhouse.ClusterMismatchError{Database: "hist", Cluster: "c1"}, "or give no cluster (leave out --cluster)"},
		{"CA file", caErr, "--ca-file /nonexistent/ca.pem: "},
		{"bad param", paramErr, `--param "bad": want endpoint.key=value`},
		{"missing param", missingErr, "endpoint position needs --param position.instrument_name=VALUE"},
		{"other", errors.New("fetch instruments: 503"), "fetch instruments: 503"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil {
				t.Fatal("no error to hint")
			}
			if strings.Contains(tc.err.Error(), "--") {
				t.Errorf("the library's message names a flag: %s", tc.err)
			}
			if got := withFlagHints(tc.err); !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want it to contain %q", got, tc.want)
			}
		})
	}
}
