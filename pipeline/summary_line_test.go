package pipeline

import (
	"strings"
	"testing"
)

// The summary line says ok, partial (something loaded, something did not,
// each named) or FAILED (nothing loaded).
func TestSummaryLine(t *testing.T) {
	both := func(chErr string) map[string]SinkResult {
		return map[string]SinkResult{"parquet": {Rows: 3}, "clickhouse": {Error: chErr}}
	}
	for _, tc := range []struct {
		name string
		sum  Summary
		want []string
	}{
		{"ok", Summary{OK: true, Endpoints: []EndpointResult{{Endpoint: "instruments", Status: "ok", Sinks: both("")}}},
			[]string{" ok in ", "instruments ok: "}},
		{"a sink down", Summary{Endpoints: []EndpointResult{{Endpoint: "instruments", Status: "failed", Sinks: both("dial tcp: refused")}}},
			[]string{" partial in ", "[clickhouse failed] [parquet ok]"}},
		{"an endpoint down", Summary{Endpoints: []EndpointResult{
			{Endpoint: "instruments", Status: "ok", Sinks: map[string]SinkResult{"parquet": {}}},
			{Endpoint: "positions", Status: "failed"}}},
			[]string{" partial in ", "positions failed: "}},
		{"nothing loaded", Summary{Endpoints: []EndpointResult{{Endpoint: "instruments", Status: "failed"}}},
			[]string{" FAILED in "}},
	} {
		line := tc.sum.Line()
		for _, w := range tc.want {
			if !strings.Contains(line, w) {
				t.Errorf("%s: %q lacks %q", tc.name, line, w)
			}
		}
	}
}
