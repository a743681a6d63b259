package schema

// Inferred (account) tables are built at run time by pipeline/infer from
// what the venue sends; their fixed part is declared here.

// AccountKey is the key of every inferred table.
var AccountKey = []string{"source", "account", "snapshot_time", "row_index"}

// AccountPartitionTime partitions every inferred table.
const AccountPartitionTime = "snapshot_time"

// ParentIndex is the column a child table (an array or map of a parent
// row) adds after AccountMetaColumns.
const ParentIndex = "parent_index"

// AccountMetaColumns are the columns every inferred table starts with, in
// order: parent names the parent table of a child table ("" for an
// endpoint's own table), which adds ParentIndex.
func AccountMetaColumns(parent string) []Column {
	cols := []Column{
		{Name: "snapshot_time", Type: TimestampMs, Doc: "when the snapshot was taken (UTC, ms)"},
		{Name: "run_id", Type: String, Doc: "time-sortable id of the run"},
		{Name: "source", Type: String, LowCardinality: true, Doc: "the venue's name"},
		{Name: "account", Type: String, LowCardinality: true, Doc: "the account's label"},
		{Name: "row_index", Type: Int64, Doc: "position of the row in this table for the snapshot and account"},
	}
	if parent != "" {
		cols = append(cols, Column{Name: ParentIndex, Type: Int64, Doc: "row_index of the parent row in " + parent})
	}
	return cols
}

// AccountMetaNames are the names of every column AccountMetaColumns may
// return; no inferred column may take one.
func AccountMetaNames() []string {
	var out []string
	for _, c := range AccountMetaColumns("x") {
		out = append(out, c.Name)
	}
	return out
}
