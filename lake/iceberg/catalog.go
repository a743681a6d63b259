package iceberg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	icego "github.com/optlake/optlake/third_party/iceberg-go"
	icecatalog "github.com/optlake/optlake/third_party/iceberg-go/catalog"
	iceio "github.com/optlake/optlake/third_party/iceberg-go/io"
	icetable "github.com/optlake/optlake/third_party/iceberg-go/table"

	"github.com/optlake/optlake/storage"
)

// catalog is optlake's own catalog of the lake's tables, with no server:
// table NAME lives at <root>/NAME/, and its current metadata is the
// highest <root>/NAME/metadata/vN.metadata.json. A commit creates the next
// version only if it is absent (storage.Store.CreateExclusive: O_EXCL/link
// on a local disk, If-None-Match: * on a bucket), so of two writers racing
// for vN+1 exactly one wins; the loser gets icetable.ErrCommitFailed and
// iceberg-go retries it on the new state. It implements the part of
// iceberg-go's catalog.Catalog that tables use (icetable.CatalogIO).
//
// It keeps the version it last loaded or committed of each table: a commit
// builds on it without listing and parsing the metadata again, and a stale
// one (another writer committed since) loses the create of the next version
// and is refreshed by iceberg-go's retry (LoadTable always reads the store).
type catalog struct {
	st   storage.Store
	root string
	also []string // rootSpellings(root)

	// moved are the tables whose metadata places them elsewhere than
	// root (a relative location of a lake made before locations were
	// absolute, or a lake copied from another folder), by the root their
	// metadata names; Warehouse.relocate registers them at root. A relative
	// location is always this lake's (its metadata is in it); another
	// absolute one is adopted only when adopt is set (Warehouse.Relocate),
	// else refused.
	moved map[string]string
	adopt bool

	mu   sync.Mutex
	last map[string]known

	// bindChecked and bindErr are the result of unbound, read once.
	bindChecked bool
	bindErr     error

	// remote, when set, is the catalog server that holds each table's
	// current metadata location (--iceberg-catalog sql): loads and commits
	// go through it, and the vN.metadata.json files stop at the version
	// it was registered at.
	remote *remoteCatalog

	// crash, for tests, is called with the table and the step of a commit
	// just done (see Warehouse.SetCrash); nil in production.
	crash func(table, step string)
}

// done reports the object name just written to the crash hook: a
// manifest, a manifest list or a metadata version of its table.
func (c *catalog) done(name string) {
	if c.crash == nil {
		return
	}
	table, rest, _ := strings.Cut(name, "/")
	base := path.Base(rest)
	switch {
	case strings.HasSuffix(base, ".metadata.json"):
		c.crash(table, "metadata")
	case strings.HasPrefix(base, "snap-") && strings.HasSuffix(base, ".avro"):
		c.crash(table, "manifest-list")
	case strings.HasSuffix(base, ".avro"):
		c.crash(table, "manifest")
	}
}

// known is a table's version as this catalog last saw it.
type known struct {
	v int
	t *icetable.Table
}

func (c *catalog) remember(name string, v int, t *icetable.Table) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last = map[string]known{}
	}
	c.last[name] = known{v, t}
}

func (c *catalog) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.last, name)
}

// cached is the table's last seen version, or a fresh load.
func (c *catalog) cached(ctx context.Context, ident icetable.Identifier) (*icetable.Table, int, error) {
	name, err := tableName(ident)
	if err != nil {
		return nil, 0, err
	}
	c.mu.Lock()
	k, ok := c.last[name]
	c.mu.Unlock()
	if ok {
		return k.t, k.v, nil
	}
	return c.load(ctx, ident)
}

var _ icetable.CatalogIO = (*catalog)(nil)

const metadataDir = "metadata"

// versionHint is the Hadoop-catalog convention some readers (DuckDB's
// iceberg_scan on a folder, Spark's HadoopTables) use to find the current
// version; it is written after each commit and is only a hint.
const versionHint = "version-hint.text"

func newCatalog(st storage.Store, root string) *catalog {
	return &catalog{st: st, root: root, also: rootSpellings(root)}
}

func (c *catalog) io(ctx context.Context) *storeIO {
	c.mu.Lock()
	also := slices.Clone(c.also)
	for _, r := range c.moved {
		also = append(also, r)
	}
	c.mu.Unlock()
	return &storeIO{ctx: ctx, st: c.st, root: c.root, also: also, done: c.done}
}

func (c *catalog) fsF(ctx context.Context) (iceio.IO, error) { return c.io(ctx), nil }

func tableName(ident icetable.Identifier) (string, error) {
	if len(ident) == 0 || ident[len(ident)-1] == "" {
		return "", fmt.Errorf("%w: empty table name", icecatalog.ErrInvalidIdentifier)
	}
	return ident[len(ident)-1], nil
}

