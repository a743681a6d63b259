package testenv

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The second user of every test server, with a password, for tests that check
// a password never shows up in logs, errors or output.
const (
	TestUser     = "optlake"
	TestPassword = "s3cret-test-pw"
)

// ErrNotInstalled is returned (wrapped) by StartClickHouse when no ClickHouse
// server or client binary is found.
var ErrNotInstalled = errors.New("clickhouse-server not installed: run `make deps`")

// EnvClickHouseBin names a ClickHouse single binary ("clickhouse", as shipped by
// current releases) to use instead of the Debian clickhouse-server /
// clickhouse-client found on PATH: run as "BIN server" and "BIN client".
const EnvClickHouseBin = "OPTLAKE_TEST_CLICKHOUSE_BIN"

const (
	startTimeout = 30 * time.Second // until the server answers SELECT 1
	stopTimeout  = 10 * time.Second // SIGTERM → SIGKILL
	startTries   = 5                // fresh ports when a port was taken meanwhile
)

// ClickHouse is a clickhouse-server process running from a directory of its
// own: its config, data and logs are all under Dir(); it listens on 127.0.0.1
// only, on ports picked free at start and kept across Restart.
//
// Layout: DIR/config.xml, DIR/users.xml, DIR/client.xml, DIR/data/ (the server
// path: metadata, data, tmp, ...), DIR/log/clickhouse-server{,.err}.log.
type ClickHouse struct {
	dir      string
	server   []string // argv prefix to run the server
	client   []string // argv prefix to run the client
	tcpPort  int
	httpPort int
	// Set for a cluster node (see StartCluster): the port replicas fetch
	// parts on, and XML elements added to config.xml (macros, remote_servers,
	// zookeeper, distributed_ddl).
	interserverPort int
	extraConfig     string
	// readyLine, if set, is a further log line start waits for (with the
	// log at debug level): a cluster node is ready only once its DDLWorker
	// has its ZooKeeper session and processes the queue — on 18.16 that
	// can come after "Ready for connections", and an ON CLUSTER query that
	// arrives before crashes the server (SIGSEGV in ZooKeeper::createImpl).
	readyLine string
	log       io.Writer
	out       *tailBuffer // the server's stdout+stderr, last bytes

	proc    process
	mu      sync.Mutex
	version string
	startup time.Duration
}

// StartClickHouse writes a config into dir (created if needed) and starts a
// clickhouse-server on free ports, waiting (at most 30s, or until ctx ends)
// until it answers a query. The server's own stdout/stderr go to log (may be
// nil); its log files are under dir/log. The returned error holds the tail of
// the server's logs when it failed to start; it wraps ErrNotInstalled when no
// binary is found.
//
// The server dies with the test binary (Pdeathsig), even when that crashes.
func StartClickHouse(ctx context.Context, dir string, log io.Writer) (*ClickHouse, error) {
	c, err := newClickHouse(dir, log)
	if err != nil {
		return nil, err
	}
	for try := 1; ; try++ {
		ports, err := freePorts(2)
		if err != nil {
			return nil, err
		}
		c.tcpPort, c.httpPort = ports[0], ports[1]
		if err := c.writeConfig(); err != nil {
			return nil, err
		}
		err = c.start(ctx)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, errPortInUse) || try == startTries {
			return nil, err
		}
	}
}

// newClickHouse finds the binaries and creates dir, dir/log and dir/data; it
// picks no ports and writes no config.
func newClickHouse(dir string, log io.Writer) (*ClickHouse, error) {
	server, client, err := findClickHouse()
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = io.Discard
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{dir, filepath.Join(dir, "log"), filepath.Join(dir, "data")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	return &ClickHouse{dir: dir, server: server, client: client, log: log, out: &tailBuffer{max: 64 << 10}}, nil
}

// Addr returns the native-protocol address, "127.0.0.1:PORT".
func (c *ClickHouse) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(c.tcpPort)) }

// TCPPort returns the native-protocol port.
func (c *ClickHouse) TCPPort() int { return c.tcpPort }

// HTTPPort returns the HTTP port (clickhouse-go's HTTP protocol does not work
// with 18.16; curl does).
func (c *ClickHouse) HTTPPort() int { return c.httpPort }

// Dir returns the server's directory (config, data/, log/).
func (c *ClickHouse) Dir() string { return c.dir }

