package main

import (
	"io"
	"slices"
	"testing"
)

func TestFlagsFirst(t *testing.T) {
	t.Parallel()
	app := newApp(host{}, io.Discard, io.Discard)
	for _, tc := range []struct {
		name string
		in   []string
		want []string
	}{
		{"flags after the argument", []string{"optlake", "history", "BTC-X", "--format", "json"},
			[]string{"optlake", "history", "--format", "json", "BTC-X"}},
		{"flag with =", []string{"optlake", "history", "BTC-X", "--format=csv", "--data-dir", "d"},
			[]string{"optlake", "history", "--format=csv", "--data-dir", "d", "BTC-X"}},
		{"already in order", []string{"optlake", "history", "--format", "json", "BTC-X"},
			[]string{"optlake", "history", "--format", "json", "BTC-X"}},
		{"bool flag takes no value", []string{"optlake", "run", "--migrate", "extra"},
			[]string{"optlake", "run", "--migrate", "extra"}},
		{"bool flag after the argument", []string{"optlake", "run", "extra", "--migrate"},
			[]string{"optlake", "run", "--migrate", "extra"}},
		{"double dash ends the flags", []string{"optlake", "history", "--", "-ODD-NAME"},
			[]string{"optlake", "history", "--", "-ODD-NAME"}},
		{"subcommand", []string{"optlake", "config", "check", "x", "--api-url", "http://h"},
			[]string{"optlake", "config", "check", "--api-url", "http://h", "x"}},
		{"unknown command untouched", []string{"optlake", "nope", "a", "--b"},
			[]string{"optlake", "nope", "a", "--b"}},
		{"no command", []string{"optlake"}, []string{"optlake"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := flagsFirst(app, tc.in); !slices.Equal(got, tc.want) {
				t.Errorf("flagsFirst(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
