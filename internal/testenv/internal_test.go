package testenv

import "testing"

func TestSanitizeIdent(t *testing.T) {
	for in, want := range map[string]string{
		"TestFoo":                     "testfoo",
		"TestFoo/sub_case#01":         "testfoo_sub_case_01",
		"Test/ünïcode & spaces  here": "test_n_code_spaces_here",
		"///":                         "x",
		"TestAVeryLongNameThatGoesOnAndOnAndOnForeverAndEver/AndEvenMore": "testaverylongnamethatgoesonandonandonforeverandev",
	} {
		got := sanitizeIdent(in, 48)
		if got != want[:min(len(want), 48)] {
			t.Errorf("sanitizeIdent(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLastLines(t *testing.T) {
	if got := lastLines("a\nb\nc\n", 2); got != "b\nc" {
		t.Fatalf("lastLines = %q", got)
	}
	if got := lastLines("a", 5); got != "a" {
		t.Fatalf("lastLines = %q", got)
	}
}

func TestTailBuffer(t *testing.T) {
	b := &tailBuffer{max: 4}
	b.Write([]byte("abc"))
	b.Write([]byte("def"))
	if b.String() != "cdef" {
		t.Fatalf("tail = %q", b.String())
	}
}
