// Package clickhouse is the ClickHouse sink: native protocol with lz4,
// columnar batch inserts straight from Arrow records, tables and migrations
// generated from package schema, types chosen by server version.
//
// Loads are idempotent: tables are ReplacingMergeTree ordered by the table's
// key, so a snapshot inserted twice (a retry, a replay) is one row per key
// after merges, and every view reads with FINAL.
//
// # Clusters
//
// With Options.Cluster set, the sink targets a ClickHouse cluster (a name in
// the servers' remote_servers): migrations run ON CLUSTER and create, per
// table, a ReplicatedReplacingMergeTree <table>_local on every node plus a
// Distributed table under the public name, sharded by the table's
// schema.Table.ShardingKey (one instrument's, or one account's, whole
// history on one shard). Loads insert into the Distributed tables with
// insert_distributed_sync=1 (see Options.Cluster for why); queries read the
// Distributed tables and views exactly as on one server.
package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/util"

	"github.com/optlake/optlake/internal/redact"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
)

// Options configure the sink.
type Options struct {
	DSN string // clickhouse://user:pass@host:9000/db
	// Migrate applies pending migrations when the sink connects; without it
	// an out-of-date schema is an error.
	Migrate     bool
	MaxAttempts int           // per insert, for transient errors (default 4)
	Backoff     time.Duration // first retry delay (default 500ms)
	DialTimeout time.Duration // default 5s
	// Cluster names the ClickHouse cluster (a remote_servers entry of the
	// server the DSN points at) the database lives on; "" is one server,
	// exactly as before. With a cluster:
	//
	//   - Migrate runs every statement ON CLUSTER: a
	//     ReplicatedReplacingMergeTree <table>_local per table (ZooKeeper
	//     path /clickhouse/tables/{shard}/<db>/<table>_local, replica
	//     '{replica}': the servers need those macros) and a Distributed table
	//     of the public name over it; views over the Distributed tables;
	//     migrations recorded once for the cluster (schema.MigrationsTableStatements).
	//   - Loads insert into the Distributed tables with
	//     insert_distributed_sync=1: the INSERT returns only when every
	//     shard has written its part of the block to a replica, so a failure
	//     anywhere fails this Write (and the run reports it) instead of being
	//     left in a server's background send queue, and the retry that
	//     follows re-sends the same block, which is split the same way and
	//     which each shard's Replicated table drops as a duplicate (block
	//     deduplication by hash; ReplacingMergeTree keys catch the rest).
	//     The server picks a live replica of each shard, so one replica down
	//     does not fail a load; replication brings it up to date when it
	//     returns. Replication is asynchronous: right after a load, a read
	//     that goes to a shard's other replica may miss the newest rows for
	//     a moment.
	//   - Open creates inferred (account) tables ON CLUSTER and evolves
	//     them (schema.Table.AddColumnStatements): a new column goes to the
	//     local table of every shard that lacks it, ON CLUSTER with IF NOT
	//     EXISTS where the server has it, and on 18.16 once per shard,
	//     without ON CLUSTER, on a replica the sink connects to itself (the
	//     host and port remote_servers gives, with the DSN's user, password
	//     and TLS). A table every shard already has complete needs no DDL,
	//     so runs go on with a node down.
	//
	// Open and Migrate refuse a database laid out for the other mode (a
	// single-server schema with a cluster, or a cluster schema without one).
	Cluster  string
	Logger   *slog.Logger
	Redactor *redact.Redactor
}

// Sink loads into one ClickHouse database.
type Sink struct {
	opt    Options
	chOpts *ch.Options
	db     string
	log    *slog.Logger

	mu     sync.Mutex
	conn   driver.Conn
	feat   schema.Features
	tables map[string]int // dynamic tables known to exist, with their column count
}

var _ sinks.Sink = (*Sink)(nil)

