package venueconf

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlake/optlake/internal/settings"
)

// load reads a config file as `optlake run` does: its settings, then the
// real-venue keys.
func load(path string) (*settings.File, Venue, error) {
	f, err := settings.LoadFile(path, settings.Run)
	if err != nil {
		return nil, Venue{}, err
	}
	v, err := Decode(f)
	return f, v, err
}

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
	f, v, err := load(p)
	if err != nil {
		t.Fatal(err)
	}
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
		// A template's mistake points at its own key's line.
		{"auth:\n  type: template\n  key: k\n  secret: ${VENUE_TEST_KEY}\n  headers:\n    A: '{{ .Key }}'\n    B: '{{ hmac \"sha256\" .Secret }}'\n", 7, "headers.B"},
		{"auth:\n  type: template\n  secret: s\n  sign: '{{ unb64 .Secret }}'\n  headers: {A: '{{ .Signature }}'}\n", 4, "not base64"},
		{"auth:\n  type: template\n  secret: s\n  params: both\n  headers: {A: x}\n", 4, "want query or body"},
		{"auth:\n  type: template\n  secret: s\n  headers:\n    A: '{{ .Key'\n", 5, "unclosed action"},
		{"auth: {type: bearer, token: '${VENUE_TEST_UNSET}'}\n", 1, "VENUE_TEST_UNSET is not set"},
		{"errors: {message: x}\n", 1, "path or code is required"},
		{"endpoints:\n  instruments:\n    pagination: {type: cursor, cursor_path: n}\n", 3, "cursor_param is required"},
		{"endpoints:\n  instruments:\n    pagination: {type: sideways}\n", 3, "unknown type"},
		{"endpoints:\n  instruments:\n    pagination: {type: page, page_param: p, pages: 3}\n", 3, "unknown key \"pages\""},
		{"endpoints:\n  x:\n    kind: private\n", 3, "want account or public"},
		{"endpoints:\n  x:\n    method: PUT\n", 3, "want GET or POST"},
		{"accounts:\n  - label: a\n    auth: {type: basic, pass: x}\n", 3, "unknown key \"pass\""},
	} {
		os.WriteFile(p, []byte(tc.body), 0o600)
		_, _, err := load(p)
		var fe *settings.FileError
		if !errors.As(err, &fe) || fe.Line != tc.line || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%q: error %v, want a FileError at line %d with %q", tc.body, err, tc.line, tc.msg)
		}
	}
}

// The keys of venue semantics: a listing's fields, records by key or
// position, success codes, a cursor from the last record, whole params.
func TestVenueSemanticsKeys(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(p, []byte(`errors: {code: code, message: msg, ok: ["0"], retry_codes: ["50011"]}
endpoints:
  instruments:
    records: data
    params: {instType: OPTION, instFamily: "BTC-USD,ETH-USD", instId: {value: "A,B", split: false}, uly: {value: [X, Y]}}
    fields:
      instrument_name: instId
      strike: stk
      option_type: {from: optType, values: {C: call, P: put}}
      is_active: {from: state, values: {live: true}, default: false}
      creation_timestamp: {from: listTime, time: ms}
      kind: {value: option}
      contract_size: {from: ctMult, scale: 0.5}
      tick_size: {from: priceEndStep, decimals: pricePlace}
  bills:
    kind: account
    records: {path: result, key: pair, columns: [time, open]}
    errors: {path: error, non_empty: true, message: error.0}
    pagination: {type: cursor, cursor_from_record: billId, cursor_plus: 1, cursor_param: after, limit_param: limit, limit: 100}
`), 0o600)
	f, v, err := load(p)
	if err != nil {
		t.Fatal(err)
	}
	if e := v.Errors; e == nil || len(e.OK) != 1 || e.OK[0] != "0" || e.Path != "" {
		t.Errorf("errors %+v", e)
	}
	ins, bills := v.Endpoints["instruments"], v.Endpoints["bills"]
	if len(ins.Fields) != 8 || ins.Fields[7].Decimals != "pricePlace" || ins.Fields[0].From != "instId" || ins.Fields[2].Values["C"] != "call" || *ins.Fields[3].Default != "false" ||
		ins.Fields[4].Time != "ms" || ins.Fields[5].Value != "option" || ins.Fields[6].Scale != 0.5 {
		t.Errorf("fields %+v", ins.Fields)
	}
	if got := ins.Params.Encode(); got != "instId=A%2CB" {
		t.Errorf("whole params %s", got)
	}
	if strings.Join(f.Params, " ") != "instruments.instType=OPTION instruments.instFamily=BTC-USD,ETH-USD instruments.uly=X,Y" {
		t.Errorf("split params %q", f.Params)
	}
	if bills.Records != "result" || bills.Shape.Key != "pair" || strings.Join(bills.Shape.Columns, ",") != "time,open" {
		t.Errorf("records %+v", bills)
	}
	if e := bills.Errors; e == nil || !e.NonEmpty || e.Message != "error.0" {
		t.Errorf("bills errors %+v", e)
	}
	if pg := bills.Pagination; pg == nil || pg.CursorFromRecord != "billId" || pg.CursorPlus != 1 {
		t.Errorf("pagination %+v", pg)
	}
	for _, tc := range []struct {
		body string
		line int
		msg  string
	}{
		{"errors: {path: e, ok: [0]}\n", 1, "code is required"},
		{"errors: {code: c, non_empty: yes please}\n", 1, "non_empty: want true or false"},
		{"endpoints:\n  positions:\n    fields: {strike: stk}\n", 3, "only the instrument listing takes fields"},
		{"endpoints:\n  instruments:\n    fields:\n      instrument_name: instId\n      name: x\n", 5, "name: not a column of instruments"},
		{"endpoints:\n  instruments:\n    fields:\n      strike: {from: stk, time: s}\n", 4, "strike is not one"},
		{"endpoints:\n  instruments:\n    fields:\n      strike: {from: stk, scale: big}\n", 4, "want a number other than 0"},
		{"endpoints:\n  instruments:\n    fields:\n      kind: {form: k}\n", 4, `unknown key "form"`},
		{"endpoints:\n  instruments:\n    records: {path: data, keys: k}\n", 3, `unknown key "keys"`},
		{"endpoints:\n  ohlc:\n    kind: account\n    records: {path: data, key: open, columns: [time, open]}\n", 4, `key "open" is also a column`},
		{"endpoints:\n  instruments:\n    pagination: {type: cursor, cursor_from_record: id}\n", 3, "cursor_param is required"},
		{"endpoints:\n  instruments:\n    params: {symbols: {split: false}}\n", 3, "value is required"},
	} {
		os.WriteFile(p, []byte(tc.body), 0o600)
		_, _, err := load(p)
		var fe *settings.FileError
		if !errors.As(err, &fe) || fe.Line != tc.line || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%q: error %v, want a FileError at line %d with %q", tc.body, err, tc.line, tc.msg)
		}
	}
}

