package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/venuesim"
)

// The whole data directory on an S3 bucket prefix (a real versitygw):
// three runs, then status, schema, history and replay on the URL. The
// lake DuckDB reads from the server's directory equals the one a local
// replay of the bucket's raw archive builds (same snapshot_time, run_id,
// rows, events, rejects); a replay on the bucket changes nothing; no
// output and no object holds the secret key.
func TestLakeOnBucket(t *testing.T) {
	t.Parallel()
	g := testenv.StartVersityGW(t, "lake")
	g.SetCredentials(t)
	url := g.URL("lake", "hist")
	lake := filepath.Join(g.Dir(), "lake", "hist")
	sim, api := startSim(t, venuesim.Config{Seed: 8, Faults: venuesim.Faults{WrongTypes: true, IndexPriceVariants: true}})

	var outputs strings.Builder
	for i := 0; i < 3; i++ {
		if i > 0 {
			sim.Advance(1)
		}
		res := optlake(t, "run", "--api-url", api, "--data-dir", url)
		outputs.WriteString(res.stdout + res.stderr)
		if res.code != 0 {
			t.Fatalf("run %d on the bucket: exit %d\n%s%s", i, res.code, res.stdout, res.stderr)
		}
	}
	onBucket := lakeDigest(t, lake)
	if !strings.HasPrefix(onBucket, "instruments ") || strings.Contains(onBucket, "instruments 0/") {
		t.Fatalf("lake on the bucket: %s", onBucket)
	}
	names := files(t, lake, "instruments", "instrument_events", "rejects")
	if len(names) < 7 {
		t.Fatalf("files on the bucket: %v", names)
	}
	for _, dir := range []string{"raw", "_ledger", "_state"} {
		if _, err := os.Stat(filepath.Join(lake, dir)); err != nil {
			t.Errorf("the bucket prefix lacks %s/: %v", dir, err)
		}
	}

	// The same raw archive replayed into a local folder: the same lake.
	local := localReplay(t, lake, onBucket)

	// status: nothing pending; schema reads the bucket's registry.
	if s := statusJSON(t, url)["parquet"]; s.Pending != 0 || s.LastError != "" {
		t.Errorf("status on the bucket: %+v", s)
	}
	if res := optlake(t, "schema", "--data-dir", url); res.code != 0 || !strings.Contains(res.stdout, "instruments (") {
		t.Errorf("schema on the bucket: exit %d %s", res.code, res.stderr)
	}

	// history on the bucket equals history on the local replay.
	outputs.WriteString(sameHistory(t, sim, url, local))

	// Replay on the bucket itself, tables lost: rebuilt exactly.
	for _, d := range []string{"instruments", "instrument_events", "rejects", "_state"} {
		os.RemoveAll(filepath.Join(lake, d))
	}
	res := optlake(t, "replay", "--data-dir", url)
	outputs.WriteString(res.stdout + res.stderr)
	if res.code != 0 || !strings.Contains(res.stdout, "replayed 3 snapshots") {
		t.Fatalf("replay on the bucket: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if got := lakeDigest(t, lake); got != onBucket {
		t.Errorf("after a replay on the bucket: %s, before %s", got, onBucket)
	}

	// Replay writes one compacted object per table and day (runs keeps its
	// per-snapshot files); compact on the bucket (--to tomorrow: today
	// included) then has only runs to fold, and the lake stays the same; a
	// replay of compacted days and a second compact change nothing.
	tomorrow := time.Now().UTC().AddDate(0, 0, 1).Format(time.DateOnly)
	onlyCompacted := func(when string, tables ...string) {
		t.Helper()
		for _, tb := range tables {
			days, _ := filepath.Glob(filepath.Join(lake, tb, "date=*"))
			if len(days) == 0 {
				t.Errorf("%s: no partitions of %s", when, tb)
			}
			for _, d := range days {
				got, _ := filepath.Glob(filepath.Join(d, "*.parquet"))
				if len(got) != 1 || !strings.HasPrefix(filepath.Base(got[0]), "compacted-") {
					t.Errorf("%s: %s holds %v, want one compacted object", when, d, got)
				}
			}
		}
	}
	all := []string{"instruments", "instrument_events", "rejects", "runs"}
	onlyCompacted("after the replay", all[:3]...)
	res = optlake(t, "compact", "--data-dir", url, "--to", tomorrow)
	outputs.WriteString(res.stdout + res.stderr)
	if res.code != 0 || !strings.Contains(res.stdout, "runs: ") || strings.Contains(res.stdout, "instruments: ") {
		t.Fatalf("compact on the bucket: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	onlyCompacted("after compact", all...)
	if got := lakeDigest(t, lake); got != onBucket {
		t.Errorf("after compact on the bucket: %s, before %s", got, onBucket)
	}
	if res := optlake(t, "replay", "--data-dir", url); res.code != 0 {
		t.Fatalf("replay after compact: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	onlyCompacted("after a replay of compacted days", all...)
	if got := lakeDigest(t, lake); got != onBucket {
		t.Errorf("after a replay of compacted days: %s, before %s", got, onBucket)
	}
	if res := optlake(t, "compact", "--data-dir", url, "--to", tomorrow); res.code != 0 {
		t.Fatalf("second compact: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	onlyCompacted("after the second compact", all...)
	if got := lakeDigest(t, lake); got != onBucket {
		t.Errorf("after the second compact: %s, before %s", got, onBucket)
	}
	if left, _ := filepath.Glob(filepath.Join(lake, ".compact", "*", "*")); len(left) != 0 {
		t.Errorf("left in .compact/: %v", left)
	}

	// The secret key: in no output, in no object.
	if strings.Contains(outputs.String(), testenv.S3SecretKey) {
		t.Errorf("an output holds the secret key")
	}
	filepath.WalkDir(lake, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), testenv.S3SecretKey) {
				t.Errorf("object %s holds the secret key", p)
			}
		}
		return nil
	})
}

// One writer per bucket prefix: while a `run --every` process holds the
// lease a second run is refused (exit 4, naming the holder); after the
// holder is killed with -9 the prefix stays refused until the lease's TTL
// has passed, then a run takes it over. The holder's SIGTERM-free death
// leaves no partial object.
func TestLeaseOnBucket(t *testing.T) {
	t.Parallel()
	g := testenv.StartVersityGW(t, "lake")
	g.SetCredentials(t)
	url := g.URL("lake", "hist")
	lake := filepath.Join(g.Dir(), "lake", "hist")
	_, api := startSim(t, venuesim.Config{Seed: 3})
	// Renewed every ttl/3: a TTL of 6s leaves a busy machine (this test runs
	// beside others) 4s to renew before the lease could be taken.
	const ttl = 6 * time.Second

	cmd, _, errb := startCLI(t, "run", "--api-url", api, "--data-dir", url, "--every", "1s", "--lease-ttl", ttl.String())
	waitFor(t, "the first snapshot on the bucket", func() bool { return len(snapshotsOnDisk(lake)) >= 1 })
	second := optlake(t, "run", "--api-url", api, "--data-dir", url, "--lease-ttl", ttl.String())
	if second.code != exitLocked || !strings.Contains(lastLine(second.stderr), "s3://lake/hist is in use by another optlake process (pid ") {
		t.Fatalf("second process while the first lives: exit %d, %q", second.code, second.stderr)
	}
	// Renewed while the loop runs: still refused after more than a TTL.
	time.Sleep(ttl + ttl/2)
	if res := optlake(t, "run", "--api-url", api, "--data-dir", url, "--lease-ttl", ttl.String()); res.code != exitLocked {
		t.Fatalf("after %s of the loop: exit %d (the lease was not renewed?) %s", ttl+ttl/2, res.code, res.stderr)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	killed := time.Now()
	if res := optlake(t, "run", "--api-url", api, "--data-dir", url, "--lease-ttl", ttl.String()); res.code != exitLocked && time.Since(killed) < ttl/2 {
		t.Errorf("right after kill -9: exit %d, want 4 until the lease expires\n%s", res.code, res.stderr)
	}
	time.Sleep(time.Until(killed.Add(ttl + 500*time.Millisecond)))
	res := optlake(t, "run", "--api-url", api, "--data-dir", url, "--lease-ttl", ttl.String())
	if res.code != 0 {
		t.Fatalf("after the TTL: exit %d\n%s\nholder's log:\n%s", res.code, res.stderr, errb.String())
	}
	// Every Parquet object DuckDB finds is whole.
	n := len(snapshotsOnDisk(lake))
	if got := duckScalar(t, fmt.Sprintf("SELECT count(DISTINCT snapshot_time) FROM read_parquet('%s')", filepath.Join(lake, "instruments", "*", "*.parquet"))); got != fmt.Sprint(n) {
		t.Errorf("readable snapshots = %s, files %d", got, n)
	}
}

// `run --every` on a bucket prefix, stopped with SIGTERM: exit 0 after the
// snapshot in flight, every snapshot whole in the bucket (read by DuckDB
// from the server's directory), its events too, nothing pending in the load
// ledger (the snapshot in flight when the signal came is recorded as
// loaded), and the lease released at once (a run right after succeeds
// although the lease's TTL is a minute).
func TestEverySIGTERMOnBucket(t *testing.T) {
	t.Parallel()
	g := testenv.StartVersityGW(t, "lake")
	g.SetCredentials(t)
	url := g.URL("lake", "hist")
	lake := filepath.Join(g.Dir(), "lake", "hist")
	const instruments = 400
	_, api := startSim(t, venuesim.Config{Seed: 8, Instruments: instruments})
	cmd, out, errb := startCLI(t, "run", "--api-url", api, "--data-dir", url, "--every", "1s", "--lease-ttl", "1m")
	waitFor(t, "three snapshots on the bucket", func() bool { return len(snapshotsOnDisk(lake)) >= 3 })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := exitCode(cmd.Wait()); code != 0 {
		t.Fatalf("exit %d after SIGTERM\n%s", code, errb.String())
	}
	n := len(snapshotsOnDisk(lake))
	if strings.Count(out.String(), " ok in ") != n {
		t.Errorf("%d snapshots in the bucket, summary lines:\n%s", n, out.String())
	}
	glob := func(table string) string { return filepath.Join(lake, table, "*", "*.parquet") }
	if got := duckScalar(t, fmt.Sprintf("SELECT count(*) || '/' || count(DISTINCT snapshot_time) FROM read_parquet('%s')", glob("instruments"))); got != fmt.Sprintf("%d/%d", n*instruments, n) {
		t.Errorf("instruments rows/snapshots = %s, want %d/%d", got, n*instruments, n)
	}
	// The listing does not change (no ticks): the first snapshot lists
	// every instrument, the others have no events.
	if got := duckScalar(t, fmt.Sprintf("SELECT count(*) FILTER (WHERE initial AND event = 'listed') || '/' || count(*) FROM read_parquet('%s')", glob("instrument_events"))); got != fmt.Sprintf("%d/%d", instruments, instruments) {
		t.Errorf("instrument events (initial listed/all) = %s, want %d/%d", got, instruments, instruments)
	}
	if res := optlake(t, "status", "--data-dir", url); res.code != 0 || !strings.Contains(res.stdout, "nothing pending") {
		t.Errorf("status after the loop: exit %d\n%s%s", res.code, res.stdout, res.stderr)
		t.Logf("the loop's log:\n%s", errb.String())
	}
	if res := optlake(t, "run", "--api-url", api, "--data-dir", url, "--lease-ttl", "1m"); res.code != 0 {
		t.Errorf("run right after SIGTERM (the lease not released?): exit %d\n%s", res.code, res.stderr)
	}
}

// A bucket that does not answer: the run fails at once with one line
// naming the store (never a credential), exit non-zero.
func TestBucketUnreachable(t *testing.T) {
	t.Parallel()
	g := testenv.StartVersityGW(t, "lake")
	g.SetCredentials(t)
	url := g.URL("lake", "hist")
	g.Stop()
	_, api := startSim(t, venuesim.Config{Seed: 3})
	res := optlake(t, "run", "--api-url", api, "--data-dir", url, "--max-attempts", "1")
	line := lastLine(res.stderr)
	if res.code == 0 || !strings.Contains(line, "s3://lake/hist") || strings.Contains(res.stdout+res.stderr, testenv.S3SecretKey) {
		t.Errorf("run on a stopped server: exit %d, last line %q\n%s", res.code, line, res.stderr)
	}
}

// kill -9 while a large listing streams to the bucket: no object a reader
// could take for data (no Parquet file, no body with metadata); the next
// run, once the killed run's lease expired, aborts the incomplete multipart
// uploads under the prefix and loads everything. A scale test: make test
// runs it without -race.
func TestKill9MidUploadOnBucket(t *testing.T) {
	if raceEnabled {
		t.Skip("scale test: make test runs it without -race")
	}
	g := testenv.StartVersityGW(t, "lake")
	g.SetCredentials(t)
	url := g.URL("lake", "hist")
	lake := filepath.Join(g.Dir(), "lake", "hist")
	// 1,200,000 instruments: a ~20 MB compressed body; the upload's first
	// part is sent once two parts (16 MiB) are buffered.
	const n = 1_200_000
	sim := venuesim.New(venuesim.Config{Seed: 5, Instruments: n})
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()
	// versitygw keeps the parts of an upload in progress under the
	// bucket's .sgwtmp/multipart folder until it is completed or aborted.
	parts := func() int {
		k := 0
		filepath.WalkDir(filepath.Join(g.Dir(), "lake", ".sgwtmp", "multipart"), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				k++
			}
			return nil
		})
		return k
	}
	const ttl = 2 * time.Second // the killed run's lease keeps the prefix this long
	cmd, _, errb := startCLI(t, "run", "--api-url", srv.URL, "--data-dir", url, "--endpoints", "instruments", "--lease-ttl", ttl.String())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for deadline := time.Now().Add(60 * time.Second); parts() == 0; time.Sleep(5 * time.Millisecond) {
		select {
		case err := <-exited:
			t.Fatalf("the run ended (%v) before a part was uploaded:\n%s", err, errb.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no part of an upload in flight after 60s:\n%s", errb.String())
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	if f := snapshotsOnDisk(lake); len(f) != 0 {
		t.Fatalf("a killed run left visible Parquet objects: %v", f)
	}
	if metas, _ := filepath.Glob(filepath.Join(lake, "raw", "instruments", "*", "*.meta.json")); len(metas) != 0 {
		t.Fatalf("a cut-off body has metadata (would be taken as complete): %v", metas)
	}
	if parts() == 0 {
		t.Fatal("no incomplete upload left by the killed run")
	}
	time.Sleep(ttl)
	// A process of its own, as the killed run: in-process, the test
	// binary's heap would grow past the 256 MiB that the child of
	// TestMillionInstrumentsOnBucket is held to (a child's peak RSS counts
	// the test binary's, at its exec).
	res := optlakeProcess(t, nil, "run", "--api-url", srv.URL, "--data-dir", url, "--endpoints", "instruments", "--log-level", "info", "--lease-ttl", ttl.String())
	if res.code != 0 || !strings.Contains(res.stderr, "aborted the incomplete uploads of an interrupted run") {
		t.Fatalf("next run: exit %d\n%s", res.code, res.stderr)
	}
	if got := duckScalar(t, fmt.Sprintf("SELECT count(*) FROM read_parquet('%s')", filepath.Join(lake, "instruments", "*", "*.parquet"))); got != fmt.Sprint(n) {
		t.Errorf("rows after the next run = %s, want %d", got, n)
	}
	if k := parts(); k != 0 {
		t.Errorf("%d parts of incomplete uploads remain on the server", k)
	}
}

// A 1,000,000-instrument run into a bucket streams: the process's peak RSS
// stays within 256 MiB (issue 14), every row arrives. A scale test: make
// test runs it without -race.
func TestMillionInstrumentsOnBucket(t *testing.T) {
	if raceEnabled {
		t.Skip("scale test: make test runs it without -race")
	}
	g := testenv.StartVersityGW(t, "lake")
	g.SetCredentials(t)
	url := g.URL("lake", "hist")
	lake := filepath.Join(g.Dir(), "lake", "hist")
	const n = 1_000_000
	sim := venuesim.New(venuesim.Config{Seed: 6, Instruments: n})
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()
	cmd, _, errb := startCLI(t, "run", "--api-url", srv.URL, "--data-dir", url, "--endpoints", "instruments")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10 // KiB on Linux
	t.Logf("1,000,000 instruments to a bucket: peak RSS %d MiB", rss>>20)
	if rss > 256<<20 {
		t.Errorf("peak RSS %d MiB, want at most 256 MiB", rss>>20)
	}
	got := duckScalar(t, fmt.Sprintf("SELECT count(*) || '/' || count(DISTINCT instrument_name) FROM read_parquet('%s')", filepath.Join(lake, "instruments", "*", "*.parquet")))
	if got != fmt.Sprintf("%d/%d", n, n) {
		t.Errorf("rows/distinct = %s", got)
	}
}

// The S3 server stops while a run is fetching: the run fails with one line
// naming the store (never a credential); nothing partial is visible once
// the server is back; the ledger (written before the fetch) shows the
// snapshot pending; the next run succeeds.
func TestBucketStoppedMidRun(t *testing.T) {
	t.Parallel()
	g := testenv.StartVersityGW(t, "lake")
	g.SetCredentials(t)
	url := g.URL("lake", "hist")
	lake := filepath.Join(g.Dir(), "lake", "hist")
	sim := venuesim.New(venuesim.Config{Seed: 4, Instruments: 2000})
	h := sim.Handler()
	var stopped atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "get_instruments") && stopped.CompareAndSwap(false, true) {
			g.Stop() // the store goes away as the listing is served
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	const ttl = 2 * time.Second
	args := []string{"run", "--api-url", srv.URL, "--data-dir", url, "--endpoints", "instruments", "--lease-ttl", ttl.String()}
	res := optlake(t, args...)
	line := lastLine(res.stderr)
	if res.code == 0 || !strings.Contains(line, "s3://lake/hist") || strings.Contains(res.stdout+res.stderr, testenv.S3SecretKey) {
		t.Fatalf("run with the store stopped mid-run: exit %d, last line %q\n%s", res.code, line, res.stderr)
	}
	t.Logf("exit %d: %s", res.code, line)
	g.Restart(t)
	if f := snapshotsOnDisk(lake); len(f) != 0 {
		t.Errorf("Parquet objects of the failed run: %v", f)
	}
	if metas, _ := filepath.Glob(filepath.Join(lake, "raw", "instruments", "*", "*.meta.json")); len(metas) != 0 {
		t.Errorf("archived bodies of the failed run: %v", metas)
	}
	if s := statusJSON(t, url)["parquet"]; s.Pending != 1 {
		t.Errorf("status after the failed run: %+v, want its snapshot pending", s)
	}
	time.Sleep(ttl) // the failed run could not delete its lease
	res = optlake(t, args...)
	if res.code != 0 && res.code != exitPartial {
		t.Fatalf("next run: exit %d\n%s", res.code, res.stderr)
	}
	if got := duckScalar(t, fmt.Sprintf("SELECT count(*) || '/' || count(DISTINCT snapshot_time) FROM read_parquet('%s')", filepath.Join(lake, "instruments", "*", "*.parquet"))); got != "2000/1" {
		t.Errorf("rows/snapshots after the next run = %s, want 2000/1", got)
	}
}

// sameHistory checks that `history` of the simulator's first named
// instrument prints the same on the data directory url as on local, a
// replay of its archive, and returns what it printed on url.
func sameHistory(t *testing.T, sim *venuesim.Sim, url, local string) string {
	t.Helper()
	inst := ""
	for _, in := range sim.Instruments() {
		if in.InstrumentName != "" {
			inst = in.InstrumentName
			break
		}
	}
	hb := optlake(t, "history", "--data-dir", url, "--format", "csv", inst)
	hl := optlake(t, "history", "--data-dir", local, "--format", "csv", inst)
	if hb.code != 0 || hl.code != 0 || hb.stdout != hl.stdout || strings.Count(hb.stdout, "\n") < 2 {
		t.Errorf("history of %s on %s (exit %d):\n%s%s\nlocal (exit %d):\n%s", inst, url, hb.code, hb.stdout, hb.stderr, hl.code, hl.stdout)
	}
	return hb.stdout + hb.stderr
}
