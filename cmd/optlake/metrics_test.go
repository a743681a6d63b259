package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/optlake/optlake/venuesim"
)

// counterValue finds a series by name and labels in Prometheus text.
func counterValue(t *testing.T, text, name string, labels map[string]string) float64 {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parse metrics: %v\n%s", err, text)
	}
	fam, ok := fams[name]
	if !ok {
		t.Fatalf("no %s in:\n%s", name, text)
	}
	for _, m := range fam.Metric {
		if matches(m, labels) {
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			}
		}
	}
	t.Fatalf("no %s%v", name, labels)
	return 0
}

func matches(m *dto.Metric, labels map[string]string) bool {
	n := 0
	for _, l := range m.Label {
		if v, ok := labels[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(labels)
}

// One-shot runs write the textfile; counters carry on across runs.
func TestMetricsFile(t *testing.T) {
	t.Parallel()
	sim, url := startSim(t, venuesim.Config{Seed: 3})
	dir := t.TempDir()
	mf := filepath.Join(dir, "metrics", "optlake.prom")
	for i := 0; i < 2; i++ {
		sim.Advance(1)
		if res := optlake(t, "run", "--api-url", url, "--data-dir", dir, "--endpoints", "instruments", "--metrics-file", mf); res.code != 0 {
			t.Fatal(res.stderr)
		}
	}
	b, err := os.ReadFile(mf)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if v := counterValue(t, text, "optlake_runs_total", map[string]string{"status": "ok"}); v != 2 {
		t.Errorf("runs_total ok = %v, want 2", v)
	}
	want := float64(2 * sim.NumInstruments())
	if v := counterValue(t, text, "optlake_rows_total", map[string]string{"table": "instruments", "sink": "parquet"}); v != want {
		t.Errorf("rows_total = %v, want %v", v, want)
	}
	if v := counterValue(t, text, "optlake_last_run_ok", nil); v != 1 {
		t.Errorf("last_run_ok = %v", v)
	}
}

// In --every mode /metrics and /healthz are served.
func TestMetricsEndpoint(t *testing.T) {
	t.Parallel()
	_, url := startSim(t, venuesim.Config{Seed: 3})
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd, _, errb := startCLI(t, "run", "--api-url", url, "--data-dir", dir, "--endpoints", "instruments", "--every", "1s", "--listen", addr)
	waitFor(t, "three snapshots", func() bool { return len(snapshotsOnDisk(dir)) >= 3 })
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("%s: %v\n%s", path, err, errb.String())
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	if v := counterValue(t, body, "optlake_runs_total", map[string]string{"status": "ok"}); v < 2 {
		t.Errorf("runs_total ok = %v, want >= 2", v)
	}
	if code, body := get("/healthz"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); exitCode(err) != 0 {
		t.Errorf("exit %d: %s", exitCode(err), errb.String())
	}
}
