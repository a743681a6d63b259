package iceberg_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/internal/testenv/icebergrest"
	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/sinks/parquet/compact"
	"github.com/optlake/optlake/sinks/sinktest"
	"github.com/optlake/optlake/storage"
)

// TestRESTCommitStateUnknown: a REST catalog that answers a commit with a
// server error (here after committing) leaves its outcome unknown: the
// load fails with one line that says so and is not retried (a retry on the
// moved table would add the file twice), and loading the snapshot again (the
// ledger's catch-up) replaces the file: the table holds each row once, as
// chDB reads it through the catalog.
func TestRESTCommitStateUnknown(t *testing.T) {
	ctx := context.Background()
	srv := icebergrest.Start(t, icebergrest.Options{Token: restToken})
	cfg := iceberg.CatalogConfig{Kind: iceberg.CatalogREST, URI: srv.URL, REST: iceberg.RESTConfig{Token: restToken}}
	dir := t.TempDir()
	st := storage.NewLocal(dir)
	lake, err := iceberg.Open(ctx, st, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lake.Close() })
	loadLake(t, st, lake, 1)
	before, _, _ := srv.Stats()

	pq, err := parquet.New(parquet.Options{Store: st, Iceberg: true, Park: compact.Parking(st)})
	if err != nil {
		t.Fatal(err)
	}
	sink := iceberg.NewSink(pq, lake)
	tb := schema.Instruments
	d := sinktest.Snapshot(t, 2, 250)
	defer d.Release()
	srv.FailNextCommits(http.StatusBadGateway)
	snap := d.Snap
	snap.Endpoint = tb.Name
	w, err := sink.Open(ctx, tb, snap)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range d.Records(tb) {
		if err := w.Write(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	_, err = w.Commit(ctx)
	if err == nil || !strings.Contains(err.Error(), "unknown") || strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), restToken) {
		t.Fatalf("commit answered 502: %v; want one line saying the outcome is unknown, without the token", err)
	}
	after, _, _ := srv.Stats()
	if after != before+1 {
		t.Fatalf("the catalog took %d commits, want exactly 1 (no retry after an unknown outcome)", after-before)
	}

	// The catch-up loads the snapshot again: its file replaces the one
	// the unknown commit added.
	loadLake(t, st, lake, 2)
	tbl, _, err := lake.Table(ctx, tb.Name)
	if err != nil {
		t.Fatal(err)
	}
	if got := tbl.CurrentSnapshot().Summary.Properties["total-data-files"]; got != "2" {
		t.Errorf("total-data-files after the catch-up = %q, want 2", got)
	}
	ch := testenv.NewChDB(t)
	ch.Workdir = dir
	ice, _, err := ch.IcebergRESTDigest(ctx, testenv.RESTCatalog{URL: srv.URL, Token: restToken}, iceberg.DefaultNamespace, tb.Name, tb.Name, "")
	if err != nil {
		t.Fatal(err)
	}
	// The same snapshots loaded once each into a lake without a catalog
	// (the unknown commit's file is still in the folder until expiry, so
	// the folder's files are no reference).
	ref := t.TempDir()
	load(t, storage.NewLocal(ref), 1, 2)
	ch.Workdir = ref
	want, _, err := ch.IcebergDigest(ctx, tb.Name, "")
	if err != nil {
		t.Fatal(err)
	}
	if ice != want {
		t.Errorf("through the REST catalog (bearer): %s, want %s (each snapshot once)", ice, want)
	}
}

