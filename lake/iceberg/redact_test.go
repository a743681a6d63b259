package iceberg_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/optlake/optlake/internal/redact"
	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/storage"
)

// closedPort is a local TCP port no server listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// CatalogURIShapes are catalog URIs whose password (the second value)
// must never show; the third is what Redacted shows. %d is a closed port.
var catalogURIShapes = []struct{ uri, secret, shown string }{
	{"postgres://u:s3cretA@127.0.0.1:%d/db", "s3cretA", "postgres://u@127.0.0.1:%d/db"},
	{"postgres://u@127.0.0.1:%d/db?password=s3cretB", "s3cretB", "postgres://u@127.0.0.1:%d/db"},
	{"postgresql://u@127.0.0.1:%d/db?sslmode=disable&sslpassword=s3cretC", "s3cretC", "postgresql://u@127.0.0.1:%d/db"},
	{"host=127.0.0.1 port=%d user=u password=s3cretD dbname=db", "s3cretD", "(catalog uri)"},
	{"jdbc:postgresql://127.0.0.1:%d/db?user=u&password=s3cretE", "s3cretE", "jdbc:postgresql://127.0.0.1:%d/db"},
	{"postgres://u:s3cr%%40tF@127.0.0.1:%d/db", "s3cr@tF", "postgres://u@127.0.0.1:%d/db"},
	{"postgres://u:s3cretG@[::1:%d", "s3cretG", "(catalog uri)"},
}

// The catalog URI's password shows in neither Redacted nor Open's error,
// whatever the URI's shape (Redacted masked only user:pass@, printing
// ?password=, ?sslpassword=, a keyword/value DSN's and a JDBC URL's), and
// redact.URISecrets gives a redactor every secret of it.
func TestCatalogURIRedacted(t *testing.T) {
	ctx := context.Background()
	port := closedPort(t)
	for _, c := range catalogURIShapes {
		uri := fmt.Sprintf(c.uri, port)
		shown := c.shown
		if strings.Contains(shown, "%d") {
			shown = fmt.Sprintf(shown, port)
		}
		cfg := iceberg.CatalogConfig{Kind: iceberg.CatalogSQL, URI: uri}
		if got := cfg.Redacted(); got != shown {
			t.Errorf("Redacted(%s) = %q, want %q", c.secret, got, shown)
		}
		l, err := iceberg.Open(ctx, storage.NewLocal(t.TempDir()), cfg, nil)
		if err == nil {
			l.Close()
			t.Errorf("%s: the catalog opened on a closed port", shown)
			continue
		}
		if strings.Contains(err.Error(), c.secret) || !strings.Contains(err.Error(), shown) {
			t.Errorf("Open's error for %s: %v", shown, err)
		}
		red := redact.New(redact.URISecrets(uri)...)
		if out := red.String("connecting to " + uri + " with " + c.secret); strings.Contains(out, c.secret) {
			t.Errorf("redact.URISecrets(%s): %s", shown, out)
		}
	}
}
