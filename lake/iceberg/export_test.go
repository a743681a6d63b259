package iceberg

import (
	"context"

	iceio "github.com/optlake/optlake/third_party/iceberg-go/io"

	"github.com/optlake/optlake/storage"
)

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

// StoreIO is the IO of the lake of st (its metadata and manifests), as a
// catalog server's file IO.
func StoreIO(st storage.Store) func(ctx context.Context, location string) (iceio.IO, error) {
	c := New(st, nil).cat
	return func(ctx context.Context, _ string) (iceio.IO, error) { return c.io(ctx), nil }
}