// DSN returns "clickhouse://default@127.0.0.1:PORT/db" (the passwordless user).
func (c *ClickHouse) DSN(db string) string {
	return "clickhouse://default@" + c.Addr() + "/" + url.PathEscape(db)
}

// DSNAs returns a DSN for the given user and password, e.g.
// DSNAs(TestUser, TestPassword, db).
func (c *ClickHouse) DSNAs(user, password, db string) string {
	u := url.URL{Scheme: "clickhouse", User: url.UserPassword(user, password), Host: c.Addr(), Path: "/" + db}
	return u.String()
}

// Version returns the server's version as it reports it ("18.16.1").
func (c *ClickHouse) Version() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// StartupTime returns how long the last (re)start took until the server
// answered a query.
func (c *ClickHouse) StartupTime() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.startup
}

// Running reports whether the server process is alive.
func (c *ClickHouse) Running() bool { return c.proc.running() }

// Stop shuts the server down (SIGTERM; SIGKILL after 10s) and waits for it to
// exit. The data directory is kept. Stopping a stopped server is a no-op.
func (c *ClickHouse) Stop() error {
	return c.terminate(syscall.SIGTERM, stopTimeout)
}

// Kill kills the server with SIGKILL (an outage, no clean shutdown) and waits
// for it to exit. The data directory is kept.
func (c *ClickHouse) Kill() error {
	return c.terminate(syscall.SIGKILL, stopTimeout)
}

// Restart starts the server again on the same ports and data directory
// (stopping it first if it is running).
func (c *ClickHouse) Restart(ctx context.Context) error {
	if err := c.Stop(); err != nil && c.Running() {
		return err
	}
	// The ports are ours, but a client may briefly hold one as an ephemeral
	// port; retry a bind failure for a while.
	deadline := time.Now().Add(startTimeout)
	for {
		err := c.start(ctx)
		if err == nil || !errors.Is(err, errPortInUse) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Query runs sql (one or more statements separated by ";") with
// clickhouse-client as the passwordless default user — independent of
// optlake's own Go client — and returns its output (TabSeparated, as the client
// prints when not on a terminal) without the final newline. Note 18.16's
// TabSeparated escapes ' as \' (and tab, newline, backslash as \t, \n, \\);
// DateTime prints in UTC ("2026-11-20 08:00:00"), the server's time zone.
func (c *ClickHouse) Query(ctx context.Context, sql string) (string, error) {
	return c.QueryAs(ctx, "default", "", sql)
}

// QueryAs is Query as another user, e.g. QueryAs(ctx, TestUser, TestPassword, sql).
func (c *ClickHouse) QueryAs(ctx context.Context, user, password, sql string) (string, error) {
	args := append([]string{}, c.client[1:]...)
	args = append(args,
		"--config-file="+filepath.Join(c.dir, "client.xml"), // not ~/.clickhouse-client
		"--host=127.0.0.1", "--port="+strconv.Itoa(c.tcpPort),
		"--user="+user, "--multiquery")
	if password != "" {
		args = append(args, "--password="+password)
	}
	// The SQL goes in on stdin, not as --query: no argv size limit (~128KiB).
	out, err := runSQL(exec.CommandContext(ctx, c.client[0], args...), sql)
	if err != nil {
		return "", fmt.Errorf("clickhouse-client: %w", err)
	}
	return strings.TrimSuffix(string(out), "\n"), nil
}

// Exec runs sql like Query and discards the output.
func (c *ClickHouse) Exec(ctx context.Context, sql string) error {
	_, err := c.Query(ctx, sql)
	return err
}

// LogTail returns the last n lines of the server's log file and error log
// file, for failure messages.
func (c *ClickHouse) LogTail(n int) string {
	var b strings.Builder
	for _, name := range []string{"clickhouse-server.err.log", "clickhouse-server.log"} {
		p := filepath.Join(c.dir, "log", name)
		data, err := os.ReadFile(p)
		if err != nil || len(data) == 0 {
			continue
		}
		fmt.Fprintf(&b, "--- %s (last %d lines) ---\n%s\n", p, n, lastLines(string(data), n))
	}
	if out := c.out.String(); strings.TrimSpace(out) != "" {
		fmt.Fprintf(&b, "--- server stdout/stderr ---\n%s\n", lastLines(out, n))
	}
	return b.String()
}

// ---- process management -------------------------------------------------------

var errPortInUse = errors.New("port already in use")

func (c *ClickHouse) start(ctx context.Context) error {
	if c.proc.running() {
		return fmt.Errorf("clickhouse-server already running (pid %d)", c.proc.pid())
	}

	logPath := filepath.Join(c.dir, "log", "clickhouse-server.log")
	var logOffset int64
	if st, err := os.Stat(logPath); err == nil {
		logOffset = st.Size()
	}
	errLogPath := filepath.Join(c.dir, "log", "clickhouse-server.err.log")
	var errLogOffset int64
	if st, err := os.Stat(errLogPath); err == nil {
		errLogOffset = st.Size()
	}

	began := time.Now()
	args := append(append([]string{}, c.server[1:]...), "--config-file="+filepath.Join(c.dir, "config.xml"))
	cmd := exec.Command(c.server[0], args...)
	cmd.Dir = c.dir
	w := io.MultiWriter(c.out, c.log)
	cmd.Stdout, cmd.Stderr = w, w
	exited, err := c.proc.start(cmd, nil)
	if err != nil {
		return fmt.Errorf("starting %s: %w", c.server[0], err)
	}

	fail := func(err error) error {
		_ = c.terminate(syscall.SIGKILL, stopTimeout)
		return err
	}
	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-exited:
			// Its own log holds the reason (e.g. "Address already in use").
			tail := readFrom(errLogPath, errLogOffset) + readFrom(logPath, logOffset) + c.out.String()
			err := fmt.Errorf("clickhouse-server exited during startup (%s):\n%s", cmd.ProcessState, lastLines(tail, 40))
			if strings.Contains(tail, "Address already in use") {
				err = fmt.Errorf("%w: %w", errPortInUse, err)
			}
			return err
		case <-ctx.Done():
			return fail(fmt.Errorf("clickhouse-server start: %w\n%s", ctx.Err(), c.LogTail(40)))
		case <-deadline.C:
			return fail(fmt.Errorf("clickhouse-server did not answer within %s\n%s", startTimeout, c.LogTail(40)))
		case <-tick.C:
		}
		// "Ready for connections" is logged once every port is bound: only then
		// is a server on our port surely ours (a parallel test's server could
		// have taken the port, making ours exit).
		if l := readFrom(logPath, logOffset); !strings.Contains(l, "Ready for connections") || (c.readyLine != "" && !strings.Contains(l, c.readyLine)) {
			continue
		}
		// Ask over HTTP: ~1ms, where spawning clickhouse-client takes ~100ms.
		v, err := c.httpQuery(ctx, "SELECT version()")
		if err != nil {
			continue
		}
		c.mu.Lock()
		c.version = strings.TrimSpace(v)
		c.startup = time.Since(began)
		c.mu.Unlock()
		return nil
	}
}

