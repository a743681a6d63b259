package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/optlake/optlake/schema"
)

// replica is one server of a cluster, as the connected server's
// remote_servers lists it (system.clusters).
type replica struct {
	shard, num int    // 1-based
	host       string // as configured
	port       uint16 // native protocol
	local      bool   // the connected server
}

// clusterShards lists the replicas of tg's cluster, shard by shard.
func clusterShards(ctx context.Context, conn driver.Conn, cluster string) ([][]replica, error) {
	rows, err := conn.Query(ctx, "SELECT shard_num, replica_num, host_name, port, is_local FROM system.clusters WHERE cluster = ? ORDER BY shard_num, replica_num", cluster)
	if err != nil {
		return nil, fmt.Errorf("list the servers of cluster %s: %w", cluster, err)
	}
	defer rows.Close()
	var shards [][]replica
	for rows.Next() {
		var (
			sh, n uint32
			r     replica
			local uint8
		)
		if err := rows.Scan(&sh, &n, &r.host, &r.port, &local); err != nil {
			return nil, err
		}
		r.shard, r.num, r.local = int(sh), int(n), local != 0
		if len(shards) == 0 || shards[len(shards)-1][0].shard != r.shard {
			shards = append(shards, nil)
		}
		shards[len(shards)-1] = append(shards[len(shards)-1], r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(shards) == 0 {
		return nil, fmt.Errorf("cluster %s is not defined on the server (remote_servers in its config)", cluster)
	}
	return shards, nil
}

// shardColumns counts, per column name of db.table, the shards whose
// table has it, judged on one replica of each shard (the server's cluster
// table function, which skips a replica that is down).
func shardColumns(ctx context.Context, conn driver.Conn, tg schema.Target, table string) (map[string]int, error) {
	rows, err := conn.Query(ctx, "SELECT name, count() FROM cluster(?, system.columns) WHERE database = ? AND table = ? GROUP BY name", tg.Cluster, tg.DB, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var (
			name string
			n    uint64
		)
		if err := rows.Scan(&name, &n); err != nil {
			return nil, err
		}
		out[name] = int(n)
	}
	return out, rows.Err()
}

// missingOnSomeShard returns the columns of t (in t's order) that the local
// table of some shard of tg's cluster lacks, and whether SnapshotMs, where
// t has it, is missing somewhere. A user the server does not allow the
// cluster table function (current releases' REMOTE grant) gets the
// connected server's local table judged alone, with a warning: a column an
// interrupted attempt left on some shards only is then completed only
// when this server lacks it too.
func (s *Sink) missingOnSomeShard(ctx context.Context, conn driver.Conn, tg schema.Target, t *schema.Table, shards int) (missing []schema.Column, noMs bool, err error) {
	have, err := shardColumns(ctx, conn, tg, t.LocalName())
	var ex *ch.Exception
	if errors.As(err, &ex) && ex.Code == 497 { // ACCESS_DENIED
		s.log.Warn("cannot read the other shards' columns (the cluster table function is not granted): judging the connected server's tables alone", "table", t.Name, "error", s.opt.Redactor.String(err.Error()))
		local, lerr := columnsOf(ctx, conn, tg.DB, t.LocalName())
		have, err, shards = map[string]int{}, lerr, 1
		for c := range local {
			have[c] = 1
		}
	}
	if err != nil {
		return nil, false, fmt.Errorf("list columns of %s on the shards: %w", t.LocalName(), err)
	}
	for _, c := range t.Columns {
		if have[c.Name] < shards {
			missing = append(missing, c)
		}
	}
	return missing, t.HasSnapshotMs(tg.Features) && have[schema.SnapshotMs] < shards, nil
}

// addClusterColumns adds t's columns missing from some shard's local table
// (schema.Table.AddColumnStatements): ON CLUSTER with IF NOT EXISTS, or,
// where the server has no IF NOT EXISTS (schema.Target.AlterPerShard),
// once on one replica of each shard that lacks it.
func (s *Sink) addClusterColumns(ctx context.Context, conn driver.Conn, tg schema.Target, t *schema.Table, missing []schema.Column, shards [][]replica) error {
	if !tg.AlterPerShard() {
		for _, c := range missing {
			for _, stmt := range t.AddColumnStatements(tg, c) {
				if err := conn.Exec(ctx, stmt); err != nil {
					return s.wrap("add column "+t.Name+"."+c.Name, err)
				}
			}
			s.log.Info("column added", "table", t.Name, "column", c.Name, "type", c.ClickHouseType(tg.Features))
		}
		return nil
	}
	for _, sh := range shards {
		if err := s.addShardColumns(ctx, conn, tg, t, sh); err != nil {
			return err
		}
	}
	return nil
}

// addShardColumns adds t's missing columns to the local table of one shard,
// on the first of its replicas that answers (the connected server when it
// is one of them); the table replicates the change to the others. A
// column found there after a failed ALTER (replication, or another run,
// brought it meanwhile; or the server gave up waiting for a slow replica
// after the change was made) is added.
func (s *Sink) addShardColumns(ctx context.Context, conn driver.Conn, tg schema.Target, t *schema.Table, replicas []replica) error {
	c, addr, closeConn, err := s.shardConn(ctx, conn, replicas)
	if err != nil {
		return s.wrap(fmt.Sprintf("add columns to %s on shard %d", t.Name, replicas[0].shard), err)
	}
	defer closeConn()
	local := t.LocalName()
	have, err := columnsOf(ctx, c, tg.DB, local)
	if err != nil {
		return s.wrap(fmt.Sprintf("list columns of %s on %s", local, addr), err)
	}
	for _, col := range t.Columns {
		if have[col.Name] {
			continue
		}
		for _, stmt := range t.AddColumnStatements(tg, col) {
			err := c.Exec(ctx, stmt)
			if err == nil {
				continue
			}
			now, lerr := columnsOf(ctx, c, tg.DB, local)
			if lerr != nil || !now[col.Name] {
				return s.wrap(fmt.Sprintf("add column %s.%s on shard %d (%s)", t.Name, col.Name, replicas[0].shard, addr), err)
			}
			s.log.Info("column already on the shard after a failed ALTER", "table", t.Name, "column", col.Name, "shard", replicas[0].shard, "error", s.opt.Redactor.String(err.Error()))
		}
		s.log.Info("column added", "table", t.Name, "column", col.Name, "type", col.ClickHouseType(tg.Features), "shard", replicas[0].shard)
	}
	return nil
}

// shardConn returns a connection to one replica of a shard: conn when the
// connected server is one of them, otherwise a new connection (the DSN's
// user, password and TLS) to the first replica, in remote_servers order,
// that answers.
func (s *Sink) shardConn(ctx context.Context, conn driver.Conn, replicas []replica) (driver.Conn, string, func(), error) {
	for _, r := range replicas {
		if r.local {
			return conn, "the connected server", func() {}, nil
		}
	}
	var errs []error
	for _, r := range replicas {
		addr := net.JoinHostPort(r.host, strconv.Itoa(int(r.port)))
		o := *s.chOpts
		o.Addr = []string{addr}
		o.Auth.Database = "default"
		c, err := openConn(&o)
		if err == nil {
			if err = c.Ping(ctx); err == nil {
				return c, addr, func() { c.Close() }, nil
			}
			c.Close()
		}
		errs = append(errs, fmt.Errorf("%s: %w", addr, err))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, "", nil, fmt.Errorf("no replica answers: %w", errors.Join(errs...))
}
