package secret

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolveExpandFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("file-secret\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SECRET_TEST_TOKEN", "env-secret")
	os.Unsetenv("SECRET_TEST_UNSET")

	for _, tc := range []struct {
		name    string
		fn      func(string) (string, error)
		in      string
		want    string
		wantErr string
	}{
		{"resolve literal", Resolve, "Bearer abc", "Bearer abc", ""},
		{"resolve env", Resolve, "${SECRET_TEST_TOKEN}", "env-secret", ""},
		{"resolve env unset", Resolve, "${SECRET_TEST_UNSET}", "", "environment variable SECRET_TEST_UNSET is not set"},
		{"resolve env only whole", Resolve, "Bearer ${SECRET_TEST_TOKEN}", "Bearer ${SECRET_TEST_TOKEN}", ""},
		{"resolve dollar kept", Resolve, "pa$$word", "pa$$word", ""},
		{"resolve file", Resolve, "@" + file, "file-secret", ""},
		{"resolve missing file", Resolve, "@" + filepath.Join(dir, "nope"), "", "read secret file"},
		{"expand inside", Expand, "Bearer ${SECRET_TEST_TOKEN}", "Bearer env-secret", ""},
		{"expand bare", Expand, "x$SECRET_TEST_TOKEN", "xenv-secret", ""},
		{"expand unset", Expand, "${SECRET_TEST_UNSET}/${SECRET_TEST_TOKEN}", "", "SECRET_TEST_UNSET is not set"},
		{"expand none", Expand, "plain", "plain", ""},
		{"read file", ReadFile, file, "file-secret", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.fn(tc.in)
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want %q", err, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Errorf("error %v", err)
			case got != tc.want:
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if err != nil && (strings.Contains(err.Error(), "env-secret") || strings.Contains(err.Error(), "file-secret")) {
				t.Errorf("error shows the secret: %v", err)
			}
		})
	}
}

func TestFileKey(t *testing.T) {
	for _, tc := range []struct {
		key, base string
		ok        bool
	}{
		{"clickhouse-dsn-file", "clickhouse-dsn", true},
		{"value_file", "value", true},
		{"api-url", "", false},
		{"-file", "", false},
		{"profile", "", false},
	} {
		if base, ok := FileKey(tc.key); base != tc.base || ok != tc.ok {
			t.Errorf("FileKey(%q) = %q, %v; want %q, %v", tc.key, base, ok, tc.base, tc.ok)
		}
	}
}

// ExpandBraced replaces ${VAR} only and lists the values it put in.
func TestExpandBraced(t *testing.T) {
	t.Setenv("OPTLAKE_SUB", "77")
	t.Setenv("OPTLAKE_EMPTY", "")
	got, vals, err := ExpandBraced(`{"a": ${OPTLAKE_SUB}, "b": "$OPTLAKE_SUB ${1x} ${} ${OPTLAKE_EMPTY}$", "c": "${OPTLAKE_SUB"}`)
	if err != nil || got != `{"a": 77, "b": "$OPTLAKE_SUB ${1x} ${} $", "c": "${OPTLAKE_SUB"}` || len(vals) != 1 || vals[0] != "77" {
		t.Errorf("%s %q %v", got, vals, err)
	}
	if _, _, err := ExpandBraced(`${OPTLAKE_UNSET_X} ${OPTLAKE_UNSET_Y}`); err == nil || err.Error() != "environment variable OPTLAKE_UNSET_X, OPTLAKE_UNSET_Y is not set" {
		t.Errorf("unset: %v", err)
	}
}