// startupHTTP keeps no idle connection: one would hold up the server's
// shutdown until SIGKILL.
var startupHTTP = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// httpQuery runs one query over the HTTP interface (used while starting).
func (c *ClickHouse) httpQuery(ctx context.Context, sql string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	u := fmt.Sprintf("http://127.0.0.1:%d/?query=%s", c.httpPort, url.QueryEscape(sql))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := startupHTTP.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return strings.TrimSuffix(string(body), "\n"), nil
}

func (c *ClickHouse) terminate(sig syscall.Signal, timeout time.Duration) error {
	return c.proc.terminate(sig, timeout)
}

// ---- configuration ----------------------------------------------------------------

func findClickHouse() (server, client []string, err error) {
	if bin := os.Getenv(EnvClickHouseBin); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return nil, nil, fmt.Errorf("%s=%s: %w", EnvClickHouseBin, bin, err)
		}
		return []string{bin, "server"}, []string{bin, "client"}, nil
	}
	find := func(name string, extra ...string) string {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		for _, p := range extra {
			if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
				return p
			}
		}
		return ""
	}
	single := find("clickhouse", "/usr/bin/clickhouse", "/usr/local/bin/clickhouse")
	if p := find("clickhouse-server", "/usr/sbin/clickhouse-server", "/usr/bin/clickhouse-server"); p != "" {
		server = []string{p}
	} else if single != "" {
		server = []string{single, "server"}
	}
	if p := find("clickhouse-client", "/usr/bin/clickhouse-client"); p != "" {
		client = []string{p}
	} else if single != "" {
		client = []string{single, "client"}
	}
	switch {
	case server == nil:
		return nil, nil, ErrNotInstalled
	case client == nil:
		return nil, nil, fmt.Errorf("clickhouse-client not found: %w", ErrNotInstalled)
	}
	return server, client, nil
}

