package layout_test

import (
	"testing"

	"github.com/optlake/optlake/lake/layout"
)

func TestSplitFile(t *testing.T) {
	for _, tc := range []struct {
		rel               string
		table, date, name string
		ok                bool
	}{
		{rel: "instruments/date=2026-11-23/20261123T000000.000Z-r1.parquet", table: "instruments", date: "2026-11-23", name: "20261123T000000.000Z-r1.parquet", ok: true},
		{rel: layout.Day("runs", "2026-01-02") + "/compacted-x-000.parquet", table: "runs", date: "2026-01-02", name: "compacted-x-000.parquet", ok: true},
		{rel: "instruments/date=2026-11-23/.tmp-1.parquet"},         // hidden: a temporary file
		{rel: "instruments/date=2026-11-23/notes.txt"},              // not Parquet
		{rel: "instruments/date=2026-13-01/a.parquet"},              // not a day
		{rel: "instruments/day=2026-11-23/a.parquet"},               // not a day folder
		{rel: "instruments/date=2026-11-23/sub/a.parquet"},          // too deep
		{rel: "instruments/a.parquet"},                              // too shallow
		{rel: "instruments/metadata/v1.metadata.json"},              // Iceberg metadata
		{rel: "instruments/date=2026-11-23/a.parquet/", ok: false},  // a folder
		{rel: "instruments/date=2026-11-23/", table: "", ok: false}, // the day itself
		{rel: "instruments/date=2026-11-23", table: "", ok: false},  // the day itself
		{rel: "instruments/date=2026-11-2/a.parquet", table: "", ok: false},
	} {
		table, date, name, ok := layout.SplitFile(tc.rel)
		if ok != tc.ok || ok && (table != tc.table || date != tc.date || name != tc.name) {
			t.Errorf("SplitFile(%q) = %q %q %q %v, want %q %q %q %v", tc.rel, table, date, name, ok, tc.table, tc.date, tc.name, tc.ok)
		}
	}
}

// The names a lake already holds on disk stay what they were: a lake
// written before this package reads the same.
func TestNamesOnDisk(t *testing.T) {
	for got, want := range map[string]string{
		layout.Day("instruments", "2026-11-23"):                         "instruments/date=2026-11-23",
		layout.Days("instruments"):                                      "instruments/date=",
		layout.Parked("instruments", "2026-11-23"):                      ".compact/pending/instruments/date=2026-11-23/",
		layout.ParkedFile("runs/date=2026-11-23/a.pq"):                  ".compact/pending/runs/date=2026-11-23/a.pq",
		layout.Journal("instruments", "2026-11-23"):                     ".compact/journal/instruments@2026-11-23.json",
		layout.CompactedBefore:                                          ".compact/compacted-before",
		layout.StageDir + " " + layout.TrashDir + " " + layout.SpillDir: ".compact/stage .compact/trash .compact/tmp",
	} {
		if got != want {
			t.Errorf("%q, want %q", got, want)
		}
	}
	if table, date, ok := layout.JournalOf(layout.Journal("account_balance__x", "2026-01-02")); !ok || table != "account_balance__x" || date != "2026-01-02" {
		t.Errorf("JournalOf: %q %q %v", table, date, ok)
	}
	if _, _, ok := layout.JournalOf(layout.JournalDir + "notes.txt"); ok {
		t.Error("JournalOf took a name that is not a journal's")
	}
	for name, want := range map[string]bool{"instruments": true, "raw": false, ".compact": false, "_ledger": false, "": false} {
		if layout.IsTable(name) != want {
			t.Errorf("IsTable(%q) = %v", name, !want)
		}
	}
	if !layout.IsParked(layout.ParkedFile("t/date=2026-01-01/a.parquet")) || layout.IsParked("t/date=2026-01-01/a.parquet") {
		t.Error("IsParked")
	}
}
