package iceberg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"

	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx"
	_ "modernc.org/sqlite"             // driver "sqlite"

	icego "github.com/optlake/optlake/third_party/iceberg-go"
	icecatalog "github.com/optlake/optlake/third_party/iceberg-go/catalog"
	icesql "github.com/optlake/optlake/third_party/iceberg-go/catalog/sql"
	iceio "github.com/optlake/optlake/third_party/iceberg-go/io"
	icetable "github.com/optlake/optlake/third_party/iceberg-go/table"

	"github.com/optlake/optlake/storage"
)

// Catalog kinds (--iceberg-catalog).
const (
	CatalogNone = "none" // the lake's own metadata files, no server
	CatalogSQL  = "sql"  // the JDBC-compatible SQL catalog, on PostgreSQL or SQLite
	CatalogREST = "rest" // an Iceberg REST catalog server (restcatalog.go)
)

// Defaults of CatalogConfig.
const (
	DefaultCatalogName = "optlake"
	DefaultNamespace   = "optlake"
)

// CatalogConfig is where an Iceberg lake's tables are registered.
type CatalogConfig struct {
	// Kind is CatalogNone ("" too), CatalogSQL or CatalogREST.
	Kind string
	// URI of a sql catalog: postgres://user:pass@host:5432/db (or
	// postgresql://) for PostgreSQL; sqlite:PATH (a file; sqlite:///abs
	// too) for SQLite. Of a rest catalog: its base URL, http(s)://host[:port][/path]
	// (the client adds /v1/…). Its password is a secret: errors name the
	// catalog by Redacted().
	URI string
	// REST is a rest catalog's warehouse and credentials.
	REST RESTConfig
	// Name is the catalog's name (the catalog_name column), Namespace the
	// tables' namespace ("a.b" for a nested one), Prefix what each table's
	// name in the catalog starts with (the lake's table name follows).
	Name, Namespace, Prefix string
	// ReadOnly opens the catalog to read (status, history): nothing is
	// written to the catalog or the data directory, a table the catalog
	// lacks is a *NotRegisteredError, and a sqlite: file must exist.
	ReadOnly bool
}

// ParseCatalogKind checks a --iceberg-catalog value ("" is none).
func ParseCatalogKind(s string) (string, error) {
	switch k := strings.ToLower(strings.TrimSpace(s)); k {
	case "", CatalogNone:
		return CatalogNone, nil
	case CatalogSQL, CatalogREST:
		return k, nil
	}
	return "", fmt.Errorf("--iceberg-catalog %q: want none, sql or rest", s)
}

// Redacted is the catalog's URI as errors and logs show it: a URL keeps
// its scheme, user, host and path, without a password and without its
// query (where ?password=, ?sslpassword= and the like go); sqlite:PATH as
// is unless it has a query; anything else (a keyword/value DSN, text that
// does not parse) is the fixed "(catalog uri)".
func (c CatalogConfig) Redacted() string { return RedactURI(c.URI) }

