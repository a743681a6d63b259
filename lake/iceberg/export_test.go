package iceberg

import "github.com/optlake/optlake/storage"

// StampName is stampName, for the tests.
var StampName = stampName

// NewAt is New with the catalog's root set to root as given: a relative
// root is how a lake made with a relative --data-dir before locations were
// absolute wrote its metadata.
func NewAt(st storage.Store, root string) *Warehouse {
	l := New(st, nil)
	l.cat = newCatalog(st, root)
	return l
}
