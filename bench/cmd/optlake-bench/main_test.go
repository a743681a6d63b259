package main

import (
	"slices"
	"testing"
)

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("1m, 100k,250000,100K")
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{100_000, 250_000, 1_000_000}; !slices.Equal(got, want) {
		t.Errorf("parseSizes = %v, want %v", got, want)
	}
	for _, bad := range []string{"", "x", "-1k", "0"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q) did not fail", bad)
		}
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[int]string{100_000: "100k", 1_000_000: "1m", 1234: "1234"} {
		if got := sizeLabel(n); got != want {
			t.Errorf("sizeLabel(%d) = %s, want %s", n, got, want)
		}
	}
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567.4: "1,234,567", -4500: "-4,500"} {
		if got := thousands(v); got != want {
			t.Errorf("thousands(%v) = %s, want %s", v, got, want)
		}
	}
}