// RedactURI is uri as CatalogConfig.Redacted shows it.
func RedactURI(uri string) string {
	const opaque = "(catalog uri)"
	s, jdbc := strings.CutPrefix(uri, "jdbc:")
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || strings.ContainsAny(s, " \t\n") {
		return opaque
	}
	if u.Opaque != "" { // sqlite:PATH
		if u.Scheme != "sqlite" || u.RawQuery != "" || u.User != nil || strings.Contains(u.Opaque, "@") {
			return opaque
		}
		return uri
	}
	if u.Host == "" && u.Scheme != "sqlite" {
		return opaque
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = "", false, "", ""
	out := u.String()
	if jdbc {
		out = "jdbc:" + out
	}
	return out
}

// open opens a sql catalog's database: the driver and bun dialect by the
// URI's scheme.
func (c CatalogConfig) open() (*sql.DB, icesql.SupportedDialect, error) {
	u := c.URI
	switch {
	case strings.HasPrefix(u, "postgres://"), strings.HasPrefix(u, "postgresql://"):
		db, err := sql.Open("pgx", u)
		return db, icesql.Postgres, err
	case strings.HasPrefix(u, "sqlite:"):
		p := strings.TrimPrefix(strings.TrimPrefix(u, "sqlite:"), "//")
		if p == "" {
			return nil, "", errors.New("sqlite: no file")
		}
		if c.ReadOnly {
			if _, err := os.Stat(p); err != nil {
				return nil, "", fmt.Errorf("no catalog database: %w", err)
			}
		}
		// Several writers (processes, goroutines) share the file: WAL
		// and a busy timeout on every pooled connection.
		db, err := sql.Open("sqlite", "file:"+p+"?_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)")
		return db, icesql.SQLite, err
	}
	return nil, "", errors.New("want postgres://… or sqlite:PATH")
}

// Open returns the lake of the data directory st with its tables
// registered in the catalog cfg (New for CatalogNone). Close it when done.
// A table the catalog lacks but the data directory holds (a lake made
// without a catalog, or before its catalog was set) is registered at its
// current metadata version when the lake first loads it.
func Open(ctx context.Context, st storage.Store, cfg CatalogConfig, log *slog.Logger) (*Warehouse, error) {
	l := New(st, log)
	kind, err := ParseCatalogKind(cfg.Kind)
	if err != nil {
		return nil, err
	}
	if kind == CatalogNone {
		// A lake whose tables are kept in a catalog fails here, before a
		// command does anything.
		if err := l.cat.unbound(ctx); err != nil {
			return nil, err
		}
		return l, nil
	}
	if cfg.Name == "" {
		cfg.Name = DefaultCatalogName
	}
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	bnd := binding{Kind: kind, Name: cfg.Name, Namespace: cfg.Namespace, Prefix: cfg.Prefix}
	if err := checkBinding(ctx, st, bnd); err != nil {
		return nil, err
	}
	ns := icetable.Identifier(strings.Split(cfg.Namespace, "."))
	var r *remoteCatalog
	if kind == CatalogREST {
		r, err = openREST(ctx, cfg)
	} else {
		r, err = openSQL(ctx, cfg, l.cat)
	}
	if err != nil {
		return nil, err
	}
	r.ns, r.prefix, r.where, r.binding, r.readOnly = ns, cfg.Prefix, cfg.Redacted(), bnd, cfg.ReadOnly
	if !cfg.ReadOnly {
		if err := r.cat.CreateNamespace(ctx, ns, nil); err != nil && !errors.Is(err, icecatalog.ErrNamespaceAlreadyExists) {
			r.close()
			return nil, fmt.Errorf("iceberg catalog %s: namespace %s: %w", r.where, cfg.Namespace, err)
		}
	}
	l.cat.remote = r
	return l, nil
}

// openSQL opens the sql catalog of cfg, whose files go through the lake's
// store (c).
func openSQL(ctx context.Context, cfg CatalogConfig, c *catalog) (*remoteCatalog, error) {
	if cfg.URI == "" {
		return nil, errors.New("--iceberg-catalog sql needs --iceberg-catalog-uri (postgres://… or sqlite:PATH)")
	}
	db, dialect, err := cfg.open()
	if err != nil {
		return nil, fmt.Errorf("iceberg catalog %s: %w", cfg.Redacted(), err)
	}
	props := icego.Properties{}
	if cfg.ReadOnly {
		props["init_catalog_tables"] = "false"
	}
	cat, err := icesql.NewCatalog(cfg.Name, db, dialect, props)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("iceberg catalog %s: %w", cfg.Redacted(), err)
	}
	if cfg.ReadOnly {
		// A database without the catalog's tables is no catalog (a
		// mistyped path or database): say so, create nothing.
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM iceberg_tables WHERE 1 = 0").Scan(&n); err != nil {
			db.Close()
			return nil, fmt.Errorf("iceberg catalog %s: no iceberg catalog in this database: %w", cfg.Redacted(), err)
		}
	}
	cat.SetFileIO(func(ctx context.Context, _ string) (iceio.IO, error) { return c.io(ctx), nil })
	return &remoteCatalog{kind: CatalogSQL, cat: cat, close: db.Close}, nil
}

// Close closes the lake's catalog connection (nothing without one, or on
// a nil lake).
func (l *Warehouse) Close() error {
	if l == nil {
		return nil
	}
	if r := l.cat.remote; r != nil {
		return r.close()
	}
	return nil
}