// metadataName is the store name of version v of table's metadata.
func metadataName(table string, v int) string {
	return fmt.Sprintf("%s/%s/v%d.metadata.json", table, metadataDir, v)
}

// currentVersion is the highest committed metadata version of table, 0
// when the table does not exist.
func (c *catalog) currentVersion(ctx context.Context, table string) (int, error) {
	prefix := table + "/" + metadataDir + "/v"
	infos, err := c.st.List(ctx, prefix)
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", prefix, err)
	}
	best := 0
	for _, in := range infos {
		s, ok := strings.CutSuffix(strings.TrimPrefix(in.Name, prefix), ".metadata.json")
		if !ok {
			continue
		}
		if v, err := strconv.Atoi(s); err == nil && v > best {
			best = v
		}
	}
	return best, nil
}

// LoadTable implements icetable.CatalogIO.
func (c *catalog) LoadTable(ctx context.Context, ident icetable.Identifier) (*icetable.Table, error) {
	t, _, err := c.load(ctx, ident)
	return t, err
}

func (c *catalog) load(ctx context.Context, ident icetable.Identifier) (*icetable.Table, int, error) {
	name, err := tableName(ident)
	if err != nil {
		return nil, 0, err
	}
	if c.remote != nil {
		return c.loadRemote(ctx, name)
	}
	if err := c.unbound(ctx); err != nil {
		return nil, 0, err
	}
	return c.loadLocal(ctx, ident, name)
}

// loadLocal loads table name at its newest vN.metadata.json.
func (c *catalog) loadLocal(ctx context.Context, ident icetable.Identifier, name string) (*icetable.Table, int, error) {
	v, err := c.currentVersion(ctx, name)
	if err != nil {
		return nil, 0, err
	}
	if v == 0 {
		return nil, 0, fmt.Errorf("%w: %s", icecatalog.ErrNoSuchTable, name)
	}
	loc := c.io(ctx).location(metadataName(name, v))
	t, err := icetable.NewFromLocation(ctx, ident, loc, c.fsF, c)
	if err != nil {
		return nil, 0, fmt.Errorf("load table %s: %w", name, err)
	}
	if err := c.checkLocation(name, t.Location()); err != nil {
		return nil, 0, err
	}
	c.remember(name, v, t)
	return t, v, nil
}

// MovedError is a table whose metadata places it elsewhere than in the
// data directory: written with a relative --data-dir before locations were
// absolute URIs, or copied (or moved) from another folder or bucket.
// Iceberg metadata names every file by its absolute location, so no
// reader can follow it from here until the table is registered again at
// its new place (Warehouse.Relocate: `optlake lake convert --to iceberg`).
type MovedError struct {
	Table, Location, Root string
}

func (e *MovedError) Error() string {
	if !isAbsolute(e.Location) {
		return fmt.Sprintf("iceberg table %s: its metadata names the relative location %q, which readers resolve against their own folder; `optlake lake convert --to iceberg --data-dir DIR` registers its files at %s/%s (absolute)", e.Table, e.Location, e.Root, e.Table)
	}
	return fmt.Sprintf("iceberg table %s: its metadata places it at %s, not in this data directory (%s): the lake was copied or moved, and Iceberg metadata names every file by its absolute location; run optlake with the --data-dir the lake was made with, or make this copy a lake of its own with `optlake lake convert --to iceberg --data-dir DIR` (it registers the current files at %s/%s; earlier snapshots are dropped)", e.Table, e.Location, e.Root, e.Root, e.Table)
}

// isAbsolute reports a location that names one place whatever folder a
// reader runs in: a URI with a scheme, or an absolute path.
func isAbsolute(loc string) bool {
	return strings.Contains(loc, "://") || strings.HasPrefix(loc, "file:/") || path.IsAbs(loc)
}

