package storage

// TimeLayout formats snapshot times in object names (raw bodies, Parquet
// files, ledger records): sortable, UTC, ms.
const TimeLayout = "20060102T150405.000Z"

// SafeName maps s into an object name's part: letters, digits, '-' and
// '_' stay, every other byte becomes '_', and "" is "_". Raw archive and
// ledger names use it.
func SafeName(s string) string { return safeName(s, false) }

// SafeNameDots is SafeName with a second alphabet that also keeps '.'
// (Parquet table folders and file names, whose on-disk names keep the
// dots they always had). A name of dots only ("", ".", "..") has its dots
// replaced by '_', so that no part escapes or hides in its folder.
func SafeNameDots(s string) string { return safeName(s, true) }

func safeName(s string, dots bool) string {
	b := []byte(s)
	onlyDots := true
	for i, c := range b {
		if dots && c == '.' {
			continue
		}
		onlyDots = false
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	if onlyDots {
		for i := range b {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "_"
	}
	return string(b)
}