// Catalog is where the lake's tables are registered: CatalogNone, or
// CatalogSQL or CatalogREST and the catalog's URI without its password.
func (l *Warehouse) Catalog() (kind, where string) {
	if r := l.cat.remote; r != nil {
		return r.kind, r.where
	}
	return CatalogNone, ""
}

// remoteCatalog is a catalog server that holds each table's current
// metadata location: a SQL catalog, where a commit is its compare-and-swap
// of that location (iceberg-go's catalog/sql, patched:
// third_party/iceberg-go/README.md), or a REST catalog, where a commit is
// the server's CommitTable (iceberg-go's catalog/rest).
type remoteCatalog struct {
	kind   string // CatalogSQL or CatalogREST
	cat    server
	close  func() error
	ns     icetable.Identifier
	prefix string
	where  string // the URI without its password

	binding  binding    // what the data directory records (BindingName)
	bound    bool       // the binding is recorded
	readOnly bool       // CatalogConfig.ReadOnly
	rest     RESTConfig // a rest catalog's credentials (its errors hide them)
}

// server is what the lake asks of a catalog server: iceberg-go's
// *sql.Catalog and *rest.Catalog both are one.
type server interface {
	LoadTable(ctx context.Context, ident icetable.Identifier) (*icetable.Table, error)
	CheckTableExists(ctx context.Context, ident icetable.Identifier) (bool, error)
	RegisterTable(ctx context.Context, ident icetable.Identifier, metadataLoc string) (*icetable.Table, error)
	CommitTable(ctx context.Context, ident icetable.Identifier, reqs []icetable.Requirement, updates []icetable.Update) (icetable.Metadata, string, error)
	CreateNamespace(ctx context.Context, ns icetable.Identifier, props icego.Properties) error
}

// NotRegisteredError is a table of the data directory that the catalog
// does not hold, met by a read-only lake (which does not register it).
type NotRegisteredError struct {
	Table, Where string
	Version      int // the data directory's newest vN
}

func (e *NotRegisteredError) Error() string {
	return fmt.Sprintf("iceberg table %s (metadata v%d in the lake) is not registered in the iceberg catalog %s", e.Table, e.Version, e.Where)
}

func (e *NotRegisteredError) Unwrap() error { return icecatalog.ErrNoSuchTable }

// ident is the catalog's identifier of the lake's table name.
func (r *remoteCatalog) ident(name string) icetable.Identifier {
	return append(append(icetable.Identifier{}, r.ns...), r.prefix+name)
}

// has is 1 when the catalog holds table name, else 0.
func (r *remoteCatalog) has(ctx context.Context, name string) (int, error) {
	ok, err := r.cat.CheckTableExists(ctx, r.ident(name))
	if err != nil {
		return 0, fmt.Errorf("iceberg catalog %s: %w", r.where, err)
	}
	if ok {
		return 1, nil
	}
	return 0, nil
}

// metadataVersion is the version number of a metadata file's location:
// vN.metadata.json (the lake's own) or NNNNN-uuid.metadata.json (a
// catalog's); -1 for another name.
func metadataVersion(loc string) int {
	base, ok := strings.CutSuffix(path.Base(loc), ".metadata.json")
	if !ok {
		return -1
	}
	if s, ok := strings.CutPrefix(base, "v"); ok {
		if v, err := strconv.Atoi(s); err == nil {
			return v
		}
	}
	if s, _, ok := strings.Cut(base, "-"); ok {
		if v, err := strconv.Atoi(s); err == nil {
			return v
		}
	}
	return -1
}

// loadRemote loads table name from the catalog; a table the catalog lacks
// but whose metadata the data directory holds is registered first.
func (c *catalog) loadRemote(ctx context.Context, name string) (*icetable.Table, int, error) {
	r := c.remote
	if !r.readOnly {
		if err := c.bind(ctx); err != nil {
			return nil, 0, err
		}
	}
	t, err := r.cat.LoadTable(ctx, r.ident(name))
	if errors.Is(err, icecatalog.ErrNoSuchTable) {
		if r.readOnly {
			v, err := c.currentVersion(ctx, name)
			if err != nil || v == 0 {
				return nil, 0, errors.Join(err, fmt.Errorf("%w: %s", icecatalog.ErrNoSuchTable, name))
			}
			return nil, 0, &NotRegisteredError{Table: name, Where: r.where, Version: v}
		}
		t, err = c.register(ctx, name)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("iceberg catalog %s: %w", r.where, err)
	}
	if err := c.checkDrift(ctx, name, t); err != nil {
		return nil, 0, err
	}
	if err := c.checkLocation(name, t.Location()); err != nil {
		return nil, 0, err
	}
	v := metadataVersion(t.MetadataLocation())
	own := icetable.New(icetable.Identifier{name}, t.Metadata(), t.MetadataLocation(), c.fsF, c)
	c.remember(name, v, own)
	return own, v, nil
}

