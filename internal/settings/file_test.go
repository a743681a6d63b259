package settings

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	os.WriteFile(key, []byte("from-file\n"), 0o600)
	t.Setenv("SETTINGS_TEST_TOKEN", "tok")
	p := filepath.Join(dir, "c.yaml")
	os.WriteFile(p, []byte(`api-url: https://v.example
sink: [parquet, clickhouse]
clickhouse-dsn-file: `+key+`
metrics-file: /m.prom
headers:
  - {name: A, value: "Bearer ${SETTINGS_TEST_TOKEN}"}
  - {name: B, value_file: `+key+`}
endpoints:
  instruments: {path: /v2/i, params: {currency: [BTC, ETH]}}
`), 0o600)
	f, err := LoadFile(p, Run)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"api-url": {"https://v.example"}, "sink": {"parquet", "clickhouse"}, "clickhouse-dsn": {"from-file"},
		"metrics-file": {"/m.prom"}, "endpoints": {"instruments"}}
	if !reflect.DeepEqual(f.values, want) {
		t.Errorf("values %v, want %v", f.values, want)
	}
	if !reflect.DeepEqual(f.Headers, []string{"A: Bearer tok", "B: from-file"}) || f.Paths["instruments"] != "/v2/i" ||
		!reflect.DeepEqual(f.Params, []string{"instruments.currency=BTC,ETH"}) {
		t.Errorf("structured: %+v", f)
	}

	for _, tc := range []struct {
		body string
		line int
	}{
		{"api-url: x\nnope: 1\n", 2},
		{"config: other.yaml\n", 1},
		{"api-url: [a, b]\n", 1},
	} {
		os.WriteFile(p, []byte(tc.body), 0o600)
		_, err := LoadFile(p, Run)
		var fe *FileError
		if !errors.As(err, &fe) || fe.Line != tc.line || fe.Path != p {
			t.Errorf("%q: error %v, want a FileError at line %d", tc.body, err, tc.line)
		}
	}
	// status takes only data-dir: other keys are unknown to it.
	os.WriteFile(p, []byte("api-url: x\n"), 0o600)
	if _, err := LoadFile(p, Status); err == nil {
		t.Error("status accepted api-url")
	}
}
