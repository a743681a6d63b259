package testenv

import (
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx"
)

// Postgres is a private PostgreSQL server (Debian's, run from its binaries
// in a temp dir, trust authentication on 127.0.0.1) that the Iceberg SQL
// catalog's tests use. The postgres process dies with the test binary
// (process: Pdeathsig), killed or panicking.
type Postgres struct {
	dir, bin string
	Port     int
	User     string
	proc     process
}

// PostgresPassword is the password in the DSNs the tests use. The server
// trusts 127.0.0.1 and ignores it; the tests check that it shows up in no
// output, error or object.
const PostgresPassword = "pg-secret-Jw4Kq8"

var sharedPG struct {
	mu  sync.Mutex
	pg  *Postgres
	err error
	n   int
}

// SharedPostgres is one PostgreSQL server for the whole test binary,
// started on first use and stopped by Main (StopShared). When PostgreSQL is
// not installed the test is skipped, or failed when CI is set
// (scripts/deps.sh installs it).
func SharedPostgres(t testing.TB) *Postgres {
	t.Helper()
	sharedPG.mu.Lock()
	defer sharedPG.mu.Unlock()
	if sharedPG.pg == nil && sharedPG.err == nil {
		sharedPG.pg, sharedPG.err = startPostgres()
	}
	if sharedPG.err != nil {
		unavailable(t, "postgresql: %v", sharedPG.err)
	}
	return sharedPG.pg
}

// PostgresDSN is a fresh database of the shared server for one test, as a
// postgres:// URL with PostgresPassword in it.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	pg := SharedPostgres(t)
	sharedPG.mu.Lock()
	sharedPG.n++
	name := fmt.Sprintf("t%d_%s", sharedPG.n, sanitizeIdent(strings.ToLower(t.Name()), 40))
	sharedPG.mu.Unlock()
	db, err := sql.Open("pgx", pg.dsn("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE DATABASE "` + name + `"`); err != nil {
		t.Fatalf("postgresql: create database %s: %v", name, err)
	}
	return pg.dsn(name)
}

func (p *Postgres) dsn(db string) string {
	return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", p.User, PostgresPassword, p.Port, db)
}

// pgBin is the newest installed PostgreSQL's bin folder.
func pgBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(dirs) == 0 {
		return "", fmt.Errorf("no /usr/lib/postgresql/*/bin/postgres (run `bash scripts/deps.sh`)")
	}
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(dirs[i]))))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(dirs[j]))))
		return vi < vj
	})
	return filepath.Dir(dirs[len(dirs)-1]), nil
}

// asServer runs a PostgreSQL binary: as the postgres user when we are root
// (initdb and postgres refuse to run as root).
func asServer(name string, args ...string) (*exec.Cmd, error) {
	cmd := exec.Command(name, args...)
	if os.Geteuid() != 0 {
		return cmd, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, err
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("user postgres: %w", err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	return cmd, nil
}

func startPostgres() (*Postgres, error) {
	bin, err := pgBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "optlake-postgres-")
	if err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chown", "postgres:postgres", dir).CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("chown %s: %v: %s", dir, err, out)
		}
	}
	p := &Postgres{dir: dir, bin: bin, User: "optlake"}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	p.Port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	data := filepath.Join(dir, "data")
	fail := func(err error) (*Postgres, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	initdb, err := asServer(filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", p.User, "--no-sync", "-E", "UTF8")
	if err != nil {
		return fail(err)
	}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %v: %s", err, out))
	}
	logFile, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		return fail(err)
	}
	defer logFile.Close() // the child has its own copy
	cmd, err := asServer(filepath.Join(bin, "postgres"), "-D", data, "-c", "listen_addresses=127.0.0.1", "-p", strconv.Itoa(p.Port),
		"-k", dir, "-c", "fsync=off", "-c", "max_connections=200")
	if err != nil {
		return fail(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	exited, err := p.proc.start(cmd, nil)
	if err != nil {
		return fail(fmt.Errorf("postgres: %w", err))
	}
	db, err := sql.Open("pgx", p.dsn("postgres"))
	if err != nil {
		_ = p.proc.terminate(syscall.SIGKILL, stopTimeout)
		return fail(err)
	}
	defer db.Close()
	deadline := time.Now().Add(testStartTimeout)
	for {
		err := db.Ping()
		if err == nil {
			return p, nil
		}
		select {
		case <-exited:
		case <-time.After(100 * time.Millisecond):
			if time.Now().Before(deadline) {
				continue
			}
			_ = p.proc.terminate(syscall.SIGKILL, stopTimeout)
		}
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		return fail(fmt.Errorf("postgres did not start: %v\n%s", err, log))
	}
}

// stop stops the server (SIGQUIT, an immediate shutdown: its data is
// thrown away) and removes its folder.
func (p *Postgres) stop() error {
	err := p.proc.terminate(syscall.SIGQUIT, stopTimeout)
	os.RemoveAll(p.dir)
	return err
}

// stopSharedPostgres stops the shared server, if it was started.
func stopSharedPostgres() {
	sharedPG.mu.Lock()
	defer sharedPG.mu.Unlock()
	if sharedPG.pg != nil {
		if err := sharedPG.pg.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: stopping the shared postgresql: %v\n", err)
		}
	}
	sharedPG.pg, sharedPG.err, sharedPG.n = nil, nil, 0
}

// PostgresTable is ClickHouse's (chDB's) postgresql() table function that
// reads table of the database a postgres:// DSN names, with its user and
// password.
func PostgresTable(t testing.TB, dsn, table string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		t.Fatalf("postgresql: a DSN with a user: %v", err)
	}
	pw, _ := u.User.Password()
	return fmt.Sprintf("postgresql('%s', '%s', '%s', '%s', '%s')", u.Host, strings.TrimPrefix(u.Path, "/"), table, u.User.Username(), pw)
}
