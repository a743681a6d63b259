package testenv

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The harness starts a versitygw that serves its buckets from Dir() and
// refuses unsigned requests (credentials are checked).
func TestVersityGW(t *testing.T) {
	g := StartVersityGW(t, "lake")
	if st, err := os.Stat(filepath.Join(g.Dir(), "lake")); err != nil || !st.IsDir() {
		t.Fatalf("bucket folder: %v", err)
	}
	req, _ := http.NewRequest(http.MethodPut, g.Endpoint()+"/lake/anon", strings.NewReader("x"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("unsigned PUT: %s, want 403", resp.Status)
	}
	if _, err := os.Stat(filepath.Join(g.Dir(), "lake", "anon")); err == nil {
		t.Fatal("an unsigned PUT wrote an object")
	}
	if !strings.HasPrefix(g.URL("lake", "p"), "s3://lake/p?endpoint=http://127.0.0.1:") {
		t.Fatalf("URL %s", g.URL("lake", "p"))
	}
	g.Stop()
	if _, err := http.Get(g.Endpoint()); err == nil {
		t.Fatal("server still answers after Stop")
	}
}

// SetCredentials works in parallel tests (t.Setenv would panic there) and
// leaves the keys set for the process and the CLI processes it starts.
func TestSetCredentialsInParallel(t *testing.T) {
	for _, name := range []string{"a", "b"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var g VersityGW
			g.SetCredentials(t)
			if os.Getenv("AWS_ACCESS_KEY_ID") != S3AccessKey || os.Getenv("AWS_SECRET_ACCESS_KEY") != S3SecretKey {
				t.Fatalf("keys not set: %q", os.Getenv("AWS_ACCESS_KEY_ID"))
			}
		})
	}
}
