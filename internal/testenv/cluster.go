package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// DefaultClusterName is the remote_servers name of the clusters StartCluster
// starts when ClusterConfig.Name is empty.
const DefaultClusterName = "optlake_test"

// ClusterConfig shapes a local cluster.
type ClusterConfig struct {
	Name     string    // remote_servers name; default DefaultClusterName
	Shards   int       // default 2
	Replicas int       // per shard; default 2
	Log      io.Writer // every process's stdout/stderr (may be nil)
}

// Cluster is a ClickHouse cluster on 127.0.0.1: one standalone ZooKeeper and
// Shards × Replicas clickhouse-server processes, each a ClickHouse (its own
// directory, tcp/http/interserver ports, data) configured with
//
//   - macros: <shard> = "01", "02", … (the shard's 1-based position in
//     remote_servers) and <replica> = "r1", "r2", … (unique within a shard);
//   - remote_servers: the same cluster definition on every node, shards in
//     order, weight 1, internal_replication = true (a Distributed table writes
//     one replica per shard and the Replicated table copies it to the others);
//   - zookeeper: the cluster's ZooKeeper, and distributed_ddl (ON CLUSTER
//     queries) under /clickhouse/task_queue/ddl.
//
// Layout: DIR/zookeeper/, DIR/s<shard>r<replica>/ (1-based).
type Cluster struct {
	name  string
	dir   string
	zk    *ZooKeeper
	nodes [][]*ClickHouse // [shard][replica]
}

// StartCluster starts a ZooKeeper and the cluster's servers in dir (created
// if needed), on free ports, and waits until every server answers (the
// servers start in parallel). Every process dies with the test binary
// (Pdeathsig). On error nothing is left running. The error wraps
// ErrNotInstalled or ErrZooKeeperNotInstalled when a binary is missing.
func StartCluster(ctx context.Context, dir string, cfg ClusterConfig) (*Cluster, error) {
	if cfg.Name == "" {
		cfg.Name = DefaultClusterName
	}
	if cfg.Shards <= 0 {
		cfg.Shards = 2
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = 2
	}
	if _, _, err := findClickHouse(); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	zk, err := StartZooKeeper(ctx, filepath.Join(dir, "zookeeper"), cfg.Log)
	if err != nil {
		return nil, err
	}
	c := &Cluster{name: cfg.Name, dir: dir, zk: zk}
	for s := range cfg.Shards {
		var row []*ClickHouse
		for r := range cfg.Replicas {
			n, err := newClickHouse(filepath.Join(dir, fmt.Sprintf("s%dr%d", s+1, r+1)), cfg.Log)
			if err != nil {
				zk.Stop()
				return nil, err
			}
			row = append(row, n)
		}
		c.nodes = append(c.nodes, row)
	}
	for try := 1; ; try++ {
		err := c.startNodes(ctx)
		if err == nil {
			return c, nil
		}
		c.Kill()
		if !errors.Is(err, errPortInUse) || try == startTries {
			return nil, err
		}
	}
}