// register adds table name to the catalog at its newest vN.metadata.json
// in the data directory (ErrNoSuchTable when there is none). Another
// writer registering it first is no error.
func (c *catalog) register(ctx context.Context, name string) (*icetable.Table, error) {
	r := c.remote
	v, err := c.currentVersion(ctx, name)
	if err != nil {
		return nil, err
	}
	if v == 0 {
		return nil, fmt.Errorf("%w: %s", icecatalog.ErrNoSuchTable, name)
	}
	if cv, file, err := c.catalogWritten(ctx, name); err != nil {
		return nil, err
	} else if cv >= v {
		return nil, fmt.Errorf("table %s: the lake's newest v%d.metadata.json is superseded by metadata a catalog wrote (%s): the table was kept in a catalog that no longer holds it, and registering v%d would drop every commit made through it; register the table by hand at its newest catalog metadata file (%s/%s/%s)", name, v, file, v, name, metadataDir, file)
	}
	if err := c.bind(ctx); err != nil {
		return nil, err
	}
	t, err := r.cat.RegisterTable(ctx, r.ident(name), c.io(ctx).location(metadataName(name, v)))
	if errors.Is(err, icecatalog.ErrTableAlreadyExists) {
		return r.cat.LoadTable(ctx, r.ident(name))
	}
	return t, err
}

// commitRemote commits through the catalog's compare-and-swap: the
// catalog validates reqs against its current version, writes the next
// metadata file (through the store) and moves its pointer only if no one
// moved it since; a stale base or a lost swap is icetable.ErrCommitFailed.
func (c *catalog) commitRemote(ctx context.Context, name string, reqs []icetable.Requirement, updates []icetable.Update) (icetable.Metadata, string, error) {
	r := c.remote
	md, loc, err := r.cat.CommitTable(ctx, r.ident(name), reqs, updates)
	if err != nil {
		c.forget(name)
		if errors.Is(err, icetable.ErrCommitFailed) {
			return nil, "", err
		}
		if isCommitUnknown(err) {
			return nil, "", commitUnknown(name, r.where, err, r.rest)
		}
		return nil, "", fmt.Errorf("commit table %s in iceberg catalog %s: %w", name, r.where, err)
	}
	if c.crash != nil {
		c.crash(name, "catalog")
	}
	c.remember(name, metadataVersion(loc), icetable.New(icetable.Identifier{name}, md, loc, c.fsF, c))
	return md, loc, nil
}

// Register adds to the lake's catalog every table of the data directory
// it lacks, at the table's current metadata version (`optlake lake
// convert` of a catalog-less Iceberg lake; a run does the same for a
// table when it first loads it). It returns the tables registered now;
// without a catalog, none.
func (l *Warehouse) Register(ctx context.Context) ([]string, error) {
	r := l.cat.remote
	if r == nil {
		return nil, nil
	}
	names, err := l.tableNames(ctx)
	if err != nil {
		return nil, fmt.Errorf("iceberg register: %w", err)
	}
	var out []string
	for _, name := range names {
		ok, err := r.cat.CheckTableExists(ctx, r.ident(name))
		if err != nil {
			return out, fmt.Errorf("iceberg catalog %s: %w", r.where, err)
		}
		if _, _, err := l.cat.load(ctx, icetable.Identifier{name}); err != nil {
			return out, fmt.Errorf("iceberg register %s: %w", name, err)
		}
		if ok {
			continue // loading it checked the catalog holds the lake's newest commit
		}
		l.log.Info("registered in the iceberg catalog", "table", name, "catalog", r.where)
		out = append(out, name)
	}
	return out, nil
}
