package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/optlake/optlake/bench"
	"github.com/optlake/optlake/internal/testenv"
)

const (
	chDB      = "optlake_bench"
	chShape   = "instruments_shape" // an empty copy of the migrated instruments table
	chScratch = "bench_rows"        // Log table: the rows in listing order, for the dumps
	chRef     = "ref"               // the references' target, same shape as instruments
)

// clickhouse starts a clickhouse-server in the work dir, migrates a database
// with the sink's migrations, and for every listing of 200 per group
// measures optlake's Arrow → ClickHouse load against clickhouse-client
// ingesting the same rows as TSV and as Native into a table of the same
// shape (CREATE TABLE ref AS instruments: same columns, engine, key).
func (b *benchRun) clickhouse(ctx context.Context) error {
	b.progress("starting clickhouse-server")
	c, err := testenv.StartClickHouse(ctx, filepath.Join(b.work, "clickhouse"), nil)
	if err != nil {
		return err
	}
	defer c.Stop()
	b.rep.Machine.ClickHouse = c.Version()
	b.progress("clickhouse-server %s on %s (started in %s)", c.Version(), c.Addr(), c.StartupTime().Round(time.Millisecond))
	dsn := c.DSN(chDB)
	q := func(sql string) (string, error) { return c.Query(ctx, sql) }
	// A server kept with -keep may hold an earlier run's database.
	if _, err := q("DROP DATABASE IF EXISTS " + chDB); err != nil {
		return err
	}
	if err := bench.Migrate(ctx, dsn); err != nil {
		return err
	}
	if _, err := q(fmt.Sprintf("CREATE TABLE %s.%s AS %s.instruments", chDB, chShape, chDB)); err != nil {
		return err
	}
	client, err := clientArgv(c)
	if err != nil {
		return err
	}
	// What a clickhouse-client invocation costs by itself (start-up, connect).
	m := b.rep.add("ch_client_startup", "-", "clickhouse-client")
	for range 3 {
		start := time.Now()
		if _, err := runProc(ctx, exec.CommandContext(ctx, client[0], append(client[1:], "--query", "SELECT 1")...), ""); err != nil {
			return err
		}
		m.Runs = append(m.Runs, bench.Result{Rows: 1, Seconds: time.Since(start).Seconds()})
	}
	m.finish()

	for _, l := range b.rep.Listings {
		if l.Huge {
			continue // the records are the same whatever the grouping
		}
		if err := b.clickhouseListing(ctx, c, client, dsn, l); err != nil {
			return fmt.Errorf("%s: %w", l.Label, err)
		}
	}
	return nil
}