// startNodes picks ports for every node, writes their configs and starts
// them in parallel.
func (c *Cluster) startNodes(ctx context.Context) error {
	all := c.Nodes()
	ports, err := freePorts(3 * len(all))
	if err != nil {
		return err
	}
	for i, n := range all {
		n.tcpPort, n.httpPort, n.interserverPort = ports[3*i], ports[3*i+1], ports[3*i+2]
		n.readyLine = "DDLWorker: Processing tasks"
	}
	remote := c.remoteServers()
	for s, row := range c.nodes {
		for r, n := range row {
			n.extraConfig = fmt.Sprintf(`    <macros>
        <shard>%02d</shard>
        <replica>r%d</replica>
    </macros>
%s    <zookeeper>
        <node index="1">
            <host>127.0.0.1</host>
            <port>%d</port>
        </node>
        <session_timeout_ms>10000</session_timeout_ms>
    </zookeeper>
    <distributed_ddl>
        <path>/clickhouse/task_queue/ddl</path>
    </distributed_ddl>
`, s+1, r+1, remote, c.zk.Port())
			if err := n.writeConfig(); err != nil {
				return err
			}
		}
	}
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, n := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.start(ctx); err != nil {
				errs[i] = fmt.Errorf("node %s: %w", filepath.Base(n.Dir()), err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// remoteServers renders the remote_servers element shared by every node.
func (c *Cluster) remoteServers() string {
	var b strings.Builder
	fmt.Fprintf(&b, "    <remote_servers>\n        <%s>\n", xmlText(c.name))
	for _, row := range c.nodes {
		b.WriteString("            <shard>\n                <weight>1</weight>\n                <internal_replication>true</internal_replication>\n")
		for _, n := range row {
			fmt.Fprintf(&b, "                <replica><host>127.0.0.1</host><port>%d</port></replica>\n", n.tcpPort)
		}
		b.WriteString("            </shard>\n")
	}
	fmt.Fprintf(&b, "        </%s>\n    </remote_servers>\n", xmlText(c.name))
	return b.String()
}

// Name returns the cluster's name in remote_servers (for ON CLUSTER).
func (c *Cluster) Name() string { return c.name }

// Dir returns the cluster's directory.
func (c *Cluster) Dir() string { return c.dir }

// ZooKeeper returns the cluster's ZooKeeper.
func (c *Cluster) ZooKeeper() *ZooKeeper { return c.zk }

// Shards returns the number of shards.
func (c *Cluster) Shards() int { return len(c.nodes) }

// Replicas returns the number of replicas per shard.
func (c *Cluster) Replicas() int { return len(c.nodes[0]) }

// Node returns replica r of shard s (both 0-based; shard s is the s-th shard
// of remote_servers, whose macro is fmt.Sprintf("%02d", s+1)).
func (c *Cluster) Node(s, r int) *ClickHouse { return c.nodes[s][r] }

// Nodes returns every server, shard by shard.
func (c *Cluster) Nodes() []*ClickHouse {
	var all []*ClickHouse
	for _, row := range c.nodes {
		all = append(all, row...)
	}
	return all
}

// DSN returns a DSN for database db on the first replica of the first shard.
func (c *Cluster) DSN(db string) string { return c.nodes[0][0].DSN(db) }

// Stop stops every server (cleanly, in parallel), then ZooKeeper. Data
// directories are kept.
func (c *Cluster) Stop() error {
	errs := c.each(func(n *ClickHouse) error { return n.Stop() })
	return errors.Join(errs, c.zk.Stop())
}

// Kill kills every server and ZooKeeper (no clean shutdown).
func (c *Cluster) Kill() {
	c.each(func(n *ClickHouse) error { return n.Kill() })
	c.zk.Stop()
}

func (c *Cluster) each(f func(*ClickHouse) error) error {
	all := c.Nodes()
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, n := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(n); err != nil {
				errs[i] = fmt.Errorf("%s: %w", filepath.Base(n.Dir()), err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// LogTail returns the last n lines of every process's logs.
func (c *Cluster) LogTail(n int) string {
	var b strings.Builder
	for _, node := range c.Nodes() {
		fmt.Fprintf(&b, "===== %s (%s) =====\n%s", filepath.Base(node.Dir()), node.Addr(), node.LogTail(n))
	}
	b.WriteString(c.zk.LogTail(n))
	return b.String()
}

// ---- shared cluster ----------------------------------------------------------------

var sharedCluster struct {
	mu      sync.Mutex
	started bool
	c       *Cluster
	err     error
	dir     string
}

// SharedCluster returns the cluster (2 shards × 2 replicas, DefaultClusterName)
// shared by all tests of the calling test binary: started once, lazily, in a
// temp dir of its own, and stopped by Main (or StopShared). Tests work in
// their own database; a test that stops a node must restart it before it
// returns. When a component is missing, or the cluster fails to start, the
// test is skipped — or failed when CI is set.
func SharedCluster(t testing.TB) *Cluster {
	t.Helper()
	sharedCluster.mu.Lock()
	defer sharedCluster.mu.Unlock()
	if !sharedCluster.started {
		sharedCluster.started = true
		dir, err := os.MkdirTemp("", "optlake-cluster-")
		if err != nil {
			sharedCluster.err = err
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 2*testStartTimeout)
			sharedCluster.c, sharedCluster.err = StartCluster(ctx, dir, ClusterConfig{})
			cancel()
			if sharedCluster.err != nil {
				os.RemoveAll(dir)
			} else {
				sharedCluster.dir = dir
			}
		}
	}
	if err := sharedCluster.err; err != nil {
		if errors.Is(err, ErrNotInstalled) || errors.Is(err, ErrZooKeeperNotInstalled) {
			unavailable(t, "%v", err)
		} else {
			unavailable(t, "the ClickHouse cluster failed to start: %v", err)
		}
		return nil
	}
	return sharedCluster.c
}

// stopSharedCluster stops the shared cluster, if one was started, and
// removes its directory unless keepDir.
func stopSharedCluster(keepDir bool) {
	sharedCluster.mu.Lock()
	defer sharedCluster.mu.Unlock()
	if sharedCluster.c != nil {
		if err := sharedCluster.c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: stopping the shared cluster: %v\n", err)
		}
	}
	if sharedCluster.dir != "" {
		if keepDir {
			fmt.Fprintf(os.Stderr, "testenv: tests failed; the shared cluster's data and logs kept in %s\n", sharedCluster.dir)
		} else {
			os.RemoveAll(sharedCluster.dir)
		}
	}
	sharedCluster.started, sharedCluster.c, sharedCluster.err, sharedCluster.dir = false, nil, nil, ""
}
