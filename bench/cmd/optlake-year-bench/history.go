package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/optlake/optlake/internal/testenv"
)

// historyRows are the rows beside `history NAME` on a local disk: the
// same command on a bucket (versitygw serving a hard-linked copy of the
// lake), and DuckDB's answer from the same files (node and
// tools/duckdb/query.mjs: its start alone, then history's two queries).
var historyRows = []string{"history NAME, versitygw", "DuckDB: SELECT 1 (node and DuckDB start)", "DuckDB: history NAME's two queries"}

// measureHistory times historyRows on each lake. Without versitygw
// (scripts/deps.sh) or with -no-duckdb, those rows are left out.
func measureHistory(ctx context.Context, bin, day1, dayN, inst string, cfg config, rep *Report) error {
	lakes := []struct{ key, dir string }{{"day1", day1}, {"dayN", dayN}}
	if gw, err := testenv.VersityGWBin(); err != nil {
		progress("no versitygw (%v): no bucket row", err)
	} else {
		for _, l := range lakes {
			url, stop, err := serveBucket(ctx, gw, l.dir)
			if err != nil {
				return err
			}
			for r := range cfg.runs {
				p, err := timed(ctx, bin, "history", inst, "--data-dir", url, "--format", "csv")
				if err != nil {
					stop()
					return err
				}
				keep(rep, historyRows[0], l.key, p, r == 0)
			}
			stop()
		}
	}
	if cfg.noDuck {
		return nil
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	script, err := filepath.Abs(filepath.Join(cfg.repo, "tools", "duckdb", "query.mjs"))
	if err != nil {
		return err
	}
	for _, l := range lakes {
		ig, eg := filepath.Join(l.dir, "instruments", "*", "*.parquet"), filepath.Join(l.dir, "instrument_events", "*", "*.parquet")
		for i, q := range []string{"SELECT 1", fmt.Sprintf(`SELECT snapshot_time, source, index_price, is_active, deployed, maker_commission, taker_commission, tick_size, strike, expiration_time
FROM read_parquet('%s') WHERE instrument_name = '%s' ORDER BY snapshot_time;
SELECT snapshot_time, event, field, old_value, new_value FROM read_parquet('%s') WHERE instrument_name = '%s' ORDER BY snapshot_time, event, field`, ig, inst, eg, inst)} {
			for r := range cfg.runs {
				p, err := timed(ctx, node, script, q)
				if err != nil {
					return fmt.Errorf("%s: %w", historyRows[1+i], err)
				}
				keep(rep, historyRows[1+i], l.key, p, r == 0)
			}
		}
	}
	return nil
}

// serveBucket starts versitygw (posix backend) on a fresh folder whose
// bucket "lake" is a hard-linked copy of dir, with the test account's
// keys in this process's environment (the commands timed inherit them);
// stop ends it and removes the folder.
func serveBucket(ctx context.Context, gw, dir string) (url string, stop func(), err error) {
	base := dir + ".versitygw"
	os.RemoveAll(base)
	if err := os.MkdirAll(filepath.Join(base, "data"), 0o755); err != nil {
		return "", nil, err
	}
	if out, err := exec.CommandContext(ctx, "cp", "-al", dir, filepath.Join(base, "data", "lake")).CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("copy lake: %v %s", err, out)
	}
	addr, _, stop, err := startGW(ctx, gw, base)
	if err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("s3://lake?endpoint=http://%s&region=%s", addr, testenv.S3Region), stop, nil
}

// startGW starts versitygw (posix backend) serving base/data (its buckets
// are its folders), with the test account's keys in this process's
// environment (the commands timed inherit them); stop ends it and removes
// base.
func startGW(ctx context.Context, gw, base string) (addr string, pid int, stop func(), err error) {
	if err := os.MkdirAll(filepath.Join(base, "iam"), 0o755); err != nil {
		return "", 0, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", 0, nil, err
	}
	addr = ln.Addr().String()
	ln.Close()
	cmd := exec.Command(gw, "--port", addr, "--iam-dir", filepath.Join(base, "iam"), "posix", filepath.Join(base, "data"))
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+testenv.S3AccessKey, "ROOT_SECRET_KEY="+testenv.S3SecretKey)
	if err := cmd.Start(); err != nil {
		return "", 0, nil, err
	}
	stop = func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		os.RemoveAll(base)
	}
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Since(start) > 30*time.Second {
			stop()
			return "", 0, nil, errors.New("versitygw did not start")
		}
	}
	os.Setenv("AWS_ACCESS_KEY_ID", testenv.S3AccessKey)
	os.Setenv("AWS_SECRET_ACCESS_KEY", testenv.S3SecretKey)
	return addr, cmd.Process.Pid, stop, nil
}
