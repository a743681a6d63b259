package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/pipeline/archive"
	pq "github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/venuesim"
)

// rawMetas returns the archive's metadata for an endpoint.
func rawMetas(t *testing.T, dir, ep string) []archive.Meta {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "raw", ep, "*", "*.meta.json"))
	var out []archive.Meta
	for _, p := range paths {
		m, err := archive.ReadMeta(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// The fault matrix: each fault, the exit code, the one-line reason, and
// what the archive and the lake hold afterwards (docs/RELIABILITY.md).
func TestFaultMatrix(t *testing.T) {
	t.Parallel()
	listing := func(n int) string {
		var b strings.Builder
		sim := venuesim.New(venuesim.Config{Seed: 1, Instruments: n})
		sim.WriteInstruments(&b)
		return b.String()
	}
	small := listing(50)
	var resets atomic.Int32
	cases := []struct {
		name    string
		handler http.HandlerFunc
		args    []string
		code    int
		reason  string // in the last stderr line
		rows    int    // instrument rows in the lake afterwards (-1: no file)
		raw     int    // archived bodies with metadata
		rawOK   bool   // the last archived body is complete
	}{
		{
			name: "connection reset mid-body, then ok",
			handler: func(w http.ResponseWriter, r *http.Request) {
				if resets.Add(1) == 1 {
					w.Header().Set("Content-Length", strconv.Itoa(len(small)))
					w.WriteHeader(200)
					io.WriteString(w, small[:len(small)/2])
					w.(http.Flusher).Flush()
					conn, _, _ := w.(http.Hijacker).Hijack()
					conn.(*net.TCPConn).SetLinger(0) // RST, not FIN
					conn.Close()
					return
				}
				io.WriteString(w, small)
			},
			code: 0, rows: 50, raw: 2, rawOK: true,
		},
		{
			name:    "wrong top-level shape",
			handler: func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"instruments":[]}`) },
			code:    exitFailure, reason: "instruments: decode listing: listing is a JSON object, expected an array", rows: -1, raw: 1, rawOK: true,
		},
		{
			name:    "empty listing",
			handler: func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `[]`) },
			code:    0, rows: 0, raw: 1, rawOK: true,
		},
		{
			name: "per-request timeout",
			handler: func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
			},
			args: []string{"--timeout", "300ms", "--max-attempts", "2"},
			code: exitFailure, reason: "instruments: no response within 300ms", rows: -1, raw: 0,
		},
		{
			name: "body over the size limit",
			handler: func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, small)
			},
			args: []string{"--max-body-size", "1000"},
			code: exitFailure, reason: "response body exceeds the size limit", rows: -1, raw: 1, rawOK: false,
		},
		{
			name: "401 is not retried",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(401)
				io.WriteString(w, `{"error":"bad key"}`)
			},
			code: exitFailure, reason: `instruments: HTTP 401 Unauthorized: {"error":"bad key"}`, rows: -1, raw: 1, rawOK: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			dir := t.TempDir()
			res := optlake(t, append([]string{"run", "--api-url", srv.URL, "--data-dir", dir, "--endpoints", "instruments"}, tc.args...)...)
			last := lastLine(res.stderr)
			if res.code != tc.code || (tc.reason != "" && !strings.Contains(last, tc.reason)) {
				t.Fatalf("exit %d, last line %q; want %d and %q", res.code, last, tc.code, tc.reason)
			}
			if tc.code != 0 && strings.Count(strings.TrimSpace(res.stderr), "optlake: ") != 1 {
				t.Errorf("want one reason line, got:\n%s", res.stderr)
			}
			files := snapshotsOnDisk(dir)
			if tc.rows < 0 && len(files) != 0 {
				t.Errorf("files written: %v", files)
			}
			if tc.rows >= 0 {
				if got := duckScalar(t, fmt.Sprintf("SELECT count(*) FROM read_parquet('%s')", filepath.Join(dir, "instruments", "*", "*.parquet"))); got != strconv.Itoa(tc.rows) {
					t.Errorf("rows = %s, want %d", got, tc.rows)
				}
			}
			metas := rawMetas(t, dir, "instruments")
			if len(metas) != tc.raw {
				t.Fatalf("archived %d bodies, want %d", len(metas), tc.raw)
			}
			if tc.raw > 0 {
				lastMeta := metas[len(metas)-1]
				if lastMeta.Complete != tc.rawOK {
					t.Errorf("last archived body: %+v", lastMeta)
				}
			}
		})
	}
}

// The data directory cannot be written: the sink fails, the raw archive is
// still complete, the exit code and reason say so.
func TestParquetDirNotWritable(t *testing.T) {
	t.Parallel()
	_, url := startSim(t, venuesim.Config{Seed: 1})
	dir := t.TempDir()
	// A file where the table's folder should be (root ignores permissions).
	if err := os.WriteFile(filepath.Join(dir, "instruments"), []byte("in the way"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := optlake(t, "run", "--api-url", url, "--data-dir", dir, "--endpoints", "instruments")
	last := lastLine(res.stderr)
	// Partial: fetched and archived, the load pending in the ledger.
	if res.code != exitPartial || !strings.Contains(last, "instruments: parquet: ") || !strings.Contains(last, "not a directory") {
		t.Fatalf("exit %d, %q", res.code, last)
	}
	if m := rawMetas(t, dir, "instruments"); len(m) != 1 || !m[0].Complete {
		t.Errorf("raw archive: %+v", m)
	}
}

// A listing of 1,000,000 instruments streams through in bounded batches.
func TestMillionInstruments(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	if raceEnabled {
		t.Skip("scale test: make test runs it without -race (go test -run TestMillionInstruments ./cmd/optlake/)")
	}
	sim := venuesim.New(venuesim.Config{Seed: 6, Instruments: 1_000_000})
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()
	dir := t.TempDir()
	res := optlake(t, "run", "--api-url", srv.URL, "--data-dir", dir, "--endpoints", "instruments")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	got := duckScalar(t, fmt.Sprintf("SELECT count(*) || '/' || count(DISTINCT instrument_name) FROM read_parquet('%s')", filepath.Join(dir, "instruments", "*", "*.parquet")))
	if got != "1000000/1000000" {
		t.Errorf("rows/distinct = %s", got)
	}
}

// ClickHouse killed in the middle of inserting a large snapshot: the run
// fails naming ClickHouse, Parquet and the archive are whole; after a
// restart, replay gives exact counts. The server is killed at a known point
// of the insert, not by timing: a proxy in front of it kills it once the
// run has sent 256 KiB, well short of the snapshot's rows (20,000 rows are
// about 0.6 MB on the wire; the insert is cut before half of them). (It
// was 60,000 rows and 1 MiB: three times the work under -race for the
// same proof.)
func TestClickHouseKilledMidInsert(t *testing.T) {
	t.Parallel()
	c := testenv.NewClickHouse(t)
	if res := optlake(t, "migrate", "--clickhouse-dsn", c.DSN("optlake")); res.code != 0 {
		t.Fatal(res.stderr)
	}
	const n = 20_000
	sim := venuesim.New(venuesim.Config{Seed: 7, Instruments: n})
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()
	dir := t.TempDir()
	ctx := context.Background()
	proxy := testenv.NewProxy(t, c.Addr())
	var killed atomic.Bool
	proxy.AfterUpstream(256<<10, func() { killed.Store(c.Kill() == nil) })
	res := optlake(t, "run", "--api-url", srv.URL, "--data-dir", dir, "--endpoints", "instruments", "--batch-rows", "2000",
		"--sink", "parquet", "--sink", "clickhouse", "--clickhouse-dsn", "clickhouse://default@"+proxy.Addr()+"/optlake")
	if !killed.Load() {
		t.Fatalf("the run sent %d bytes to ClickHouse and the server was not killed: the test proves nothing", proxy.Upstream())
	}
	last := lastLine(res.stderr)
	// Partial: fetched, archived and in Parquet; ClickHouse's load pending.
	if res.code != exitPartial || !strings.Contains(last, "clickhouse") {
		t.Fatalf("exit %d, %q", res.code, last)
	}
	if got := duckScalar(t, fmt.Sprintf("SELECT count(*) FROM read_parquet('%s')", filepath.Join(dir, "instruments", "*", "*.parquet"))); got != fmt.Sprint(n) {
		t.Errorf("parquet rows = %s", got)
	}
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if got := chQuery(t, c, "optlake", "SELECT count() FROM instruments FINAL"); got == fmt.Sprint(n) {
		t.Fatalf("ClickHouse held the whole snapshot before the replay: the kill was not mid-insert")
	}
	res = optlake(t, "replay", "--data-dir", dir, "--sink", "clickhouse", "--clickhouse-dsn", c.DSN("optlake"))
	if res.code != 0 {
		t.Fatalf("replay: %s %s", res.stdout, res.stderr)
	}
	if got := chQuery(t, c, "optlake", "SELECT count() FROM instruments FINAL"); got != fmt.Sprint(n) {
		t.Errorf("clickhouse rows after replay = %s, want %d", got, n)
	}
	// The replay by hand settled the load in the ledger.
	if st := statusJSON(t, dir)["clickhouse"]; st.Pending != 0 {
		t.Errorf("status after the replay: %+v", st)
	}
}

// A full disk (a 16 MiB tmpfs filled to leave 0–104 KiB) at every level:
// `run` and `compact` exit 1 or 3 with one line naming ENOSPC, never
// panic (arrow-go panics when it cannot write a file's first bytes; an
// escaped panic exits 2, the code of a bad flag), and leave no temporary
// or staged file. Once space is freed the next run succeeds with every
// snapshot loaded, and the next compact leaves the past day compacted.
// Needs mount (root); the injected full disks of TestFullDiskIsAnError
// (sinks/parquet) and TestCompactFullDiskIsAnError (sinks/parquet/compact)
// cover the same code everywhere.
//
// The compaction once space is freed runs at one level for each way the
// failed compact left the data directory (the tables and the folders of
// .compact/ whose files it changed: at most levels none, at some it
// compacted runs before the disk was full): levels that the failed compact
// left alike hand the next compact the same files, and compacting them
// again at every level (2–3 s each under -race) proved nothing more.
func TestFullDisk(t *testing.T) {
	t.Parallel()
	// One listing for every level; a first snapshot on a past day (the
	// clock pinned), for compact, taken once: each level starts from a
	// copy of it (a run of its own per level cost minutes under -race).
	_, url := startSim(t, venuesim.Config{Seed: 3, Instruments: 3000})
	first := filepath.Join(t.TempDir(), "data")
	if res := pinClock(time.Date(2026, 11, 20, 23, 50, 0, 0, time.UTC)).optlake(t, "run", "--api-url", url, "--data-dir", first, "--endpoints", "instruments"); res.code != 0 {
		t.Fatalf("first run: %s", res.stderr)
	}
	const top = 104 << 10
	// The levels' data directories, kept mounted until every level's lake
	// is read, by one DuckDB process (a process per level before).
	root := t.TempDir()
	var frees []int64
	mnts, dirs := map[int64]string{}, map[string]string{}
	for free := int64(0); free <= top; free += 8 << 10 {
		name := fmt.Sprintf("%dKiB", free>>10)
		mnt := filepath.Join(root, name)
		if err := os.Mkdir(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", mnt).CombinedOutput(); err != nil {
			t.Skipf("cannot mount a tmpfs (%v: %s)", err, out)
		}
		t.Cleanup(func() { exec.Command("umount", mnt).Run() })
		frees = append(frees, free)
		mnts[free], dirs[name] = mnt, filepath.Join(mnt, "data")
	}
	var mu sync.Mutex
	recovered := map[string]string{} // what the failed compact changed -> the level compacting after it
	t.Run("levels", func(t *testing.T) {
		for _, free := range frees {
			name := fmt.Sprintf("%dKiB", free>>10)
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				fullDiskLevel(t, url, first, mnts[free], free, func(changed string) bool {
					mu.Lock()
					defer mu.Unlock()
					if _, ok := recovered[changed]; ok {
						return false
					}
					recovered[changed] = name
					return true
				})
			})
		}
	})
	t.Logf("compacted once space was freed, per what the failed compact changed: %v", recovered)
	lakes := lakesCounts(t, "instruments", "instrument_name", dirs)
	for name, dir := range dirs {
		for _, m := range rawMetas(t, dir, "instruments") {
			if !slices.Contains(lakes[name], fmt.Sprintf("%d:3000", m.SnapshotTime.UnixMilli())) {
				t.Errorf("%s free, then freed: archived snapshot %s not in the lake whole: %v", name, m.SnapshotTime, lakes[name])
			}
		}
	}
}

// fullDiskLevel is one level of TestFullDisk: a copy of first on the
// tmpfs mnt with free bytes left, a run and a compact, then space freed
// and a run, with --compact when compactOnce says so for what the failed
// compact changed (the first level to leave the data directory so).
func fullDiskLevel(t *testing.T, url, first, mnt string, free int64, compactOnce func(changed string) bool) {
	clk := pinClock(time.Now())
	dir := filepath.Join(mnt, "data")
	if out, err := exec.Command("cp", "-a", first, dir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	run := []string{"run", "--api-url", url, "--data-dir", dir, "--endpoints", "instruments"}
	filler := fill(t, mnt, free)
	// The child processes take their snapshot now (their clock is
	// not pinned) and compact the past day.
	var before map[string]string // the data directory before the compact
	changed, runCode := "", 0
	for _, args := range [][]string{run, {"compact", "--data-dir", dir}} {
		if args[0] == "compact" {
			before = treeDigest(t, dir)
		}
		cmd, _, stderr := startCLI(t, args...)
		code := exitCode(cmd.Wait())
		last := lastLine(stderr.String())
		if code == exitUsage || strings.Contains(stderr.String(), "panic") {
			t.Fatalf("%d KiB free: %s: exit %d\n%s", free>>10, args[0], code, stderr)
		}
		if code != 0 && !strings.Contains(last, "ENOSPC") {
			t.Errorf("%d KiB free: %s: exit %d, %q does not name ENOSPC", free>>10, args[0], code, last)
		}
		t.Logf("%d KiB free: %s: exit %d %s", free>>10, args[0], code, last)
		if left := halfWritten(t, dir); len(left) > 0 {
			t.Errorf("%d KiB free: %s left %v", free>>10, args[0], left)
		}
		if args[0] == "run" {
			runCode = code
		} else {
			changed = changedFolders(before, treeDigest(t, dir))
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	// After the child's snapshot (real time), so never older than
	// the events state.
	clk.set(time.Now().UTC().Add(time.Hour))
	// What the failed run left for the next one (nothing archived, a
	// snapshot pending, changes whose state was not saved) is done in the
	// process that compacts: a way of its own to reach the compaction.
	changed = fmt.Sprintf("%s; run exit %d, %d pending", changed, runCode, statusJSON(t, dir)["parquet"].Pending)
	compact := compactOnce(changed)
	t.Logf("%d KiB free: the failed compact changed %q; compact once freed: %t", free>>10, changed, compact)
	if compact {
		run = append(run, "--compact")
	}
	res := clk.optlake(t, run...)
	if res.code != 0 {
		t.Fatalf("%d KiB free, then freed: exit %d: %s", free>>10, res.code, res.stderr)
	}
	if compact {
		day := 0
		for _, tb := range []string{"instruments", "instrument_events", "runs"} {
			ents, _ := os.ReadDir(filepath.Join(dir, tb, "date=2026-11-20"))
			for _, e := range ents {
				if day++; !pq.IsCompacted(e.Name()) {
					t.Errorf("%d KiB free, then freed: %s/date=2026-11-20/%s not compacted:\n%s", free>>10, tb, e.Name(), res.stdout)
				}
			}
		}
		if day != 3 {
			t.Errorf("%d KiB free, then freed: %d files on the past day, want 3 compacted:\n%s", free>>10, day, res.stdout)
		}
	}
	// A body whose metadata could not be written is failed for good
	// (listed by status); its rows may be in the lake already.
	if st := statusJSON(t, dir); st["parquet"].Pending != 0 {
		t.Errorf("%d KiB free, then freed: status %+v", free>>10, st)
	}
}

// changedFolders names the folders whose files differ between two
// treeDigests: a table (its first path element) or a folder of .compact/
// (its first two), sorted, space-separated.
func changedFolders(before, after map[string]string) string {
	set := map[string]bool{}
	for _, m := range []map[string]string{before, after} {
		for p := range m {
			if before[p] == after[p] {
				continue
			}
			parts := strings.SplitN(filepath.ToSlash(p), "/", 3)
			if parts[0] == ".compact" && len(parts) > 1 {
				parts[0] += "/" + parts[1]
			}
			set[parts[0]] = true
		}
	}
	return strings.Join(slices.Sorted(maps.Keys(set)), " ")
}

// treeDigest is every file under dir (its path relative to dir) with the
// sha256 of its bytes.
func treeDigest(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = fmt.Sprintf("%x", sha256.Sum256(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fill writes a file into mnt that leaves free bytes free.
func fill(t *testing.T, mnt string, free int64) string {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	avail := int64(st.Bavail) * st.Bsize
	name := filepath.Join(mnt, "filler")
	if err := os.WriteFile(name, make([]byte, max(avail-free, 0)), 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

// halfWritten lists temporary and staged files under dir.
func halfWritten(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.Contains(d.Name(), ".tmp-") || strings.Contains(p, "/.compact/stage/")) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// lakeBySnapshot is, per snapshot, the rows of instruments and the
// events (count and hash) of instrument_events: what a replay must give
// the same way every time.
func lakeBySnapshot(t *testing.T, dir string) string {
	t.Helper()
	// One DuckDB process reads both tables (a process per table doubled
	// the replay tests' DuckDB start-ups).
	return duckScalar(t, fmt.Sprintf(`SELECT 'instruments ' || coalesce((SELECT string_agg(s, ' ' ORDER BY s) FROM (SELECT epoch_ms(snapshot_time) || ':' || count(*) || '/' || sum(hash(instrument_name, index_price, is_active)) AS s
		FROM read_parquet('%s') GROUP BY snapshot_time)), '<nil>') || chr(10) || 'events ' || coalesce((SELECT string_agg(s, ' ' ORDER BY s) FROM (SELECT epoch_ms(snapshot_time) || ':' || count(*) || '/' || sum(hash(instrument_name, event, field, old_value, new_value, previous_snapshot_time, initial)) AS s
		FROM read_parquet('%s') GROUP BY snapshot_time)), '<nil>')`, filepath.Join(dir, "instruments", "*", "*.parquet"), filepath.Join(dir, "instrument_events", "*", "*.parquet")))
}

// tenSnapshots runs ten snapshots of a moving 3,000-instrument listing
// into a new data directory and returns it and the bodies, in order, and
// the clock, a minute after the last snapshot.
func tenSnapshots(t *testing.T) (string, []string, *testClock) {
	t.Helper()
	clk := pinClock(time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC))
	sim, url := startSim(t, venuesim.Config{Seed: 11, Instruments: 3000})
	dir := t.TempDir()
	for i := range 10 {
		if res := clk.optlake(t, "run", "--api-url", url, "--data-dir", dir, "--endpoints", "instruments"); res.code != 0 {
			t.Fatalf("run %d: %s", i, res.stderr)
		}
		sim.Advance(1)
		clk.next()
	}
	bodies, _ := filepath.Glob(filepath.Join(dir, "raw", "instruments", "*", "*.json.zst"))
	if len(bodies) != 10 {
		t.Fatalf("bodies: %v", bodies)
	}
	return dir, bodies, clk
}

// badBody spoils an archived body one of four ways: its metadata
// deleted, the body deleted (its metadata kept), the body cut in half, one
// byte flipped.
var badBody = map[string]func(t *testing.T, body string){
	"body deleted": func(t *testing.T, body string) {
		if err := os.Remove(body); err != nil {
			t.Fatal(err)
		}
	},
	"meta deleted": func(t *testing.T, body string) {
		if err := os.Remove(strings.TrimSuffix(body, ".json.zst") + ".meta.json"); err != nil {
			t.Fatal(err)
		}
	},
	"body truncated": func(t *testing.T, body string) {
		fi, _ := os.Stat(body)
		if err := os.Truncate(body, fi.Size()/2); err != nil {
			t.Fatal(err)
		}
	},
	"byte flipped": func(t *testing.T, body string) {
		b, err := os.ReadFile(body)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0x40
		if err := os.WriteFile(body, b, 0o644); err != nil {
			t.Fatal(err)
		}
	},
}

// A snapshot among ten whose body cannot be read waits for its turn in
// the events order and hands it on: with four snapshots replayed at once,
// every repetition gives the other nine snapshots the same rows and the
// same events (the one after the bad one compared with the one before
// it), replay exits 3 naming the file. (It used to hand its turn on at
// once: the next snapshot compared with a state still being written, and
// a replay could panic or give wrong events.) Each replay is a process of
// its own, with its GOMAXPROCS: 1 for the reference, 4 for the others.
func TestReplayBadSnapshotWaitsItsTurn(t *testing.T) {
	t.Parallel()
	clean, bodies, clk := tenSnapshots(t)
	for kind, spoil := range badBody {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			var want string
			for rep := range 4 {
				dir := t.TempDir()
				if err := os.CopyFS(dir, os.DirFS(clean)); err != nil {
					t.Fatal(err)
				}
				bad := filepath.Join(dir, strings.TrimPrefix(bodies[4], clean))
				spoil(t, bad)
				for _, d := range []string{"instruments", "instrument_events", "_state"} {
					os.RemoveAll(filepath.Join(dir, d))
				}
				if rep == 0 {
					// The reference: one snapshot at a time.
					res := optlakeProcess(t, []string{"GOMAXPROCS=1", clk.env()}, "replay", "--data-dir", dir)
					if res.code != exitPartial || !strings.Contains(res.stdout, strings.TrimSuffix(filepath.Base(bad), ".json.zst")) {
						t.Fatalf("replay: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
					}
					want = lakeBySnapshot(t, dir)
					if n := strings.Count(want, ":"); n != 17 {
						t.Fatalf("reference lake: %d snapshot groups, want 9 + 8 (the snapshot after the bad one only seeds the events):\n%s", n, want)
					}
					continue
				}
				res := optlakeProcess(t, []string{"GOMAXPROCS=4", clk.env()}, "replay", "--data-dir", dir)
				if res.code != exitPartial || !strings.Contains(res.stdout, strings.TrimSuffix(filepath.Base(bad), ".json.zst")) {
					t.Fatalf("repetition %d: exit %d\n%s\n%s", rep, res.code, res.stdout, res.stderr)
				}
				if got := lakeBySnapshot(t, dir); got != want {
					t.Fatalf("repetition %d differs:\n got %s\nwant %s", rep, got, want)
				}
			}
		})
	}
}

// Replay over an existing lake (tables kept) with one snapshot's body
// unreadable: the snapshot after it is not compared with the one before it
// (that would report the bad snapshot's changes a second time, beside its
// events of the original run); its events, and everyone else's, stay
// exactly as the original run wrote them: no event twice, none missing.
func TestReplayOverLakeAroundBadSnapshot(t *testing.T) {
	t.Parallel()
	clean, bodies, clk := tenSnapshots(t)
	for _, kind := range []string{"meta deleted", "byte flipped"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(clean)); err != nil {
				t.Fatal(err)
			}
			before := lakeBySnapshot(t, dir)
			badBody[kind](t, filepath.Join(dir, strings.TrimPrefix(bodies[4], clean)))
			res := clk.optlake(t, "replay", "--data-dir", dir)
			if res.code != exitPartial {
				t.Fatalf("replay: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
			}
			twice := duckScalar(t, fmt.Sprintf(`SELECT count(*) FROM (SELECT instrument_name, event, field, new_value, previous_snapshot_time FROM read_parquet('%s')
				GROUP BY ALL HAVING count(*) > 1)`, filepath.Join(dir, "instrument_events", "*", "*.parquet")))
			if twice != "0" {
				t.Errorf("%s events are there twice", twice)
			}
			if got := lakeBySnapshot(t, dir); got != before {
				t.Errorf("the lake changed:\n got %s\nwant %s", got, before)
			}
		})
	}
}
