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

// Only SQL that cannot change a chDB session runs again after a crash.
func TestReadOnlySQL(t *testing.T) {
	for sql, want := range map[string]bool{
		"SELECT 1 FORMAT TSV;":                                  true,
		"DESCRIBE icebergLocal('t') FORMAT TSV;\nSELECT 'x';\n": true,
		"SET max_threads = 1; WITH 1 AS a SELECT a;":            true,
		"CREATE TABLE t (a Int8) ENGINE = Memory; SELECT 1;":    false,
		"SELECT 1; INSERT INTO t VALUES (1);":                   false,
		"select 1; drop table t":                                false,
		"SELECT 'a;insert' FORMAT TSV;":                         false, // unsure: a change
		"INSERT INTO FUNCTION file('x.parquet') SELECT 1 AS a;": false,
	} {
		if got := readOnlySQL(sql); got != want {
			t.Errorf("readOnlySQL(%q) = %v, want %v", sql, got, want)
		}
	}
}