// checkLocation checks that the location loc of table name is in the data
// directory. A relative location (a lake made before locations were
// absolute) is recorded in moved, its files read through it, and the next
// write relocates the table; another absolute location is a *MovedError
// unless c.adopt is set.
func (c *catalog) checkLocation(name, loc string) error {
	want := c.root + "/" + name
	if loc == want {
		return nil
	}
	for _, r := range c.also {
		if loc == r+"/"+name {
			return nil
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := strings.CutSuffix(strings.TrimSuffix(loc, "/"), "/"+name)
	if !ok || isAbsolute(loc) && !c.adopt {
		return &MovedError{Table: name, Location: loc, Root: c.root}
	}
	if c.moved == nil {
		c.moved = map[string]string{}
	}
	c.moved[name] = r
	return nil
}

// movedFrom is the root that table name's metadata names when it is not
// the data directory's ("" when it is).
func (c *catalog) movedFrom(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.moved[name]
}

// create makes version 1 of table name with schema sc, partitioned by the
// day of the column partTime ("" for none), sorted as compaction writes
// it (sortOrder). A table that exists already
// (another writer created it first) is loaded instead.
func (c *catalog) create(ctx context.Context, name string, sc *icego.Schema, partTime string, props icego.Properties) (*icetable.Table, error) {
	spec := *icego.UnpartitionedSpec
	if partTime != "" {
		f, ok := sc.FindFieldByName(partTime)
		if !ok {
			return nil, fmt.Errorf("create table %s: no column %s to partition by", name, partTime)
		}
		spec = icego.NewPartitionSpec(icego.PartitionField{
			SourceIDs: []int{f.ID}, FieldID: 1000, Name: partTime + "_day", Transform: icego.DayTransform{},
		})
	}
	if c.remote == nil {
		if err := c.unbound(ctx); err != nil {
			return nil, err
		}
	}
	loc := c.io(ctx).location(name)
	order, _ := sortOrder(name, sc)
	md, err := icetable.NewMetadata(sc, &spec, order, loc, props)
	if err != nil {
		return nil, fmt.Errorf("create table %s: %w", name, err)
	}
	ident := icetable.Identifier{name}
	metaName := metadataName(name, 1)
	switch err := c.writeExclusive(ctx, metaName, md); {
	case errors.Is(err, storage.ErrExist):
		return c.LoadTable(ctx, ident)
	case err != nil:
		return nil, fmt.Errorf("create table %s: %w", name, err)
	}
	if c.remote != nil {
		return c.LoadTable(ctx, ident) // registers version 1
	}
	c.writeHint(ctx, name, 1)
	t := icetable.New(ident, md, c.io(ctx).location(metaName), c.fsF, c)
	c.remember(name, 1, t)
	return t, nil
}

// writeExclusive writes md as the object name, only if name is absent
// (storage.ErrExist otherwise).
func (c *catalog) writeExclusive(ctx context.Context, name string, md icetable.Metadata) error {
	b, err := json.Marshal(md)
	if err != nil {
		return fmt.Errorf("encode metadata: %w", err)
	}
	w, err := c.st.CreateExclusive(ctx, name)
	if err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		w.Abort()
		return err
	}
	if err := w.Commit(); err != nil {
		return err
	}
	c.done(name)
	return nil
}

// writeHint writes version-hint.text; a failure is harmless (readers that
// use it fall back to listing, ours never read it).
func (c *catalog) writeHint(ctx context.Context, table string, v int) {
	if c.remote != nil {
		return // the catalog's versions are not vN files
	}
	_ = c.st.Put(ctx, table+"/"+metadataDir+"/"+versionHint, []byte(strconv.Itoa(v)))
}

// CommitTable implements icetable.CatalogIO: it checks the requirements
// against the current version N, applies the updates (iceberg-go builds
// the metadata) and creates vN+1 only if absent. A lost race is
// icetable.ErrCommitFailed, which iceberg-go retries on the new state.
func (c *catalog) CommitTable(ctx context.Context, ident icetable.Identifier, reqs []icetable.Requirement, updates []icetable.Update) (icetable.Metadata, string, error) {
	name, err := tableName(ident)
	if err != nil {
		return nil, "", err
	}
	if c.remote != nil {
		return c.commitRemote(ctx, name, reqs, updates)
	}
	cur, v, err := c.cached(ctx, ident)
	if err != nil {
		return nil, "", err
	}
	for _, r := range reqs {
		if err := r.Validate(cur.Metadata()); err != nil {
			c.forget(name)
			return nil, "", fmt.Errorf("%w: %w", icetable.ErrCommitFailed, err)
		}
	}
	md, err := icetable.UpdateTableMetadata(cur.Metadata(), updates, cur.MetadataLocation())
	if err != nil {
		return nil, "", fmt.Errorf("commit table %s: %w", name, err)
	}
	if md.Location() != cur.Location() {
		return nil, "", fmt.Errorf("commit table %s: the location cannot change", name)
	}
	next := metadataName(name, v+1)
	switch err := c.writeExclusive(ctx, next, md); {
	case errors.Is(err, storage.ErrExist):
		c.forget(name) // the next attempt builds on the store's state
		return nil, "", fmt.Errorf("%w: %s v%d was committed by another writer", icetable.ErrCommitFailed, name, v+1)
	case err != nil:
		return nil, "", fmt.Errorf("commit table %s: %w", name, err)
	}
	c.writeHint(ctx, name, v+1)
	loc := c.io(ctx).location(next)
	c.remember(name, v+1, icetable.New(ident, md, loc, c.fsF, c))
	return md, loc, nil
}
