package main

import (
	"encoding/pem"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlake/optlake/venuesim"
)

// TLS is verified by default; --ca-file trusts a private CA; the explicit
// --insecure-skip-verify turns verification off, loudly.
func TestTLSVerification(t *testing.T) {
	t.Parallel()
	sim := venuesim.New(venuesim.Config{Seed: 1})
	srv := httptest.NewTLSServer(sim.Handler())
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644)
	base := []string{"run", "--api-url", srv.URL, "--endpoints", "instruments", "--max-attempts", "1"}

	res := optlake(t, append(base, "--data-dir", t.TempDir())...)
	if res.code != exitFailure || !strings.Contains(lastLine(res.stderr), "certificate") {
		t.Errorf("untrusted certificate: exit %d %q", res.code, lastLine(res.stderr))
	}
	if res := optlake(t, append(base, "--data-dir", t.TempDir(), "--ca-file", ca)...); res.code != 0 {
		t.Errorf("--ca-file: exit %d %s", res.code, res.stderr)
	}
	res = optlake(t, append(base, "--data-dir", t.TempDir(), "--insecure-skip-verify")...)
	if res.code != 0 || !strings.Contains(res.stderr, "TLS certificate verification is OFF") {
		t.Errorf("--insecure-skip-verify: exit %d %s", res.code, res.stderr)
	}
}
