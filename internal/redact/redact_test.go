package redact

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	r := New("tok-123456", "p@ss word", "ab")
	cases := []struct{ in, want string }{
		{"Authorization: Bearer tok-123456", "Authorization: Bearer " + Mask},
		{"dsn clickhouse://u:p%40ss+word@h", "dsn clickhouse://u:" + Mask + "@h"},
		{"x p%40ss%20word y", "x " + Mask + " y"},
		{"short ab stays", "short ab stays"},
	}
	for _, c := range cases {
		if got := r.String(c.in); got != c.want {
			t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	var nilR *Redactor
	if nilR.String("x") != "x" {
		t.Error("nil redactor changed text")
	}
}

// A multi-line secret (a PEM key) is masked however it is laid out: as
// it is, as an indented YAML block, as an escaped JSON string.
func TestMultiLineSecret(t *testing.T) {
	key := "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIK9xaMoY9YNZW7cI2Sgg08UQ5IARyl8v\nAwEHoUQDQgAEug+9U86vxLgaMRZTKgtTV\n-----END EC PRIVATE KEY-----"
	r := New(key)
	for _, text := range []string{
		"secret: " + key,
		"secret: |-\n      " + strings.ReplaceAll(key, "\n", "\n      "),
		`{"secret": "` + strings.ReplaceAll(key, "\n", `\n`) + `"}`,
	} {
		got := r.String(text)
		for _, line := range strings.Split(key, "\n")[1:3] {
			if strings.Contains(got, line) {
				t.Errorf("%q: a line of the key is left: %q", text, got)
			}
		}
	}
}

func TestURL(t *testing.T) {
	u, _ := url.Parse("clickhouse://optlake:hunter22@127.0.0.1:9000/db?key=tok-123456")
	got := New("tok-123456").URL(u)
	if strings.Contains(got, "hunter22") || strings.Contains(got, "tok-123456") {
		t.Errorf("URL leaked a secret: %s", got)
	}
}

func TestHandler(t *testing.T) {
	var buf bytes.Buffer
	r := New("sekrit-value")
	log := slog.New(r.Handler(slog.NewJSONHandler(&buf, nil))).With("hdr", "X: sekrit-value")
	log.Info("sent sekrit-value", "err", errors.New("bad sekrit-value"), slog.Group("g", "v", "sekrit-value"), "n", 3)
	out := buf.String()
	if strings.Contains(out, "sekrit-value") {
		t.Fatalf("log leaked a secret: %s", out)
	}
	if strings.Count(out, Mask) != 4 || !strings.Contains(out, `"n":3`) {
		t.Errorf("unexpected log line: %s", out)
	}
}

// A redacted error hides the secret and still unwraps to its cause.
func TestErr(t *testing.T) {
	r := New("hunter22")
	cause := &url.Error{Op: "dial", URL: "clickhouse://u:hunter22@h", Err: context.Canceled}
	for _, err := range []error{
		r.Err(cause),
		r.Errorf("connect: %w", cause),
		fmt.Errorf("outer: %w", r.Err(cause)),
		New().With(DSNPassword("clickhouse://u:hunter22@h:9000/db")).Err(cause),
		(*Redactor)(nil).With("hunter22").Err(cause),
	} {
		if strings.Contains(err.Error(), "hunter22") || !strings.Contains(err.Error(), Mask) {
			t.Errorf("message %q", err)
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%q does not unwrap to context.Canceled", err)
		}
		var ue *url.Error
		if !errors.As(err, &ue) || ue != cause {
			t.Errorf("%q does not unwrap to its *url.Error", err)
		}
		var re *Error
		if !errors.As(err, &re) {
			t.Errorf("%q is not a *redact.Error", err)
		}
	}
	if r.Err(nil) != nil {
		t.Error("Err(nil) != nil")
	}
	if r.With("other-secret").String("hunter22 other-secret") != Mask+" "+Mask || r.String("other-secret") != "other-secret" {
		t.Error("With changed the original or lost a secret")
	}
	if DSNPassword("clickhouse://h:9000/db") != "" || DSNPassword("clickhouse://u:p%40ss@h") != "p@ss" {
		t.Error("DSNPassword")
	}
}

// A URL's password is masked by where it stands, whatever its length and
// whether or not it was registered as a secret.
func TestUserinfo(t *testing.T) {
	cases := []struct{ in, want string }{
		{"clickhouse://u:p@h:9000/db", "clickhouse://u:" + Mask + "@h:9000/db"},
		{"dsn clickhouse://optlake:ab1@ch1:9000,ch2:9000/optlake failed", "dsn clickhouse://optlake:" + Mask + "@ch1:9000,ch2:9000/optlake failed"},
		{"s3://bucket/prefix?endpoint=http://127.0.0.1:9000", "s3://bucket/prefix?endpoint=http://127.0.0.1:9000"},
		{"clickhouse://user@h/db and http://h:80/x", "clickhouse://user@h/db and http://h:80/x"},
		{"a://u:" + Mask + "@h", "a://u:" + Mask + "@h"},
	}
	for _, c := range cases {
		if got := New().String(c.in); got != c.want {
			t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	var nilR *Redactor
	if got := nilR.String("clickhouse://u:x@h"); strings.Contains(got, ":x@") {
		t.Errorf("nil redactor kept a DSN password: %s", got)
	}
}

// A secret with characters JSON escapes (a passphrase with a quote, &, <,
// > or a backslash) is masked in JSON text too, however it was escaped:
// config check shows the config as JSON redacted, then as YAML.
func TestJSONEscapedSecret(t *testing.T) {
	for _, sec := range []string{`pa"ss&word<12>`, `back\slash-pass`, "tab\tpass-1234"} {
		r := New(sec)
		html, _ := json.Marshal(map[string]string{"passphrase": sec})
		var plain strings.Builder
		enc := json.NewEncoder(&plain)
		enc.SetEscapeHTML(false)
		enc.Encode(map[string]string{"passphrase": sec})
		for _, text := range []string{string(html), plain.String()} {
			var back map[string]string
			if err := json.Unmarshal([]byte(r.String(text)), &back); err != nil || back["passphrase"] != Mask {
				t.Errorf("%q: redacted %q (%v)", sec, r.String(text), err)
			}
		}
	}
}