func (b *benchRun) clickhouseListing(ctx context.Context, c *testenv.ClickHouse, client []string, dsn string, l Listing) error {
	q := func(sql string) (string, error) { return c.Query(ctx, sql) }
	recreate := func(table string) error {
		_, err := q(fmt.Sprintf("DROP TABLE IF EXISTS %[1]s.%[2]s; CREATE TABLE %[1]s.%[2]s AS %[1]s.%[3]s", chDB, table, chShape))
		return err
	}
	count := func(table string) error {
		out, err := q(fmt.Sprintf("SELECT count() FROM %s.%s", chDB, table))
		if err != nil {
			return err
		}
		if n, _ := strconv.Atoi(out); n != l.Instruments {
			return fmt.Errorf("%s has %s rows after the load, want %d", table, out, l.Instruments)
		}
		return nil
	}
	if _, err := q(fmt.Sprintf("DROP TABLE IF EXISTS %[1]s.%[2]s; CREATE TABLE %[1]s.%[2]s AS %[1]s.%[3]s ENGINE = Log", chDB, chScratch, chShape)); err != nil {
		return err
	}
	size := sizeLabel(l.Instruments)
	load := b.rep.add("chload", size, "optlake")
	loadOnce := func(i int) error {
		if err := recreate("instruments"); err != nil {
			return err
		}
		args := []string{"-file", l.Path, "-dsn", dsn}
		if i == 0 {
			args = append(args, "-scratch", chScratch)
		}
		if b.cfg.batchRows > 0 {
			args = append(args, "-batch-rows", strconv.Itoa(b.cfg.batchRows))
		}
		if b.cfg.profile != "" {
			args = append(args, "-cpuprofile", b.profilePath("chload", size, i))
		}
		out, err := measureChild(ctx, nil, "chload", args...)
		if err != nil {
			return err
		}
		if err := count("instruments"); err != nil {
			return err
		}
		load.Runs = append(load.Runs, out.Main)
		b.progress("optlake Arrow→ClickHouse %s run %d: %s, CPU %.2fs incl. pre-decode %.2fs", size, i+1, rate(out.Main), out.Main.CPUSeconds, out.Decode.Seconds)
		// An empty table again: no background merges of these parts
		// while the next measurement runs.
		return recreate("instruments")
	}
	if err := loadOnce(0); err != nil {
		return err
	}

	// The same rows, in listing order, as clickhouse-client reads them.
	formats := []struct{ name, key, path string }{{"TabSeparated", "ch_tsv", ""}, {"Native", "ch_native", ""}}
	for k := range formats {
		f := &formats[k]
		f.path = filepath.Join(b.work, "rows-"+size+"."+strings.ToLower(f.name))
		out, err := os.Create(f.path)
		if err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, client[0], append(client[1:], "--query", fmt.Sprintf("SELECT * FROM %s.%s FORMAT %s", chDB, chScratch, f.name))...)
		cmd.Stdout = out
		_, err = runProc(ctx, cmd, "")
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("dump %s: %w", f.name, err)
		}
		if b.cfg.keep == "" {
			defer os.Remove(f.path)
		}
		st, err := os.Stat(f.path)
		if err != nil {
			return err
		}
		b.rep.Files = append(b.rep.Files, File{Label: size + " rows as " + f.name, Bytes: st.Size()})
		b.progress("dumped %s rows as %s: %s", size, f.name, mib(st.Size()))
	}
	if _, err := q(fmt.Sprintf("DROP TABLE %s.%s", chDB, chScratch)); err != nil {
		return err
	}
	refs := make([]*Measurement, len(formats))
	for k, f := range formats {
		refs[k] = b.rep.add(f.key, size, "clickhouse-client")
	}
	for i := range b.cfg.runs {
		if i > 0 {
			if err := loadOnce(i); err != nil {
				return err
			}
		}
		for k, f := range formats {
			if err := recreate(chRef); err != nil {
				return err
			}
			st, err := os.Stat(f.path)
			if err != nil {
				return err
			}
			cmd := exec.CommandContext(ctx, client[0], append(client[1:], "--query", fmt.Sprintf("INSERT INTO %s.%s FORMAT %s", chDB, chRef, f.name))...)
			pr, err := runProc(ctx, cmd, f.path)
			if err != nil {
				return err
			}
			if err := count(chRef); err != nil {
				return err
			}
			r := bench.Result{Rows: int64(l.Instruments), InBytes: st.Size(), Seconds: pr.Wall.Seconds(), PeakRSS: pr.PeakRSS, CPUSeconds: pr.CPU}
			refs[k].Runs = append(refs[k].Runs, r)
			b.progress("clickhouse-client %s %s run %d: %d rows in %.2fs = %s rows/s (client CPU %.2fs)", f.name, size, i+1, r.Rows, r.Seconds, thousands(r.RowsPerSec()), r.CPUSeconds)
		}
	}
	load.finish()
	for _, m := range refs {
		m.finish()
	}
	_, err := q(fmt.Sprintf("DROP TABLE IF EXISTS %s.%s", chDB, chRef))
	return err
}

// clientArgv is the clickhouse-client command line for server c, as
// testenv runs it (its own client.xml, the server's port).
func clientArgv(c *testenv.ClickHouse) ([]string, error) {
	var argv []string
	if bin := os.Getenv(testenv.EnvClickHouseBin); bin != "" {
		argv = []string{bin, "client"}
	} else if p, err := exec.LookPath("clickhouse-client"); err == nil {
		argv = []string{p}
	} else if p, err := exec.LookPath("clickhouse"); err == nil {
		argv = []string{p, "client"}
	} else {
		return nil, fmt.Errorf("clickhouse-client not found: %w", testenv.ErrNotInstalled)
	}
	return append(argv, "--config-file="+filepath.Join(c.Dir(), "client.xml"),
		"--host=127.0.0.1", "--port="+strconv.Itoa(c.TCPPort()), "--user=default"), nil
}
