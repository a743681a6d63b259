package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkRunWideBodies times `optlake run` (one account endpoint into
// Parquet, a fresh data directory each time) on the bodies of issue 17,
// served by a local server: time and allocations per run. Peak RSS of the
// same runs as a process is in docs/PERFORMANCE.md (/usr/bin/time -v).
func BenchmarkRunWideBodies(b *testing.B) {
	flat := func(n int) string {
		var s strings.Builder
		s.WriteByte('{')
		for i := range n {
			if i > 0 {
				s.WriteByte(',')
			}
			fmt.Fprintf(&s, `"field_%05d":%d`, i, i)
		}
		s.WriteByte('}')
		return s.String()
	}
	shapes := shapeBodies() // positions (20,000) and balances (30)
	cases := []struct {
		name, path, body, config string
	}{
		{"positions_map_20000", "/v1/public/get_positions", shapes["/v1/public/get_positions"], ""},
		{"currencies_30", "/v1/public/get_all_account_balances", shapes["/v1/public/get_all_account_balances"], ""},
		{"flat_50000", "/v1/public/get_account_balance", flat(50000), ""},
		{"flat_5000", "/v1/public/get_account_balance", flat(5000), ""},
		{"flat_50000_no_map", "/v1/public/get_account_balance", flat(50000), "endpoints:\n  account_balance: {maps: {forbid: [\"$\"]}}\n"},
	}
	endpoint := map[string]string{
		"/v1/public/get_positions":            "positions",
		"/v1/public/get_all_account_balances": "all_account_balances",
		"/v1/public/get_account_balance":      "account_balance",
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != c.path {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, c.body)
			}))
			defer srv.Close()
			args := []string{"run", "--api-url", srv.URL, "--endpoints", endpoint[c.path], "--log-level", "warn"}
			if c.config != "" {
				cfg := filepath.Join(b.TempDir(), "optlake.yaml")
				if err := os.WriteFile(cfg, []byte(c.config), 0o644); err != nil {
					b.Fatal(err)
				}
				args = append(args, "--config", cfg)
			}
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				dir := b.TempDir()
				b.StartTimer()
				var out, errb strings.Builder
				if code := run(host{}, append([]string{"optlake"}, append(args, "--data-dir", dir)...), &out, &errb); code != 0 {
					b.Fatalf("exit %d: %s", code, errb.String())
				}
			}
		})
	}
}
