package iceberg

import (
	icego "github.com/optlake/optlake/third_party/iceberg-go"
	icetable "github.com/optlake/optlake/third_party/iceberg-go/table"

	"github.com/optlake/optlake/schema"
)

// sortOrder is the order compaction writes table's files in
// (schema.SortKey: the key's columns ascending, strings by their bytes,
// nulls first; see compact's compareRows), as an Iceberg sort order of the
// schema sc; ok is false for a table compaction leaves alone or a key
// column sc lacks.
func sortOrder(table string, sc *icego.Schema) (icetable.SortOrder, bool) {
	key := schema.SortKey(table)
	if len(key) == 0 {
		return icetable.UnsortedSortOrder, false
	}
	fields := make([]icetable.SortField, 0, len(key))
	for _, name := range key {
		f, ok := sc.FindFieldByName(name)
		if !ok {
			return icetable.UnsortedSortOrder, false
		}
		fields = append(fields, icetable.SortField{
			SourceIDs: []int{f.ID}, Transform: icego.IdentityTransform{},
			Direction: icetable.SortASC, NullOrder: icetable.NullsFirst,
		})
	}
	so, err := icetable.NewSortOrder(1, fields)
	if err != nil {
		return icetable.UnsortedSortOrder, false
	}
	return so, true
}
