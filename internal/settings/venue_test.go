package settings

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestVenueKeys(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "secret")
	os.WriteFile(secretFile, []byte("file-secret\n"), 0o600)
	t.Setenv("VENUE_TEST_KEY", "env-key")
	p := filepath.Join(dir, "c.yaml")
	os.WriteFile(p, []byte(`api-url: https://v.example
auth:
  type: hmac
  key: ${VENUE_TEST_KEY}
  secret: "@`+secretFile+`"
  hash: sha256
  timestamp: ms
  sign: "{timestamp}\n{nonce}\n{method}\n{path_query}\n{body}\n"
  headers: {Authorization: "deri-hmac-sha256 id={key},ts={timestamp},sig={signature},nonce={nonce}"}
errors: {path: error, code: error.code, message: error.message, retry_codes: [10028]}
accounts:
  - label: main
    auth: {type: bearer, token: "${VENUE_TEST_KEY}"}
  - label: sub
    auth: {type: session, login: {path: /login, body: '{"k":"${VENUE_TEST_KEY}"}'}, token: result.token, expires_in: result.expires_in}
endpoints:
  instruments:
    records: result
    pagination: {type: cursor, cursor_path: result.next, cursor_param: cursor, limit_param: count, limit: 100}
  trades:
    kind: account
    path: /api/v2/private/get_trades
    method: post
    body: '{"jsonrpc":"2.0","method":"private/get_trades"}'
    auth: none
`), 0o600)
	f, err := LoadFile(p, Run)
	if err != nil {
		t.Fatal(err)
	}
	v := f.Venue
	if v.Auth == nil || v.Auth.Key != "env-key" || v.Auth.Secret != "file-secret" || len(v.Auth.Headers) != 1 {
		t.Errorf("auth %+v", v.Auth)
	}
	if v.Errors == nil || v.Errors.Code != "error.code" || len(v.Errors.RetryCodes) != 1 {
		t.Errorf("errors %+v", v.Errors)
	}
	if a := v.AccountAuth["main"]; a == nil || a.Token != "env-key" {
		t.Errorf("account auth %+v", v.AccountAuth)
	}
	if a := v.AccountAuth["sub"]; a == nil || a.TokenPath != "result.token" || a.Login.Body != `{"k":"env-key"}` {
		t.Errorf("session %+v", a)
	}
	ins, tr := v.Endpoints["instruments"], v.Endpoints["trades"]
	if ins == nil || ins.Records != "result" || ins.Pagination == nil || ins.Pagination.Limit != 100 {
		t.Errorf("instruments %+v", ins)
	}
	if tr == nil || tr.Kind != "account" || tr.Method != "POST" || tr.Auth == nil || tr.Auth.Type != "none" || f.Paths["trades"] == "" {
		t.Errorf("trades %+v", tr)
	}
	for _, s := range []string{"env-key", "file-secret"} {
		found := false
		for _, got := range v.Secrets() {
			found = found || got == s
		}
		if !found {
			t.Errorf("secret %q not listed for redaction", s)
		}
	}

	for _, tc := range []struct {
		body string
		line int
		msg  string
	}{
		{"auth:\n  type: magic\n", 2, "unknown type"},
		{"auth:\n  type: hmac\n  key: k\n  secret: s\n  sign: x\n  hash: md5\n  headers: {A: '{signature}'}\n", 2, "hash"},
		{"auth:\n  type: hmac\n  key: k\n  secret: s\n  sign: '{when}'\n  headers: {A: '{signature}'}\n", 2, "unknown placeholder {when}"},
		{"auth: {type: bearer}\n", 1, "token is required"},
		{"auth: {type: bearer, token: '${VENUE_TEST_UNSET}'}\n", 1, "VENUE_TEST_UNSET is not set"},
		{"errors: {code: x}\n", 1, "path is required"},
		{"endpoints:\n  instruments:\n    pagination: {type: cursor, cursor_path: n}\n", 3, "cursor_param is required"},
		{"endpoints:\n  instruments:\n    pagination: {type: sideways}\n", 3, "unknown type"},
		{"endpoints:\n  instruments:\n    pagination: {type: page, page_param: p, pages: 3}\n", 3, "unknown key \"pages\""},
		{"endpoints:\n  x:\n    kind: private\n", 3, "want account or public"},
		{"endpoints:\n  x:\n    method: PUT\n", 3, "want GET or POST"},
		{"accounts:\n  - label: a\n    auth: {type: basic, pass: x}\n", 3, "unknown key \"pass\""},
	} {
		os.WriteFile(p, []byte(tc.body), 0o600)
		_, err := LoadFile(p, Run)
		var fe *FileError
		if !errors.As(err, &fe) || fe.Line != tc.line || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%q: error %v, want a FileError at line %d with %q", tc.body, err, tc.line, tc.msg)
		}
	}
}