// New checks the DSN. It does not connect: the sink connects when the first
// table is opened, so a snapshot is still fetched and archived while
// ClickHouse is down.
func New(opt Options) (*Sink, error) {
	// The DSN's password is a secret whether or not the caller said so.
	opt.Redactor = opt.Redactor.With(redact.DSNPassword(opt.DSN))
	o, db, err := parseDSN(opt.DSN, opt.Redactor)
	if err != nil {
		return nil, err
	}
	if opt.MaxAttempts <= 0 {
		opt.MaxAttempts = 4
	}
	if opt.Backoff <= 0 {
		opt.Backoff = 500 * time.Millisecond
	}
	if opt.DialTimeout > 0 {
		o.DialTimeout = opt.DialTimeout
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("sink", "clickhouse")
	o.Compression = &ch.Compression{Method: ch.CompressionLZ4}
	o.Logger = log
	if opt.Cluster != "" {
		if o.Settings == nil {
			o.Settings = ch.Settings{}
		}
		// See Options.Cluster. (Current releases call it
		// distributed_foreground_insert and keep this name as an alias.)
		o.Settings["insert_distributed_sync"] = 1
		log = log.With("cluster", opt.Cluster)
	}
	return &Sink{opt: opt, chOpts: o, db: db, log: log, tables: map[string]int{}}, nil
}

// ErrNoDSN is the error of a sink configured without a DSN.
var ErrNoDSN = errors.New("clickhouse: no DSN")

// Remedies that end the messages of OutOfDateError and
// ClusterMismatchError (the CLI adds the flags that apply them).
const (
	MigrateRemedy   = "run `optlake migrate` first"
	ClusterRemedy   = "give its cluster name"
	NoClusterRemedy = "or give no cluster"
)

// parseDSN parses a clickhouse:// DSN; errors never include the password.
func parseDSN(dsn string, red *redact.Redactor) (*ch.Options, string, error) {
	if dsn == "" {
		return nil, "", ErrNoDSN
	}
	if !strings.HasPrefix(dsn, "clickhouse://") && !strings.HasPrefix(dsn, "tcp://") {
		return nil, "", errors.New("clickhouse: DSN must start with clickhouse:// (the native protocol)")
	}
	o, err := ch.ParseDSN(dsn)
	if err != nil {
		return nil, "", fmt.Errorf("clickhouse: invalid DSN: %w", red.Err(err))
	}
	db := o.Auth.Database
	if db == "" {
		db = "default"
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = 5 * time.Second
	}
	return o, db, nil
}

// Name implements sinks.Sink.
func (s *Sink) Name() string { return "clickhouse" }

// Database is the target database.
func (s *Sink) Database() string { return s.db }

// Cluster is the target cluster ("" for one server).
func (s *Sink) Cluster() string { return s.opt.Cluster }

// Features connects (if not yet connected) and returns the server's
// version features.
func (s *Sink) Features(ctx context.Context) (schema.Features, error) {
	_, f, err := s.connect(ctx)
	return f, err
}

// Query runs a read-only query on the sink's database, for commands that
// read back what was loaded (history): build renders it for the database
// and the server's features; args fill its ? placeholders. It connects
// like Open does (an out-of-date schema is an *OutOfDateError); errors are
// wrapped and redacted like the sink's. The caller closes the rows.
func (s *Sink) Query(ctx context.Context, build func(db string, f schema.Features) string, args ...any) (driver.Rows, error) {
	conn, f, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := conn.Query(ctx, build(s.db, f), args...)
	if err != nil {
		return nil, s.wrap("query", err)
	}
	return rows, nil
}

func (s *Sink) target(f schema.Features) schema.Target {
	return schema.Target{DB: s.db, Cluster: s.opt.Cluster, Features: f}
}

// Close implements sinks.Sink.
func (s *Sink) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		err := s.conn.Close()
		s.conn = nil
		return err
	}
	return nil
}

