// Package layout is the one home of the lake's layout in the data
// directory: a table's day folders and file names, and the folders and
// names of compaction's own state. It imports nothing of optlake, so the
// sink, compaction, the table formats and the readers all name things
// through it.
//
//	TABLE/date=YYYY-MM-DD/NAME.parquet            a table's day (Day, SplitFile)
//	.compact/                                     compaction's state (CompactDir)
//	.compact/{stage,trash,tmp}/                   its working folders (StageDir, TrashDir, SpillDir)
//	.compact/pending/TABLE/date=YYYY-MM-DD/NAME   parked files (Parked)
//	.compact/journal/TABLE@YYYY-MM-DD.json        a publish under way (Journal)
//	.compact/compacted-before                     run --compact's mark (CompactedBefore)
//
// Parked files are a replay's or a late load's files for a snapshot that
// a day's compacted file already holds: the next compaction of the day
// merges them in. They are parked, whatever the folder's name on disk
// ("pending", the name lakes have always had; kept so every lake reads).
package layout

import (
	"path"
	"strings"
	"time"
)

// dayKey starts a day folder's name: date=YYYY-MM-DD (hive-style).
const dayKey = "date="

// Day is table's folder of date (YYYY-MM-DD): TABLE/date=YYYY-MM-DD.
func Day(table, date string) string { return table + "/" + dayKey + date }

// Days is the prefix of every day folder of table: TABLE/date=.
func Days(table string) string { return table + "/" + dayKey }

// DayOf is the day folder's date, from its base name (date=YYYY-MM-DD,
// with or without a trailing slash); ok is false for any other name.
func DayOf(base string) (date string, ok bool) {
	date, ok = strings.CutPrefix(strings.TrimSuffix(base, "/"), dayKey)
	if !ok {
		return "", false
	}
	if _, err := time.Parse(time.DateOnly, date); err != nil {
		return "", false
	}
	return date, true
}

// SplitFile parses a table file's name, TABLE/date=YYYY-MM-DD/NAME.parquet
// (relative to the data directory, or to the parked folder): ok is false
// for anything else (another depth, a hidden or temporary file, a name
// that is not a day's). It does not tell tables from other folders
// (IsTable).
func SplitFile(rel string) (table, date, name string, ok bool) {
	parts := strings.Split(rel, "/")
	if len(parts) != 3 || !strings.HasSuffix(parts[2], ".parquet") || strings.HasPrefix(parts[2], ".") {
		return "", "", "", false
	}
	date, ok = DayOf(parts[1])
	return parts[0], date, parts[2], ok
}

// IsTable tells a table's folder (its name, without a slash) from the
// data directory's others: the raw archive, hidden (.compact) and "_"
// folders (_ledger, _state).
func IsTable(name string) bool {
	return name != "" && name != "raw" && !strings.HasPrefix(name, ".") && !strings.HasPrefix(name, "_")
}

// CompactDir is compaction's folder for its own state (staging, journal,
// parked files, trash, spills): outside every table folder, so readers
// of the lake never see it.
const CompactDir = ".compact"

// Compaction's working folders: a new day staged before its swap, the
// trash of replaced days (deleted whole after a grace), sorted runs spilled
// by a merge.
const (
	StageDir = CompactDir + "/stage"
	TrashDir = CompactDir + "/trash"
	SpillDir = CompactDir + "/tmp"
)

// ParkedDir holds the parked files, by table and day.
const ParkedDir = CompactDir + "/pending/"

// Parked is the folder of the files parked for table's day:
// .compact/pending/TABLE/date=YYYY-MM-DD/.
func Parked(table, date string) string { return ParkedDir + Day(table, date) + "/" }

// ParkedFile is where the table file rel (TABLE/date=…/NAME) is parked.
func ParkedFile(rel string) string { return ParkedDir + rel }

// IsParked reports whether name (relative to the data directory) is a
// parked file's.
func IsParked(name string) bool { return strings.HasPrefix(path.Clean(name)+"/", ParkedDir) }

// JournalDir holds one journal per day whose compaction is being
// published.
const JournalDir = CompactDir + "/journal/"

// Journal is the journal of table's day: .compact/journal/TABLE@DATE.json.
func Journal(table, date string) string { return JournalDir + table + "@" + date + ".json" }

// JournalOf parses a journal's name (Journal); ok is false for any other.
func JournalOf(name string) (table, date string, ok bool) {
	stem, ok := strings.CutSuffix(strings.TrimPrefix(name, JournalDir), ".json")
	if !ok {
		return "", "", false
	}
	table, date, ok = strings.Cut(stem, "@")
	return table, date, ok
}

// CompactedBefore holds the first day (YYYY-MM-DD) that run --compact has
// not compacted every table of: the days before it hold compacted files
// only, unless a later load of an older snapshot wrote there since (which
// moves it back).
const CompactedBefore = CompactDir + "/compacted-before"