func xmlText(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// writeConfig writes config.xml, users.xml and client.xml. The keys are those
// 18.16 knows; it ignores unknown ones, but requires mark_cache_size.
func (c *ClickHouse) writeConfig() error {
	d := func(rel string) string { return xmlText(filepath.Join(c.dir, rel)) + "/" }
	f := func(rel string) string { return xmlText(filepath.Join(c.dir, rel)) }
	config := fmt.Sprintf(`<?xml version="1.0"?>
<!-- Generated by internal/testenv for a test server; nothing outside this directory is used. -->
<yandex>
    <logger>
        <level>%s</level>
        <log>%s</log>
        <errorlog>%s</errorlog>
        <size>100M</size>
        <count>1</count>
    </logger>
    <listen_host>127.0.0.1</listen_host>
    <tcp_port>%d</tcp_port>
    <http_port>%d</http_port>
%s    <path>%s</path>
    <tmp_path>%s</tmp_path>
    <user_files_path>%s</user_files_path>
    <format_schema_path>%s</format_schema_path>
    <users_config>users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    <mark_cache_size>67108864</mark_cache_size>
    <uncompressed_cache_size>67108864</uncompressed_cache_size>
    <max_concurrent_queries>200</max_concurrent_queries>
    <!-- An idle keep-alive HTTP connection holds up shutdown as long as this. -->
    <keep_alive_timeout>1</keep_alive_timeout>
    <mlock_executable>false</mlock_executable>
%s</yandex>
`,
		c.logLevel(), f("log/clickhouse-server.log"), f("log/clickhouse-server.err.log"),
		c.tcpPort, c.httpPort, c.interserverConfig(),
		d("data"), d("data/tmp"), d("data/user_files"), d("data/format_schemas"), c.extraConfig)

	users := fmt.Sprintf(`<?xml version="1.0"?>
<!-- Generated by internal/testenv. -->
<yandex>
    <profiles>
        <default>
            <!-- Idle native connections notice a shutdown after poll_interval
                 seconds (default 10), which holds up Stop by as much. -->
            <poll_interval>1</poll_interval>
        </default>
    </profiles>
    <users>
        <default>
            <password></password>
            <networks><ip>::/0</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
        <%s>
            <password>%s</password>
            <networks><ip>::/0</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
        </%s>
    </users>
    <quotas>
        <default>
            <interval>
                <duration>3600</duration>
                <queries>0</queries>
                <errors>0</errors>
                <result_rows>0</result_rows>
                <read_rows>0</read_rows>
                <execution_time>0</execution_time>
            </interval>
        </default>
    </quotas>
</yandex>
`, TestUser, xmlText(TestPassword), TestUser)

	client := `<?xml version="1.0"?>
<!-- Generated by internal/testenv: keeps clickhouse-client from reading ~/.clickhouse-client. -->
<config></config>
`
	for name, body := range map[string]string{"config.xml": config, "users.xml": users, "client.xml": client} {
		if err := os.WriteFile(filepath.Join(c.dir, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// logLevel is the server's log level: debug when start waits for a debug
// line (readyLine), information otherwise.
func (c *ClickHouse) logLevel() string {
	if c.readyLine != "" {
		return "debug"
	}
	return "information"
}

// interserverConfig is the interserver_http part of config.xml: none for a
// standalone server (no replication between test servers).
func (c *ClickHouse) interserverConfig() string {
	if c.interserverPort == 0 {
		return "    <!-- no interserver_http_port: no replication between test servers -->\n"
	}
	return fmt.Sprintf("    <interserver_http_port>%d</interserver_http_port>\n    <interserver_http_host>127.0.0.1</interserver_http_host>\n", c.interserverPort)
}

// freePorts returns n distinct ports that were free on 127.0.0.1 a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// ---- small helpers -------------------------------------------------------------------

// readFrom returns the contents of path from offset on ("" if unreadable).
func readFrom(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	data, _ := io.ReadAll(f)
	return string(data)
}

func lastLines(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = append([]byte(nil), b.buf[len(b.buf)-b.max:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