// The endpoints' parameter values and bodies that are templates are handed
// to the template signers (only those are rendered), not to the others.
func TestInlineTemplatesReachTheSigners(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(p, []byte(`auth: {type: template, key: k, secret: s, headers: {A: '{{ .Key }}'}}
accounts:
  - label: hm
    auth: {type: hmac, key: k, secret: s, sign: '{body}', headers: {A: '{signature}'}}
endpoints:
  trades:
    kind: account
    path: /private/get_trades
    params: {end: '{{ .Millis }}', currency: BTC}
    auth: {type: template, key: k, secret: s, headers: {A: '{{ .Key }}'}}
  subs:
    kind: account
    path: /private/get_subaccounts
    method: post
    body: '{"wallet":"{{ .Key }}"}'
    auth: {type: template, key: k, secret: s, headers: {A: '{{ .Key }}'}}
`), 0o600)
	_, v, err := load(p)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(v.Auth.Inline, " | ")
	if !strings.Contains(got, "{{ .Millis }}") || !strings.Contains(got, `{"wallet":"{{ .Key }}"}`) || strings.Contains(got, "BTC") {
		t.Errorf("inline templates %q", got)
	}
	if hm := v.AccountAuth["hm"]; len(hm.Inline) != 0 {
		t.Errorf("an hmac signer got inline templates %q", hm.Inline)
	}
	// A template that a signer other than a template one would sign (here
	// the account's hmac, or no signer at all) would reach the venue as
	// written: the config is refused, naming the endpoint and the signer.
	for _, tc := range []struct{ conf, want string }{
		{"auth: {type: template, key: k, secret: s, headers: {A: '{{ .Key }}'}}\naccounts:\n  - label: hm\n    auth: {type: hmac, key: k, secret: s, sign: '{body}', headers: {A: '{signature}'}}\nendpoints:\n  trades:\n    kind: account\n    path: /t\n    params: {end: '{{ .Millis }}'}\n",
			"endpoints.trades: \"{{ .Millis }}\" is a template, but accounts[hm].auth (type hmac)"},
		{"auth: {type: bearer, token: t}\nendpoints:\n  subs:\n    kind: account\n    path: /s\n    method: post\n    body: '{\"w\":\"{{ .Key }}\"}'\n",
			"but auth (type bearer) signs it"},
		{"endpoints:\n  trades:\n    kind: account\n    path: /t\n    params: {end: '{{ .Millis }}'}\n", "but auth signs nothing"},
		{"auth: {type: template, key: k, secret: s, headers: {A: '{{ .Key }}'}}\nendpoints:\n  trades:\n    kind: account\n    path: /t\n    params: {end: {value: '{{ .Millis }}', split: false}}\n    auth: {type: none}\n", "endpoints.trades.auth signs nothing"},
	} {
		os.WriteFile(p, []byte(tc.conf), 0o600)
		if _, _, err := load(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("config\n%s\nerror %v, want one with %q", tc.conf, err, tc.want)
		}
	}
	// A mistake in one is the config's, at the endpoints' line.
	os.WriteFile(p, []byte("auth: {type: template, key: k, secret: s, headers: {A: '{{ .Key }}'}}\nendpoints:\n  trades:\n    kind: account\n    path: /t\n    params: {end: '{{ .Milis }}'}\n"), 0o600)
	_, _, err = load(p)
	var fe *settings.FileError
	if !errors.As(err, &fe) || fe.Line != 3 || !strings.Contains(err.Error(), "Milis") {
		t.Errorf("error %v, want a FileError at line 3 naming .Milis", err)
	}
}