// TestRESTWrongCredentials: a REST catalog that refuses the credentials
// fails Open with one line that names the catalog and shows no secret.
func TestRESTWrongCredentials(t *testing.T) {
	ctx := context.Background()
	srv := icebergrest.Start(t, icebergrest.Options{Token: restToken, ClientID: restClient, ClientSecret: restSecret})
	for _, c := range []struct {
		name string
		rest iceberg.RESTConfig
		hide string
	}{
		{"wrong token", iceberg.RESTConfig{Token: "wrong-token-3e9f"}, "wrong-token-3e9f"},
		{"wrong client secret", iceberg.RESTConfig{Credential: restClient + ":wrong-secret-77aa"}, "wrong-secret-77aa"},
		{"no credentials", iceberg.RESTConfig{}, restSecret},
		{"token and credential", iceberg.RESTConfig{Token: restToken, Credential: restClient + ":" + restSecret}, restSecret},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := iceberg.CatalogConfig{Kind: iceberg.CatalogREST, URI: srv.URL, REST: c.rest}
			l, err := iceberg.Open(ctx, storage.NewLocal(t.TempDir()), cfg, nil)
			if err == nil {
				l.Close()
				t.Fatal("opened")
			}
			msg := err.Error()
			if !strings.Contains(msg, srv.URL) || strings.Contains(msg, "\n") || strings.Contains(msg, c.hide) {
				t.Errorf("error %q: want one line naming %s, without %q", msg, srv.URL, c.hide)
			}
		})
	}
}

// TestRESTCatalogSecretsRedacted: a rest catalog's URI password, its
// bearer token and its client secret show in neither Redacted nor Open's
// error: for a closed port, and for a token endpoint that echoes the
// request it refuses (golang.org/x/oauth2 quotes the answer's body in its
// error, over several lines).
func TestRESTCatalogSecretsRedacted(t *testing.T) {
	ctx := context.Background()
	port := closedPort(t)
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, "{\"error\": \"invalid_client\",\n \"error_description\": \"refused %s with %s\"}", body, r.Header.Get("Authorization"))
	}))
	defer echo.Close()
	for _, c := range []struct {
		name, uri, shown string
		rest             iceberg.RESTConfig
		secrets          []string
	}{
		{"uri password", fmt.Sprintf("http://u:s3cretH@127.0.0.1:%d/cat", port), fmt.Sprintf("http://u@127.0.0.1:%d/cat", port), iceberg.RESTConfig{}, []string{"s3cretH"}},
		{"uri query", fmt.Sprintf("https://127.0.0.1:%d/cat?token=s3cretI", port), fmt.Sprintf("https://127.0.0.1:%d/cat", port), iceberg.RESTConfig{}, []string{"s3cretI"}},
		{"token, closed port", fmt.Sprintf("http://127.0.0.1:%d", port), fmt.Sprintf("http://127.0.0.1:%d", port), iceberg.RESTConfig{Token: "s3cretJ"}, []string{"s3cretJ"}},
		{"credential, closed port", fmt.Sprintf("http://127.0.0.1:%d", port), fmt.Sprintf("http://127.0.0.1:%d", port), iceberg.RESTConfig{Credential: "id:s3cretK"}, []string{"s3cretK"}},
		{"credential, echoing token endpoint", echo.URL, echo.URL, iceberg.RESTConfig{Credential: "id:s3cretL"}, []string{"s3cretL"}},
		{"token, echoing server", echo.URL, echo.URL, iceberg.RESTConfig{Token: "s3cretM"}, []string{"s3cretM"}},
		{"credential escaped in the echoed form", echo.URL, echo.URL, iceberg.RESTConfig{Credential: "id:s3c+ret/P"}, []string{"s3c+ret/P", url.QueryEscape("s3c+ret/P")}},
		{"credential and oauth2 uri with a secret", echo.URL, echo.URL, iceberg.RESTConfig{Credential: "id:s3cretN", OAuth2URI: echo.URL + "/token?key=s3cretO"}, []string{"s3cretN"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := iceberg.CatalogConfig{Kind: iceberg.CatalogREST, URI: c.uri, REST: c.rest}
			if got := cfg.Redacted(); got != c.shown {
				t.Errorf("Redacted = %q, want %q", got, c.shown)
			}
			l, err := iceberg.Open(ctx, storage.NewLocal(t.TempDir()), cfg, nil)
			if err == nil {
				l.Close()
				t.Fatal("the catalog opened")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") || !strings.Contains(msg, c.shown) {
				t.Errorf("Open's error is not one line naming %s: %q", c.shown, msg)
			}
			for _, s := range append(c.secrets, c.rest.Secrets()...) {
				if strings.Contains(msg, s) {
					t.Errorf("Open's error shows %s: %s", s, msg)
				}
			}
		})
	}
}
