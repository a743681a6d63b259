package pqpage

import (
	"bytes"
	"cmp"
	"testing"
)

// key orders strings as bytes.Compare does where keys differ, and
// compareSameKey is bytes.Compare where they are equal.
func FuzzKey(f *testing.F) {
	for _, p := range [][2]string{
		{"", "\x00"}, {"AB", "AB\x00"}, {"option", "option"}, {"BTC-27NOV26-1", "BTC-27NOV26-2"},
		{"BTC-27NO", "BTC-27NOV26"}, {"\xff", "\xfe\xff"}, {"abcdefgh", "abcdefg"}, {"", ""},
	} {
		f.Add([]byte(p[0]), []byte(p[1]))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		want := bytes.Compare(a, b)
		ka, kb := key(a), key(b)
		if ka != kb {
			if got := cmp.Compare(ka, kb); got != want {
				t.Fatalf("keys of %q, %q order %d, bytes %d", a, b, got, want)
			}
			return
		}
		if got := compareSameKey(a, b); got != want {
			t.Fatalf("compareSameKey(%q, %q) = %d, want %d", a, b, got, want)
		}
	})
}
