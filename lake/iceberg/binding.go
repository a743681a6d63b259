package iceberg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	icetable "github.com/optlake/optlake/third_party/iceberg-go/table"

	"github.com/optlake/optlake/storage"
)

// BindingName is the object of a data directory whose tables are kept in
// a catalog: the catalog's kind, name, namespace and table prefix (never
// its URI). Once a table is registered, the catalog holds each table's
// current metadata, and the data directory's vN.metadata.json files stop
// at the version it was registered at: a command that reads the lake
// without that catalog (which would see every table at its stale vN,
// commit on it and expire the catalog's files) refuses to run.
const BindingName = ".optlake.iceberg-catalog"

// binding is the content of BindingName.
type binding struct {
	Kind      string `json:"kind"`
	Name      string `json:"catalog_name"`
	Namespace string `json:"namespace"`
	Prefix    string `json:"table_prefix"`
}

// flags is how the settings name b.
func (b binding) flags() string {
	s := fmt.Sprintf("--iceberg-catalog %s --iceberg-catalog-uri URI --iceberg-catalog-name %s --iceberg-namespace %s", b.Kind, b.Name, b.Namespace)
	if b.Prefix != "" {
		s += " --iceberg-table-prefix " + b.Prefix
	}
	return s
}

// readBinding reads the data directory's binding; nil when it has none.
func readBinding(ctx context.Context, st storage.Store) (*binding, error) {
	data, err := storage.ReadAll(ctx, st, BindingName)
	if errors.Is(err, storage.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", BindingName, err)
	}
	var b binding
	if err := json.Unmarshal(data, &b); err != nil || b.Kind == "" {
		return nil, fmt.Errorf("%s: not a catalog binding (%v)", BindingName, err)
	}
	return &b, nil
}

// unbound fails when the data directory's tables are kept in a catalog:
// a lake without one must not read them. It reads the binding once.
func (c *catalog) unbound(ctx context.Context) error {
	c.mu.Lock()
	done, err := c.bindChecked, c.bindErr
	c.mu.Unlock()
	if done {
		return err
	}
	b, err := readBinding(ctx, c.st)
	if err == nil && b != nil {
		err = fmt.Errorf("this lake's iceberg tables are kept in the %s catalog %q (namespace %s): without it every table would be read at a stale version; pass %s", b.Kind, b.Name, b.Namespace, b.flags())
	}
	c.mu.Lock()
	c.bindChecked, c.bindErr = true, err
	c.mu.Unlock()
	return err
}

// checkBinding checks that the data directory is not bound to another
// catalog than want (or to none).
func checkBinding(ctx context.Context, st storage.Store, want binding) error {
	b, err := readBinding(ctx, st)
	if err != nil || b == nil || *b == want {
		return err
	}
	return fmt.Errorf("this lake's iceberg tables are kept in the %s catalog %q (namespace %s, table prefix %q), not %q (namespace %s, table prefix %q): pass %s", b.Kind, b.Name, b.Namespace, b.Prefix, want.Name, want.Namespace, want.Prefix, b.flags())
}

// bind records that the data directory's tables are kept in the catalog
// (before the first table is registered in it).
func (c *catalog) bind(ctx context.Context) error {
	r := c.remote
	c.mu.Lock()
	done := r.bound
	c.mu.Unlock()
	if done {
		return nil
	}
	b, err := readBinding(ctx, c.st)
	if err != nil {
		return err
	}
	if b == nil {
		data, err := json.Marshal(r.binding)
		if err != nil {
			return err
		}
		if err := c.st.Put(ctx, BindingName, append(data, '\n')); err != nil {
			return fmt.Errorf("write %s: %w", BindingName, err)
		}
	}
	c.mu.Lock()
	r.bound = true
	c.mu.Unlock()
	return nil
}

// catalogWritten is the highest version number of the metadata files a
// catalog wrote for table name in the data directory (NNNNN-uuid.metadata.json),
// and that file's name; 0 when there is none.
func (c *catalog) catalogWritten(ctx context.Context, name string) (int, string, error) {
	prefix := name + "/" + metadataDir + "/"
	infos, err := c.st.List(ctx, prefix)
	if err != nil {
		return 0, "", fmt.Errorf("list %s: %w", prefix, err)
	}
	best, file := 0, ""
	for _, in := range infos {
		base := path.Base(in.Name)
		if strings.HasPrefix(base, "v") {
			continue
		}
		if v := metadataVersion(base); v > best {
			best, file = v, base
		}
	}
	return best, file, nil
}

// checkDrift fails when the data directory holds a vN.metadata.json of
// table name that the catalog's current metadata t does not descend from:
// a run without the catalog committed it after the table was registered,
// and building on the catalog's version would drop that commit.
func (c *catalog) checkDrift(ctx context.Context, name string, t *icetable.Table) error {
	v, err := c.currentVersion(ctx, name)
	if err != nil || v == 0 {
		return err
	}
	file := fmt.Sprintf("v%d.metadata.json", v)
	if v < metadataVersion(t.MetadataLocation()) || path.Base(t.MetadataLocation()) == file {
		return nil
	}
	for e := range t.Metadata().PreviousFiles() {
		if path.Base(e.MetadataFile) == file {
			return nil
		}
	}
	return fmt.Errorf("iceberg table %s: the lake's newest metadata %s is not in the catalog's history (the catalog is at %s): a run without the catalog committed after the table was registered; building on the catalog's version would drop those commits, so nothing is written. Register the table at its right metadata file by hand (drop its catalog row, then register_table with the file you keep)", name, file, path.Base(t.MetadataLocation()))
}
