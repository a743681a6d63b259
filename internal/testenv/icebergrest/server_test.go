package icebergrest_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	icego "github.com/optlake/optlake/third_party/iceberg-go"
	icecatalog "github.com/optlake/optlake/third_party/iceberg-go/catalog"
	icerest "github.com/optlake/optlake/third_party/iceberg-go/catalog/rest"
	icetable "github.com/optlake/optlake/third_party/iceberg-go/table"

	"github.com/optlake/optlake/internal/testenv/icebergrest"
)

const (
	staticToken = "static-token-7f3a"
	clientID    = "optlake"
	secret      = "s3cret-9c1e"
)

func start(t *testing.T) *icebergrest.Server {
	return icebergrest.Start(t, icebergrest.Options{Token: staticToken, ClientID: clientID, ClientSecret: secret})
}

// do sends a request and returns the status and the body.
func do(t *testing.T, method, u, auth, ctype, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer rsp.Body.Close()
	b, _ := io.ReadAll(rsp.Body)
	return rsp.StatusCode, string(b)
}

// issued is a token the server's token endpoint issued.
func issued(t *testing.T, s *icebergrest.Server) string {
	t.Helper()
	code, body := do(t, "POST", s.URL+"/v1/oauth/tokens", "", "application/x-www-form-urlencoded",
		url.Values{"grant_type": {"client_credentials"}, "client_id": {clientID}, "client_secret": {secret}, "scope": {"catalog"}}.Encode())
	var tok struct {
		Token string `json:"access_token"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &tok) != nil || tok.Token == "" {
		t.Fatalf("token endpoint: %d %s", code, body)
	}
	return tok.Token
}

// TestAuth: every route but the token endpoint wants a bearer token the
// server knows; the token endpoint wants the client's credentials.
func TestAuth(t *testing.T) {
	s := start(t)
	tok := issued(t, s)
	form := func(id, sec string) string {
		return url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {sec}}.Encode()
	}
	const formType = "application/x-www-form-urlencoded"
	for _, c := range []struct {
		name, method, path, auth, ctype, body string
		want                                  int
	}{
		{"config without a token", "GET", "/v1/config", "", "", "", 401},
		{"config with a wrong token", "GET", "/v1/config", "Bearer nope", "", "", 401},
		{"config with a basic header", "GET", "/v1/config", "Basic " + staticToken, "", "", 401},
		{"config with the static token", "GET", "/v1/config", "Bearer " + staticToken, "", "", 200},
		{"config with an issued token", "GET", "/v1/config", "Bearer " + tok, "", "", 200},
		{"namespaces without a token", "GET", "/v1/namespaces", "", "", "", 401},
		{"create namespace without a token", "POST", "/v1/namespaces", "", "application/json", `{"namespace":["x"]}`, 401},
		{"commit without a token", "POST", "/v1/namespaces/x/tables/t", "", "application/json", `{"requirements":[],"updates":[]}`, 401},
		{"token with a wrong secret", "POST", "/v1/oauth/tokens", "", formType, form(clientID, "wrong"), 401},
		{"token for another client", "POST", "/v1/oauth/tokens", "", formType, form("other", secret), 401},
		{"token with the credentials", "POST", "/v1/oauth/tokens", "", formType, form(clientID, secret), 200},
		{"token of another grant", "POST", "/v1/oauth/tokens", "", formType, url.Values{"grant_type": {"password"}}.Encode(), 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := do(t, c.method, s.URL+c.path, c.auth, c.ctype, c.body)
			if code != c.want {
				t.Fatalf("%s %s: %d %s, want %d", c.method, c.path, code, body, c.want)
			}
			if code == 401 && strings.HasPrefix(c.path, "/v1/namespaces") && !strings.Contains(body, "NotAuthorizedException") {
				t.Errorf("401 body %s: want the protocol's error model", body)
			}
		})
	}
	// The credentials as HTTP Basic (RFC 6749's preferred form) work too.
	req, _ := http.NewRequest("POST", s.URL+"/v1/oauth/tokens", strings.NewReader("grant_type=client_credentials"))
	req.Header.Set("Content-Type", formType)
	req.SetBasicAuth(clientID, secret)
	rsp, err := http.DefaultClient.Do(req)
	if err != nil || rsp.StatusCode != 200 {
		t.Fatalf("token with basic auth: %v %v", err, rsp)
	}
	rsp.Body.Close()
}

// client is iceberg-go's REST client of s with OAuth2 client credentials.
func client(t *testing.T, s *icebergrest.Server, cred string) (*icerest.Catalog, error) {
	t.Helper()
	c, err := icerest.NewCatalog(context.Background(), "test", s.URL, icerest.WithCredential(cred))
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

func schema() *icego.Schema {
	return icego.NewSchema(0,
		icego.NestedField{ID: 1, Name: "id", Type: icego.PrimitiveTypes.Int64, Required: true},
		icego.NestedField{ID: 2, Name: "name", Type: icego.PrimitiveTypes.String})
}

// TestNamespacesAndTables goes through the catalog's routes with
// iceberg-go's REST client.
func TestNamespacesAndTables(t *testing.T) {
	ctx := context.Background()
	s := start(t)
	if _, err := client(t, s, clientID+":wrong"); err == nil {
		t.Fatal("a client with a wrong secret connected")
	}
	c, err := client(t, s, clientID+":"+secret)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []icetable.Identifier{{"a"}, {"a", "b"}, {"c"}} {
		if err := c.CreateNamespace(ctx, n, icego.Properties{"owner": "test"}); err != nil {
			t.Fatalf("create namespace %v: %v", n, err)
		}
	}
	if err := c.CreateNamespace(ctx, icetable.Identifier{"a"}, nil); !errors.Is(err, icecatalog.ErrNamespaceAlreadyExists) {
		t.Errorf("create namespace a again: %v, want ErrNamespaceAlreadyExists", err)
	}
	top, err := c.ListNamespaces(ctx, nil)
	if err != nil || !slices.EqualFunc(top, []icetable.Identifier{{"a"}, {"c"}}, slices.Equal) {
		t.Errorf("top namespaces: %v %v, want [a c] (a parent's children only)", top, err)
	}
	if sub, err := c.ListNamespaces(ctx, icetable.Identifier{"a"}); err != nil || !slices.EqualFunc(sub, []icetable.Identifier{{"a", "b"}}, slices.Equal) {
		t.Errorf("namespaces under a: %v %v, want [a.b]", sub, err)
	}
	if props, err := c.LoadNamespaceProperties(ctx, icetable.Identifier{"a", "b"}); err != nil || props["owner"] != "test" {
		t.Errorf("load namespace a.b: %v %v", props, err)
	}
	if ok, err := c.CheckNamespaceExists(ctx, icetable.Identifier{"zz"}); ok || err != nil {
		t.Errorf("namespace zz exists: %v %v", ok, err)
	}

	loc := "file://" + filepath.Join(t.TempDir(), "t1")
	id := icetable.Identifier{"a", "b", "t1"}
	t1, err := c.CreateTable(ctx, id, schema(), icecatalog.WithLocation(loc))
	if err != nil {
		t.Fatalf("create table: %v", err)
	}
	if t1.Location() != loc || !strings.HasPrefix(t1.MetadataLocation(), loc+"/metadata/") {
		t.Errorf("table at %s, metadata %s; want %s", t1.Location(), t1.MetadataLocation(), loc)
	}
	if _, err := c.CreateTable(ctx, id, schema(), icecatalog.WithLocation(loc)); !errors.Is(err, icecatalog.ErrTableAlreadyExists) {
		t.Errorf("create t1 again: %v, want ErrTableAlreadyExists", err)
	}
	got, err := c.LoadTable(ctx, id)
	if err != nil || got.MetadataLocation() != t1.MetadataLocation() || got.Metadata().TableUUID() != t1.Metadata().TableUUID() {
		t.Fatalf("load t1: %v %v", got, err)
	}
	// A second table registered at t1's metadata file.
	id2 := icetable.Identifier{"a", "b", "t2"}
	if _, err := c.RegisterTable(ctx, id2, t1.MetadataLocation()); err != nil {
		t.Fatalf("register t2: %v", err)
	}
	if _, err := c.RegisterTable(ctx, id2, t1.MetadataLocation()); !errors.Is(err, icecatalog.ErrTableAlreadyExists) {
		t.Errorf("register t2 again: %v, want ErrTableAlreadyExists", err)
	}
	if _, err := c.RegisterTable(ctx, icetable.Identifier{"nope", "t"}, t1.MetadataLocation()); !errors.Is(err, icecatalog.ErrNoSuchNamespace) {
		t.Errorf("register into a missing namespace: %v, want ErrNoSuchNamespace", err)
	}
	var names []string
	for tid, err := range c.ListTables(ctx, icetable.Identifier{"a", "b"}) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, strings.Join(tid, "."))
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"a.b.t1", "a.b.t2"}) {
		t.Errorf("tables of a.b: %v", names)
	}
	if err := c.DropTable(ctx, id2); err != nil {
		t.Fatalf("drop t2: %v", err)
	}
	if ok, err := c.CheckTableExists(ctx, id2); ok || err != nil {
		t.Errorf("t2 exists after the drop: %v %v", ok, err)
	}
	if _, err := c.LoadTable(ctx, id2); !errors.Is(err, icecatalog.ErrNoSuchTable) {
		t.Errorf("load a dropped table: %v, want ErrNoSuchTable", err)
	}
	if ok, err := c.CheckTableExists(ctx, id); !ok || err != nil {
		t.Errorf("t1 exists: %v %v", ok, err)
	}
}

// TestCommit: the server checks a commit's requirements against the
// table's current metadata and answers a stale or wrong one with 409
// CommitFailedException; an injected 5xx after committing reaches the
// client as "state unknown" while the table did move.
func TestCommit(t *testing.T) {
	ctx := context.Background()
	s := start(t)
	c, err := client(t, s, clientID+":"+secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CreateNamespace(ctx, icetable.Identifier{"n"}, nil); err != nil {
		t.Fatal(err)
	}
	id := icetable.Identifier{"n", "t"}
	base, err := c.CreateTable(ctx, id, schema(), icecatalog.WithLocation("file://"+filepath.Join(t.TempDir(), "t")))
	if err != nil {
		t.Fatal(err)
	}
	// Two writers on the same base: the first commit lands, the second
	// is refused (the metadata moved under it) and nothing is lost.
	addColumn := func(name string) error {
		tx := base.NewTransaction()
		if err := tx.UpdateSchema(true, false).AddColumn([]string{name}, icego.PrimitiveTypes.String, "", false, nil).Commit(); err != nil {
			t.Fatal(err)
		}
		_, err := tx.Commit(ctx)
		return err
	}
	if err := addColumn("a"); err != nil {
		t.Fatalf("first commit: %v", err)
	}
	if err := addColumn("b"); !errors.Is(err, icetable.ErrCommitFailed) {
		t.Fatalf("stale commit: %v, want ErrCommitFailed (409)", err)
	}
	cur, err := c.LoadTable(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cur.Schema().FindFieldByName("a"); !ok {
		t.Fatalf("after the race: schema %v, want column a", cur.Schema())
	}
	if _, ok := cur.Schema().FindFieldByName("b"); ok {
		t.Fatalf("after the race: schema %v has the stale writer's column b", cur.Schema())
	}

	uuid := cur.Metadata().TableUUID().String()
	tok := "Bearer " + issued(t, s)
	for _, c := range []struct {
		name, reqs string
		want       int
	}{
		{"another table's uuid", `[{"type":"assert-table-uuid","uuid":"00000000-0000-0000-0000-000000000001"}]`, 409},
		{"a main that moved", `[{"type":"assert-ref-snapshot-id","ref":"main","snapshot-id":12345}]`, 409},
		{"a schema that changed", `[{"type":"assert-current-schema-id","current-schema-id":7}]`, 409},
		{"the current uuid", `[{"type":"assert-table-uuid","uuid":"` + uuid + `"}]`, 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := do(t, "POST", s.URL+"/v1/namespaces/n/tables/t", tok, "application/json",
				`{"identifier":{"namespace":["n"],"name":"t"},"requirements":`+c.reqs+`,"updates":[{"action":"set-properties","updates":{"k":"`+c.name+`"}}]}`)
			if code != c.want || code == 409 && !strings.Contains(body, "CommitFailedException") {
				t.Fatalf("commit: %d %s, want %d", code, body, c.want)
			}
		})
	}
	if code, body := do(t, "POST", s.URL+"/v1/namespaces/n/tables/missing", tok, "application/json", `{"requirements":[],"updates":[]}`); code != 404 {
		t.Errorf("commit to a missing table: %d %s", code, body)
	}
	commits, conflicts, _ := s.Stats()
	if commits != 2 || conflicts != 4 {
		t.Errorf("stats: %d commits, %d conflicts; want 2 and 4", commits, conflicts)
	}

	cur, _ = c.LoadTable(ctx, id)
	before := cur.MetadataLocation()
	s.FailNextCommits(http.StatusServiceUnavailable)
	tx := cur.NewTransaction()
	if err := tx.SetProperties(icego.Properties{"writer": "c"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx); !errors.Is(err, icerest.ErrCommitStateUnknown) {
		t.Fatalf("commit answered 503: %v, want ErrCommitStateUnknown", err)
	}
	after, err := s.MetadataLocation(ctx, "n", "t")
	if err != nil || after == before {
		t.Errorf("the injected failure did not commit first: %s → %s %v", before, after, err)
	}
}
