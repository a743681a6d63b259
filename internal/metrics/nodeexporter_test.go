package metrics

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/testenv"
)

// node_exporter itself (Debian's prometheus-node-exporter, when installed)
// reads the textfile: no scrape error, and the runs' metrics come out of
// its /metrics as written.
func TestNodeExporterReadsTextfile(t *testing.T) {
	bin := testenv.Command(t, "apt-get install prometheus-node-exporter; the textfile was checked with the Prometheus parser and linter only", "prometheus-node-exporter", "node_exporter")
	dir := t.TempDir()
	path := filepath.Join(dir, "optlake.prom")
	for _, sum := range []*Run{okRun(), failedRun()} {
		m := New()
		if err := m.LoadTextfile(path); err != nil {
			t.Fatal(err)
		}
		m.Observe(sum)
		if err := m.WriteTextfile(path); err != nil {
			t.Fatal(err)
		}
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "--collector.disable-defaults", "--collector.textfile",
		"--collector.textfile.directory="+dir, "--web.listen-address="+addr)
	logf, err := os.Create(filepath.Join(t.TempDir(), "node_exporter.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("node_exporter's log:\n%s", b)
		}
		logf.Close()
	})
	url := "http://" + addr + "/metrics"
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node_exporter did not answer on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	f := scrape(t, url)
	f.expect(t, 0, "node_textfile_scrape_error")
	checkTwoRuns(t, f)
}