// connect opens the connection once, learns the server's features and
// checks (or migrates) the schema version.
func (s *Sink) connect(ctx context.Context) (driver.Conn, schema.Features, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		return s.conn, s.feat, nil
	}
	// The database may not exist yet (first migrate): connect to default.
	o := *s.chOpts
	o.Auth.Database = "default"
	conn, err := openConn(&o)
	if err != nil {
		return nil, s.feat, s.wrap("connect", err)
	}
	if err := s.retry(ctx, "connect", func() error { return conn.Ping(ctx) }); err != nil {
		conn.Close()
		return nil, s.feat, s.wrap("connect", err)
	}
	v, err := conn.ServerVersion()
	if err != nil {
		conn.Close()
		return nil, s.feat, s.wrap("server version", err)
	}
	s.feat = schema.FeaturesFor(int(v.Version.Major), int(v.Version.Minor))
	tg := s.target(s.feat)
	if err := checkCluster(ctx, conn, tg); err != nil {
		conn.Close()
		return nil, s.feat, s.wrap("connect", err)
	}
	have, err := currentVersion(ctx, conn, tg)
	if err != nil {
		conn.Close()
		return nil, s.feat, s.wrap("read schema version", err)
	}
	if want := schema.LatestVersion(); have < want {
		if !s.opt.Migrate {
			conn.Close()
			return nil, s.feat, &OutOfDateError{Database: s.db, Have: have, Want: want}
		}
		if _, err := migrate(ctx, conn, tg, s.log); err != nil {
			conn.Close()
			return nil, s.feat, s.wrap("migrate", err)
		}
	}
	s.conn = conn
	s.log.Debug("connected", "server", v.String(), "database", s.db)
	return conn, s.feat, nil
}

func openConn(o *ch.Options) (driver.Conn, error) { return ch.Open(o) }

// OutOfDateError is returned when the database's schema is older than this
// build: run `optlake migrate`.
type OutOfDateError struct {
	Database   string
	Have, Want int
}

func (e *OutOfDateError) Error() string {
	if e.Have == 0 {
		return fmt.Sprintf("clickhouse: database %s has no optlake schema: %s", e.Database, MigrateRemedy)
	}
	return fmt.Sprintf("clickhouse: schema of database %s is at version %d, this optlake needs %d: %s", e.Database, e.Have, e.Want, MigrateRemedy)
}

// wrap adds op to err and masks secrets in its message; errors.Is and
// errors.As still reach the cause (context.Canceled, a *ch.Exception, ...).
func (s *Sink) wrap(op string, err error) error {
	return s.opt.Redactor.Errorf("clickhouse %s: %w", op, err)
}

// Open implements sinks.Sink. Fixed tables must exist (migrations); tables
// inferred at run time are created, and evolved with ADD COLUMN, here.
func (s *Sink) Open(ctx context.Context, t *schema.Table, snap sinks.Snapshot) (sinks.Writer, error) {
	conn, feat, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	if !isFixed(t) {
		if err := s.ensureTable(ctx, conn, feat, t); err != nil {
			return nil, err
		}
	}
	cols := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		cols[i] = schema.Quote(c.Name)
	}
	// The key's millisecond column, where there is one, goes last: the
	// loader fills it from snapshot_time (appendRecord).
	ms := t.HasSnapshotMs(feat)
	if ms {
		cols = append(cols, schema.Quote(schema.SnapshotMs))
	}
	insert := fmt.Sprintf("INSERT INTO %s.%s (%s)", schema.Quote(s.db), schema.Quote(t.Name), strings.Join(cols, ", "))
	return &writer{s: s, conn: conn, feat: feat, t: t, insert: insert, ms: ms}, nil
}

func isFixed(t *schema.Table) bool {
	for _, f := range schema.Tables() {
		if f == t {
			return true
		}
	}
	return false
}

// ensureTable creates an inferred table, or adds the columns it gained.
func (s *Sink) ensureTable(ctx context.Context, conn driver.Conn, feat schema.Features, t *schema.Table) error {
	s.mu.Lock()
	known := s.tables[t.Name]
	s.mu.Unlock()
	if known == len(t.Columns) {
		return nil
	}
	tg := s.target(feat)
	if tg.OnCluster() {
		return s.ensureClusterTable(ctx, conn, tg, t)
	}
	for _, stmt := range t.CreateDDL(tg) {
		if err := conn.Exec(ctx, stmt); err != nil {
			return s.wrap("create table "+t.Name, err)
		}
	}
	existing, err := columnsOf(ctx, conn, s.db, t.Name)
	if err != nil {
		return s.wrap("list columns of "+t.Name, err)
	}
	if t.HasSnapshotMs(feat) && !existing[schema.SnapshotMs] {
		return s.noSnapshotMs(t.Name)
	}
	for _, c := range t.Columns {
		if existing[c.Name] {
			continue
		}
		for _, stmt := range t.AddColumnStatements(tg, c) {
			if err := conn.Exec(ctx, stmt); err != nil {
				return s.wrap("add column "+t.Name+"."+c.Name, err)
			}
		}
		s.log.Info("column added", "table", t.Name, "column", c.Name, "type", c.ClickHouseType(feat))
	}
	s.known(t)
	return nil
}

