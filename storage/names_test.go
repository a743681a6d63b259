package storage_test

import (
	"strings"
	"testing"

	"github.com/optlake/optlake/storage"
)

func TestSafeName(t *testing.T) {
	for _, c := range []struct{ in, plain, dots string }{
		{"", "_", "_"},
		{".", "_", "_"},
		{"..", "__", "__"},
		{"a.b", "a_b", "a.b"},
		{"v1.2-x_y", "v1_2-x_y", "v1.2-x_y"},
		{"../etc", "___etc", ".._etc"},
		{"a/b c", "a_b_c", "a_b_c"},
		{"é", "__", "__"},
	} {
		if got := storage.SafeName(c.in); got != c.plain {
			t.Errorf("SafeName(%q) = %q, want %q", c.in, got, c.plain)
		}
		if got := storage.SafeNameDots(c.in); got != c.dots {
			t.Errorf("SafeNameDots(%q) = %q, want %q", c.in, got, c.dots)
		}
	}
}

// parquetSafeName is the sanitizer the Parquet sink had before it used
// SafeNameDots: its on-disk names must not change.
func parquetSafeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
		if !ok {
			b[i] = '_'
		}
	}
	out := string(b)
	if strings.Trim(out, ".") == "" {
		out = strings.ReplaceAll(out, ".", "_")
	}
	if out == "" {
		out = "_"
	}
	return out
}

func FuzzSafeNameDots(f *testing.F) {
	for _, s := range []string{"", ".", "...", "a.b", "../x", "trades", "ab\x00."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := storage.SafeNameDots(s), parquetSafeName(s); got != want {
			t.Fatalf("SafeNameDots(%q) = %q, the Parquet sink named it %q", s, got, want)
		}
		got := storage.SafeName(s)
		if strings.ContainsAny(got, "./") || got == "" || len(got) != max(len(s), 1) {
			t.Fatalf("SafeName(%q) = %q", s, got)
		}
	})
}
