package dotpath

import (
	"encoding/json"
	"testing"
)

func TestLookup(t *testing.T) {
	var doc any
	if err := json.Unmarshal([]byte(`{"result":{"token":"t","list":[{"id":7},null]},"n":null}`), &doc); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path string
		want string // JSON of the value; "" when absent
	}{
		{"result.token", `"t"`},
		{"result.list.0.id", `7`},
		{"result.list.1", `null`},
		{"n", `null`},
		{"result.list.2", ""},
		{"result.list.-1", ""},
		{"result.list.x", ""},
		{"result.token.x", ""},
		{"missing", ""},
		{"", `{"n":null,"result":{"list":[{"id":7},null],"token":"t"}}`},
	}
	for _, c := range cases {
		v, ok := Lookup(doc, c.path)
		got := ""
		if ok {
			b, _ := json.Marshal(v)
			got = string(b)
		}
		if got != c.want {
			t.Errorf("Lookup(%q) = %s, want %s", c.path, got, c.want)
		}
	}
}