// noSnapshotMs is the error for a table whose key lacks SnapshotMs where
// it needs it: a key column cannot be added, migration 5 rebuilds the
// table.
func (s *Sink) noSnapshotMs(stored string) error {
	return s.wrap("open table "+stored, fmt.Errorf("table %s.%s has no %s in its key (made by an older optlake after the database was migrated?): run `optlake migrate` again", s.db, stored, schema.SnapshotMs))
}

func (s *Sink) known(t *schema.Table) {
	s.mu.Lock()
	s.tables[t.Name] = len(t.Columns)
	s.mu.Unlock()
}

// ensureClusterTable is ensureTable on a cluster. The local tables of every
// shard (one replica each, through the server's cluster table function) and
// the connected server's Distributed table are checked first: when they are
// complete no DDL runs — ON CLUSTER DDL goes through the cluster's DDL queue
// and waits for every node (up to distributed_ddl_task_timeout when one is
// down), so runs go on with a replica down. Otherwise the tables are
// created where missing (ON CLUSTER, IF NOT EXISTS), the columns some shard
// lacks are added (addClusterColumns: once per shard, or idempotently), and
// the Distributed table is made anew when it lacks any.
func (s *Sink) ensureClusterTable(ctx context.Context, conn driver.Conn, tg schema.Target, t *schema.Table) error {
	shards, err := clusterShards(ctx, conn, tg.Cluster)
	if err != nil {
		return s.wrap("open table "+t.Name, err)
	}
	distComplete := func() (bool, error) {
		dist, err := columnsOf(ctx, conn, s.db, t.Name)
		if err != nil {
			return false, s.wrap("list columns of "+t.Name, err)
		}
		return len(dist) == len(t.ClickHouseColumns(tg.Features)) && hasAll(dist, t, tg.Features), nil
	}
	missing, noMs, err := s.missingOnSomeShard(ctx, conn, tg, t, len(shards))
	if err != nil {
		return s.wrap("open table "+t.Name, err)
	}
	if len(missing) == 0 && !noMs {
		ok, err := distComplete()
		if err != nil {
			return err
		}
		if ok {
			s.known(t)
			return nil
		}
	}
	for _, stmt := range t.CreateDDL(tg) {
		if err := conn.Exec(ctx, stmt); err != nil {
			return s.wrap("create table "+t.Name, err)
		}
	}
	if missing, noMs, err = s.missingOnSomeShard(ctx, conn, tg, t, len(shards)); err != nil {
		return s.wrap("open table "+t.Name, err)
	}
	if noMs {
		return s.noSnapshotMs(t.LocalName())
	}
	if err := s.addClusterColumns(ctx, conn, tg, t, missing, shards); err != nil {
		return err
	}
	ok, err := distComplete()
	if err != nil {
		return err
	}
	if !ok {
		for _, stmt := range t.RecreateDistributedDDL(tg) {
			if err := conn.Exec(ctx, stmt); err != nil {
				return s.wrap("recreate distributed table "+t.Name, err)
			}
		}
	}
	s.known(t)
	return nil
}

// columnsOf returns the names of the columns of db.table on the connected
// server.
func columnsOf(ctx context.Context, conn driver.Conn, db, table string) (map[string]bool, error) {
	rows, err := conn.Query(ctx, "SELECT name FROM system.columns WHERE database = ? AND table = ?", db, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		cols[n] = true
	}
	return cols, rows.Err()
}

func hasAll(cols map[string]bool, t *schema.Table, f schema.Features) bool {
	for _, c := range t.ClickHouseColumns(f) {
		if !cols[c.Name] {
			return false
		}
	}
	return true
}

