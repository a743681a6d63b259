package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/testenv"
)

func TestLockExcludesAndReleases(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(dir)
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "pid ") {
		t.Fatalf("second acquire: %v", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := Acquire(dir)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	l2.Release()
}

// A process killed with -9 while holding the lock does not leave it held.
func TestLockDiesWithProcess(t *testing.T) {
	dir := t.TempDir()
	// One process holding the lock (sh becomes sleep, keeping fd 9).
	cmd := exec.Command("sh", "-c", `exec 9>"$1"; flock -x 9; exec sleep 60`, "sh", filepath.Join(dir, LockFile))
	testenv.Command(t, "apt-get install util-linux", "flock")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 500; i++ { // wait until the child holds it
		l, err := Acquire(dir)
		if errors.Is(err, ErrLocked) {
			break
		}
		if err == nil {
			l.Release()
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := Acquire(dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("lock held by a child process not seen: %v", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	l, err := Acquire(dir)
	if err != nil {
		t.Fatalf("after kill -9: %v", err)
	}
	l.Release()
}

func TestCleanTemp(t *testing.T) {
	dir := t.TempDir()
	files := map[string]bool{
		"instruments/date=2026-11-22/.a.parquet.tmp-123":    false,
		"raw/instruments/date=2026-11-22/.b.json.zst.tmp-9": false,
		"instruments/date=2026-11-22/a.parquet":             true,
		".optlake.lock":                                     true,
		"tmp-not-hidden.parquet":                            true,
	}
	writeFiles(dir, files)
	n, err := CleanTemp(dir, Sweep{})
	if err != nil || n != 2 {
		t.Fatalf("removed %d, %v", n, err)
	}
	for f, keep := range files {
		_, err := os.Stat(filepath.Join(dir, f))
		if (err == nil) != keep {
			t.Errorf("%s: exists=%v, want %v", f, err == nil, keep)
		}
	}
}

// CleanTemp since a day leaves the partitions of days before since unwalked and
// cleans everything else: newer partitions, folders that are not
// partitions, names that only look like partitions.
func TestCleanTempSinceADay(t *testing.T) {
	dir := t.TempDir()
	files := map[string]bool{ // name: removed
		"instruments/date=2026-11-20/.a.parquet.tmp-1":      false,
		"raw/instruments/date=2026-11-23/.b.json.zst.tmp-2": false,
		"instruments/date=2026-11-24/.c.parquet.tmp-3":      true,
		"runs/date=2026-11-25/.d.parquet.tmp-4":             true,
		"_state/instrument_events/.e.state.zst.tmp-5":       true,
		"x/date=not-a-day/.f.tmp-6":                         true,
		".g.tmp-7":                                          true,
		"instruments/date=2026-11-20/a.parquet":             false,
	}
	writeFiles(dir, files)
	n, err := CleanTemp(dir, Sweep{Since: time.Date(2026, 11, 24, 7, 0, 0, 0, time.UTC)})
	if err != nil || n != 5 {
		t.Fatalf("removed %d, %v; want 5", n, err)
	}
	for f, removed := range files {
		_, err := os.Stat(filepath.Join(dir, f))
		if (err != nil) != removed {
			t.Errorf("%s: removed=%v, want %v", f, err != nil, removed)
		}
	}
	if n, err := CleanTemp(dir, Sweep{}); err != nil || n != 2 {
		t.Fatalf("CleanTemp removed %d (%v), want the 2 in the old partitions", n, err)
	}
}

func TestCreateTempIsReadableByOthers(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := t.TempDir()
	seen := map[string]bool{}
	for range 50 {
		f, err := CreateTemp(dir, ".x.parquet.tmp-*")
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		name := filepath.Base(f.Name())
		if seen[name] || !strings.HasPrefix(name, ".x.parquet.tmp-") {
			t.Fatalf("temp name %q (seen before: %v)", name, seen[name])
		}
		seen[name] = true
		st, err := os.Stat(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o644 {
			t.Fatalf("mode %v, want 0644", st.Mode().Perm())
		}
	}
	if n, err := CleanTemp(dir, Sweep{}); err != nil || n != 50 {
		t.Fatalf("CleanTemp removed %d (%v), want every temp file CreateTemp made", n, err)
	}
}

// WriteFile and Publish replace a file whole: the new bytes at the name,
// mode 0644 (less the umask), no temporary file left; a Publish that
// cannot rename leaves the old file and removes its temporary one.
func TestWriteFileAndPublish(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "state.json")
	for _, data := range []string{"first", "second, longer"} {
		if err := WriteFile(path, []byte(data)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != data {
			t.Fatalf("read %q %v, want %q", got, err, data)
		}
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm()&0o044 == 0 {
		t.Fatalf("mode %v %v: not readable by others", fi.Mode(), err)
	}
	f, err := TempFor(path)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("third")
	if err := Publish(f, filepath.Join(dir, "missing-folder", "x")); err == nil {
		t.Fatal("Publish into a missing folder succeeded")
	}
	f.Close()
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 || ents[0].Name() != "state.json" {
		t.Fatalf("left in the folder: %v", ents)
	}
	if got, _ := os.ReadFile(path); string(got) != "second, longer" {
		t.Fatalf("old file changed: %q", got)
	}
}

// countingFS counts the folders a walk reads and the names it stats.
type countingFS struct {
	fs.FS
	reads, stats []string
}

func (c *countingFS) Stat(name string) (fs.FileInfo, error) {
	c.stats = append(c.stats, name)
	return fs.Stat(c.FS, name)
}

func (c *countingFS) ReadDir(name string) ([]fs.DirEntry, error) {
	c.reads = append(c.reads, name)
	return fs.ReadDir(c.FS, name)
}

// A daily sweep of a lake with a long history reads only the partitions
// that changed since the last one, and never the folders it is told to
// skip (compaction's trash): a folder read per table, per changed
// partition, not per partition of the history.
func TestCleanTempReadsOnlyWhatChanged(t *testing.T) {
	dir := t.TempDir()
	last := time.Now().Add(-time.Hour)
	old := last.Add(-24 * time.Hour)
	day := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var partitions []string
	for d := range 60 {
		for _, tb := range []string{"instruments", "raw/instruments", "_ledger/done"} {
			p := filepath.Join(dir, tb, "date="+day.AddDate(0, 0, d).Format(time.DateOnly))
			partitions = append(partitions, p)
			os.MkdirAll(p, 0o755)
			os.WriteFile(filepath.Join(p, "f"), []byte("x"), 0o644)
		}
	}
	for d := range 30 { // the trash of 30 compactions
		p := filepath.Join(dir, ".compact/trash", fmt.Sprintf("20260301T0000%02dZ-id", d), "instruments", "date=2026-01-01")
		os.MkdirAll(p, 0o755)
		os.WriteFile(filepath.Join(p, ".x.parquet.tmp-1"), []byte("x"), 0o644)
	}
	for _, p := range partitions {
		os.Chtimes(p, old, old)
	}
	// A crash since the last sweep left a temp file in one old partition.
	changed := filepath.Join(dir, "instruments/date=2026-01-05")
	os.WriteFile(filepath.Join(changed, ".a.parquet.tmp-1"), []byte("x"), 0o644)

	c := &countingFS{FS: os.DirFS(dir)}
	rep, err := cleanTemp(c, dir, Sweep{Unchanged: last, Skip: []string{".compact/trash"}})
	if n := rep.Removed; err != nil || n != 1 {
		t.Fatalf("removed %d (%v), want the 1 temp file in a changed partition", rep.Removed, err)
	}
	for _, r := range c.reads {
		if strings.HasPrefix(r, ".compact/trash/") {
			t.Errorf("read %s in the trash", r)
		}
		if strings.Contains(r, "date=") && r != "instruments/date=2026-01-05" {
			t.Errorf("read the unchanged partition %s", r)
		}
	}
	// root, instruments, raw, raw/instruments, _ledger, _ledger/done,
	// .compact, the changed partition.
	if len(c.reads) > 8 {
		t.Errorf("%d folders read: %v", len(c.reads), c.reads)
	}
	// Without Unchanged every partition is read (the first sweep).
	c.reads = nil
	if _, err := cleanTemp(c, dir, Sweep{Skip: []string{".compact/trash"}}); err != nil {
		t.Fatal(err)
	}
	if len(c.reads) < len(partitions) {
		t.Errorf("a full sweep read %d folders, want every one of the %d partitions", len(c.reads), len(partitions))
	}
}

// Between the daily sweeps, a start reads no table's list of day folders:
// the folders the last full sweep found holding day folders only are
// looked into for today's and yesterday's folder alone (a stat each), so a
// start costs the same on day 365 as on day 1. A temp file there is
// removed; one in an older day waits for the next full sweep.
func TestCleanTempBetweenSweepsReadsNoListOfDays(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, days := range []int{30, 365} {
		dir := t.TempDir()
		tables := []string{"instruments", "raw/instruments", "_ledger/done"}
		for d := range days {
			for _, tb := range tables {
				p := filepath.Join(dir, tb, "date="+now.AddDate(0, 0, -d).Format(time.DateOnly))
				os.MkdirAll(p, 0o755)
				os.WriteFile(filepath.Join(p, "f"), []byte("x"), 0o644)
			}
		}
		os.MkdirAll(filepath.Join(dir, "_state"), 0o755)
		full, err := cleanTemp(os.DirFS(dir), dir, Sweep{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(full.Partitioned, []string{"_ledger/done", "instruments", "raw/instruments"}) {
			t.Fatalf("%d days: partitioned folders %v", days, full.Partitioned)
		}
		temps := map[string]bool{ // name: removed now
			"instruments/date=2026-03-01/.a.parquet.tmp-1":       true,
			"raw/instruments/date=2026-02-28/.b.json.zst.tmp-2":  true,
			"instruments/date=2026-02-20/.c.parquet.tmp-3":       false,
			"_state/.d.state.zst.tmp-4":                          true,
			"_ledger/done/date=2026-02-27/.folded.json.tmp-5":    false,
			"_ledger/done/date=2026-03-01/.folded.json.tmp-6":    true,
			"raw/instruments/date=2026-03-01/.e.json.zst.tmp-7":  true,
			"raw/instruments/date=2026-02-28/.f.meta.json.tmp-8": true,
		}
		writeFiles(dir, temps)
		c := &countingFS{FS: os.DirFS(dir)}
		rep, err := cleanTemp(c, dir, Sweep{Since: now.Add(-24 * time.Hour), Now: now, Partitioned: full.Partitioned})
		if err != nil {
			t.Fatal(err)
		}
		for f, removed := range temps {
			if _, err := os.Stat(filepath.Join(dir, f)); (err != nil) != removed {
				t.Errorf("%d days: %s removed=%v, want %v", days, f, err != nil, removed)
			}
		}
		if rep.Removed != 6 {
			t.Errorf("%d days: removed %d, want 6", days, rep.Removed)
		}
		for _, r := range c.reads {
			if slices.Contains(tables, r) {
				t.Errorf("%d days: read the list of days of %s", days, r)
			}
		}
		// root, raw, _ledger, _state and the 2 days' folders of each table;
		// a stat of each of those days.
		if len(c.reads) > 4+2*len(tables) || len(c.stats) > 2*len(tables) {
			t.Errorf("%d days: %d folders read, %d stats: %v %v", days, len(c.reads), len(c.stats), c.reads, c.stats)
		}
	}
}

// writeFiles writes each name of files (relative to dir), with its folders.
func writeFiles(dir string, files map[string]bool) {
	for f := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755)
		os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644)
	}
}
