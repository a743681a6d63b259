package storage

// TimeLayout formats snapshot times in object names (raw bodies, Parquet
// files, ledger records): sortable, UTC, ms.
const TimeLayout = "20060102T150405.000Z"

// SafeName maps s into an object name's part: letters, digits, '-' and
// '_' stay, every other byte becomes '_', and "" is "_".
func SafeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "_"
	}
	return string(b)
}