type writer struct {
	s      *Sink
	conn   driver.Conn
	feat   schema.Features
	t      *schema.Table
	insert string
	ms     bool // the INSERT ends with schema.SnapshotMs

	// The open INSERT and the records it has received, retained until it
	// is sent so that a transient failure can re-send all of them on a
	// fresh connection.
	batch     driver.Batch
	held      []arrow.Record
	heldBytes int64
	heldRows  int64

	rows int64 // rows of INSERTs sent
	done bool
}

// insertBudget bounds the Arrow bytes one INSERT retains for a retry: when
// the records of the open INSERT reach it, the INSERT is sent (completed)
// and the next record opens a new one. It trades the number of INSERTs (and
// parts the server writes) for memory: a million-instrument listing
// (~600 MB of Arrow) goes in ~10 INSERTs of ~100k rows while the sink holds
// at most ~64 MiB beyond the records in flight, instead of 31 INSERTs of
// one record each (the old behaviour) or one INSERT retaining the whole
// listing. A variable for tests.
var insertBudget int64 = 64 << 20

// Write appends rec to the writer's open INSERT (opening one if needed)
// and flushes it to the server as one block: the server works on it while
// the next record is decoded. Column values alias rec's buffers only until
// the flush, so rec can be released by the caller as usual; the writer
// keeps its own reference (Retain) until the INSERT is sent, for a retry.
//
// A transient failure (a flush, or the send at the end of an INSERT)
// aborts the INSERT and re-sends every record it had received on a new
// one; blocks that reached the server before the failure are duplicates
// the table's key removes (read with FINAL). On a cluster each INSERT goes
// through the Distributed table synchronously (see Options.Cluster) and a
// re-sent block is also dropped by the Replicated tables' block
// deduplication.
func (w *writer) Write(ctx context.Context, rec arrow.Record) error {
	if w.done {
		return errors.New("clickhouse: write after commit or abort")
	}
	rec.Retain()
	w.held = append(w.held, rec)
	w.heldBytes += util.TotalRecordSize(rec) // buffers, children and dictionaries, each shared buffer once
	w.heldRows += rec.NumRows()
	err := w.appendLast(ctx)
	if err == nil && w.heldBytes >= insertBudget {
		err = w.send(ctx)
	}
	if err != nil {
		w.abortInsert()
		return w.s.wrap("insert into "+w.t.Name, err)
	}
	return nil
}

// appendLast adds the newest held record to the open INSERT and flushes
// it; on a transient failure it re-sends all held records on a new INSERT.
func (w *writer) appendLast(ctx context.Context) error {
	if w.batch != nil {
		err := w.appendFlush(w.held[len(w.held)-1])
		if err == nil {
			return nil
		}
		var p permanent
		if errors.As(err, &p) || !Transient(err) || ctx.Err() != nil {
			return err
		}
		w.s.log.Debug("insert failed, re-sending its records", "table", w.t.Name, "records", len(w.held), "error", w.s.opt.Redactor.String(err.Error()))
		// fall through: re-send everything on a fresh INSERT
	}
	return w.s.retry(ctx, "insert into "+w.t.Name, func() error { return w.reopen(ctx) })
}

// reopen aborts the open INSERT, if any, prepares a new one and appends and
// flushes every held record.
func (w *writer) reopen(ctx context.Context) error {
	if w.batch != nil {
		w.batch.Abort()
		w.batch = nil
	}
	batch, err := w.conn.PrepareBatch(ctx, w.insert, driver.WithReleaseConnection())
	if err != nil {
		return err
	}
	w.batch = batch
	for _, rec := range w.held {
		if err := w.appendFlush(rec); err != nil {
			return err
		}
	}
	return nil
}

func (w *writer) appendFlush(rec arrow.Record) error {
	if err := appendRecord(w.batch, w.t, w.feat, rec, w.ms); err != nil {
		return permanent{err}
	}
	return w.batch.Flush()
}

// send completes the open INSERT (re-sending its records on a new one
// after a transient failure) and releases the held records.
func (w *writer) send(ctx context.Context) error {
	if w.batch == nil {
		return nil
	}
	first := true
	err := w.s.retry(ctx, "insert into "+w.t.Name, func() error {
		if !first {
			w.s.log.Debug("insert failed, re-sending its records", "table", w.t.Name, "records", len(w.held))
			if err := w.reopen(ctx); err != nil {
				return err
			}
		}
		first = false
		err := w.batch.Send()
		w.batch = nil
		return err
	})
	if err != nil {
		return rejection(err)
	}
	w.rows += w.heldRows
	w.releaseHeld()
	return nil
}

func (w *writer) releaseHeld() {
	for _, r := range w.held {
		r.Release()
	}
	clear(w.held)
	w.held = w.held[:0]
	w.heldBytes, w.heldRows = 0, 0
}

// abortInsert aborts the open INSERT (closing its connection, so the server
// drops what it had not yet written) and releases the held records.
func (w *writer) abortInsert() {
	if w.batch != nil {
		w.batch.Abort()
		w.batch = nil
	}
	w.releaseHeld()
}

// Commit implements sinks.Writer: it sends the open INSERT; the rows of
// INSERTs already sent are visible already.
func (w *writer) Commit(ctx context.Context) (sinks.Committed, error) {
	if w.done {
		return sinks.Committed{}, errors.New("clickhouse: commit after commit or abort")
	}
	w.done = true
	if err := w.send(ctx); err != nil {
		w.abortInsert()
		return sinks.Committed{}, w.s.wrap("insert into "+w.t.Name, err)
	}
	return sinks.Committed{Rows: w.rows, Where: w.s.db + "." + w.t.Name}, nil
}

// Abort implements sinks.Writer: it aborts the open INSERT. Rows of
// INSERTs already sent (and blocks of the open one the server already
// wrote) stay; the retry or replay that follows re-inserts the same keys,
// which deduplicate.
func (w *writer) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	w.abortInsert()
	return nil
}

// permanent marks an error that retrying cannot fix.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// retry runs f until it succeeds, fails permanently, or attempts run out;
// each retry is logged (info) with the attempt and the wait, so a server
// that is down shows as retries rather than a silent pause.
func (s *Sink) retry(ctx context.Context, op string, f func() error) error {
	attempts, backoff := s.opt.MaxAttempts, s.opt.Backoff
	var err error
	for i := 0; i < attempts; i++ {
		if err = f(); err == nil {
			return nil
		}
		var p permanent
		if errors.As(err, &p) || !Transient(err) || ctx.Err() != nil {
			return err
		}
		if i == attempts-1 {
			break
		}
		s.log.Info("retrying", "op", op, "attempt", i+1, "of", attempts, "wait", backoff<<i, "error", s.opt.Redactor.String(err.Error()))
		t := time.NewTimer(backoff << i)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	return err
}

// rejection marks as sinks.RejectedError the server's refusals of the
// rows' values (parse, type, range, NULL errors): sending them again cannot
// succeed. Anything else (a server down, a schema not migrated, access
// denied) may pass and is returned as is.
func rejection(err error) error {
	var ex *ch.Exception
	if errors.As(err, &ex) {
		switch ex.Code {
		case 6, 27, 41, 53, 69, 70, 72, 131, 321, 349: // cannot parse text/input/datetime, type mismatch, argument out of bound, cannot convert, cannot parse number, string too large, value out of range, NULL in ordinary column
			return &sinks.RejectedError{Err: err}
		}
	}
	return err
}

// Transient reports whether err is worth retrying: connection refused or
// reset, timeouts, a connection closed under us; on a cluster also a shard
// with no reachable replica, a replica read-only without ZooKeeper, a
// ZooKeeper error and an insert of unknown status (each retried insert is
// deduplicated).
func Transient(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, ch.ErrAcquireConnTimeout) {
		return true
	}
	var ex *ch.Exception
	if errors.As(err, &ex) {
		switch ex.Code {
		case 159, 209, 210, 252, 241: // timeout, socket timeout, network error, too many parts, memory limit
			return true
		case 32, 225, 242, 279, 319, 999: // read after EOF (a peer went away), no ZooKeeper, table read-only, all connection tries failed, unknown status of insert, ZooKeeper (Keeper) error
			return true
		}
	}
	return false
}
