// Package datadir guards a data directory: one optlake process at a time
// (an advisory lock), and no leftovers of a crashed one (temp files).
package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// LockFile is the lock's name inside the data directory.
const LockFile = ".optlake.lock"

// ErrLocked is returned when another process holds the lock.
var ErrLocked = errors.New("data directory is locked by another optlake process")

// errHeld is tryLock's answer when another process holds the lock.
var errHeld = errors.New("held")

// LockedError says who holds the lock.
type LockedError struct {
	Dir    string
	Holder string // "pid 123 since 2026-11-22T10:00:00Z", when known
}

func (e *LockedError) Error() string {
	msg := fmt.Sprintf("data directory %s is in use by another optlake process", e.Dir)
	if e.Holder != "" {
		msg += " (" + e.Holder + ")"
	}
	return msg + "; runs on one data directory never overlap"
}

func (e *LockedError) Unwrap() error { return ErrLocked }

// Lock is a held data-directory lock.
type Lock struct{ f *os.File }

// Acquire takes the data directory's lock without waiting. The lock is an
// flock(2) on DIR/.optlake.lock: the kernel drops it when the process dies,
// even by kill -9, so a crash never leaves a stale lock.
func Acquire(dir string) (*Lock, error) {
	if err := MkdirAll(dir, nil); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := tryLock(f); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, errHeld) {
			return nil, &LockedError{Dir: dir, Holder: strings.TrimSpace(string(holder))}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	f.Truncate(0)
	f.WriteAt([]byte("pid "+strconv.Itoa(os.Getpid())+" since "+time.Now().UTC().Format(time.RFC3339)+"\n"), 0)
	return &Lock{f: f}, nil
}

// Release drops the lock.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	l.f.Truncate(0)
	err := l.f.Close() // closing the descriptor releases the flock
	l.f = nil
	return err
}

// Sweep says which folders CleanTemp leaves out.
type Sweep struct {
	// Since, when set, leaves out the hive partitions of days before it
	// ("date=YYYY-MM-DD" folders): what a run writes is in today's
	// partitions, and walking every partition of a data directory months
	// old costs more than the run (storage.CleanIncomplete decides).
	Since time.Time
	// Unchanged, when set, leaves out the hive partitions whose folder has
	// not changed (its modification time) since then: the end of the last
	// sweep that entered every partition, which left no temp file behind.
	// A temp file created in a folder, or renamed into or out of it, since
	// then changed the folder's time. A month's partitions cost a stat
	// each, not a read of every file name they hold.
	Unchanged time.Time
	// Skip are folders (slash-separated, relative to the directory) not
	// entered: compaction's trash, whose folders arrive whole by rename and
	// are deleted whole after their grace period.
	Skip []string
	// Partitioned, with Since, are folders (slash-separated, relative to
	// the directory) that held day folders only at the last sweep without
	// Since (CleanTempReport's Partitioned): their lists of day folders are
	// not read, only the days' folders from Since's day to Now's are looked
	// for (a stat each). A table of a year has 365 day folders; reading
	// each list at every start grows with the history.
	Partitioned []string
	// Now is the last day a Partitioned folder is looked at for (zero:
	// time.Now).
	Now time.Time
}

// Report is what a sweep found.
type Report struct {
	Removed int // temp files removed
	// Partitioned are the folders it read that held day folders
	// ("date=YYYY-MM-DD") and nothing else, sorted (without Since: every
	// such folder of the directory, but those Skip leaves out).
	Partitioned []string
}

// CleanTemp removes the hidden temporary files (".<name>.tmp-*") that a
// crashed run left under dir, but in the folders s leaves out, and returns
// how many it removed. Call it only while holding the lock: then no other
// process is writing them.
func CleanTemp(dir string, s Sweep) (int, error) {
	rep, err := CleanTempReport(dir, s)
	return rep.Removed, err
}

// CleanTempReport is CleanTemp, with the folders that hold day folders
// only (for the next sweep's Partitioned).
func CleanTempReport(dir string, s Sweep) (Report, error) {
	return cleanTemp(os.DirFS(dir), dir, s)
}

// cleanTemp is CleanTemp walking fsys, the folder dir.
func cleanTemp(fsys fs.FS, dir string, s Sweep) (Report, error) {
	var rep Report
	first := s.Since.UTC().Format(time.DateOnly)
	var days []string // with Since and Partitioned: the days looked at
	if !s.Since.IsZero() && len(s.Partitioned) > 0 {
		now := s.Now
		if now.IsZero() {
			now = time.Now()
		}
		last := now.UTC().Format(time.DateOnly)
		for d := s.Since.UTC(); d.Format(time.DateOnly) <= last; d = d.AddDate(0, 0, 1) {
			days = append(days, d.Format(time.DateOnly))
		}
	}
	var walk func(p string) error
	remove := func(p string) error {
		if err := os.Remove(filepath.Join(dir, filepath.FromSlash(p))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		rep.Removed++
		return nil
	}
	enterDay := func(p, day string) (bool, error) {
		if !s.Since.IsZero() && day < first {
			return false, nil
		}
		if !s.Unchanged.IsZero() {
			fi, err := fs.Stat(fsys, p)
			if err != nil {
				return false, ignoreGone(err)
			}
			if fi.ModTime().Before(s.Unchanged) {
				return false, nil
			}
		}
		return true, nil
	}
	walk = func(p string) error {
		if slices.Contains(s.Skip, p) {
			return nil
		}
		if days != nil && slices.Contains(s.Partitioned, p) {
			for _, day := range days {
				sub := path.Join(p, "date="+day)
				if fi, err := fs.Stat(fsys, sub); err != nil || !fi.IsDir() {
					if err := ignoreGone(err); err != nil {
						return err
					}
					continue
				}
				if err := walk(sub); err != nil {
					return err
				}
			}
			return nil
		}
		ents, err := fs.ReadDir(fsys, p)
		if err != nil {
			return ignoreGone(err)
		}
		onlyDays := len(ents) > 0
		for _, e := range ents {
			sub := path.Join(p, e.Name())
			if !e.IsDir() {
				onlyDays = false
				if name := e.Name(); strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp-") {
					if err := remove(sub); err != nil {
						return err
					}
				}
				continue
			}
			day, ok := dayOf(e.Name())
			onlyDays = onlyDays && ok
			if ok {
				enter, err := enterDay(sub, day)
				if err != nil || !enter {
					if err != nil {
						return err
					}
					continue
				}
			}
			if err := walk(sub); err != nil {
				return err
			}
		}
		if onlyDays && s.Since.IsZero() && p != "." {
			rep.Partitioned = append(rep.Partitioned, p)
		}
		return nil
	}
	err := walk(".")
	slices.Sort(rep.Partitioned)
	return rep, err
}

// dayOf returns the day of a hive day folder's name ("date=YYYY-MM-DD").
func dayOf(name string) (string, bool) {
	day, ok := strings.CutPrefix(name, "date=")
	if !ok || len(day) != len(time.DateOnly) {
		return "", false
	}
	if _, err := time.Parse(time.DateOnly, day); err != nil {
		return "", false
	}
	return day, true
}

// ignoreGone is err, but nil for a file or folder that is not there (gone
// meanwhile).
func ignoreGone(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// SyncDir fsyncs the folder dir, so that a file created or renamed in it
// survives a crash (the last step of every atomic replace in the lake).
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// MkdirAll creates dir and the folders above it that are missing, as
// os.MkdirAll does, and fsyncs each folder it creates into its parent
// (sync, nil: SyncDir), so that a file published in a new folder keeps its
// path after a power loss, not only after a kill. A folder that exists
// costs one stat, as with os.MkdirAll; a new one, one fsync of its parent.
func MkdirAll(dir string, sync func(dir string) error) error {
	if sync == nil {
		sync = SyncDir
	}
	fi, err := os.Stat(dir)
	if err == nil {
		if fi.IsDir() {
			return nil
		}
		return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := MkdirAll(parent, sync); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		// Made by someone else meanwhile: synced below all the same.
		if fi, serr := os.Stat(dir); serr != nil || !fi.IsDir() {
			return err
		}
	}
	return sync(parent)
}

// CreateTemp is os.CreateTemp for files of the lake: it creates a new file
// in dir named by pattern (its last "*" replaced by a random string) with
// mode 0644 less the umask, so that readers other than the service account
// (a notebook user) can read what is renamed into place. os.CreateTemp
// creates 0600.
func CreateTemp(dir, pattern string) (*os.File, error) {
	prefix, suffix := pattern, ""
	if i := strings.LastIndexByte(pattern, '*'); i >= 0 {
		prefix, suffix = pattern[:i], pattern[i+1:]
	}
	var err error
	for range 10000 {
		name := filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10)+suffix)
		var f *os.File
		f, err = os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
	return nil, err
}

// TempFor creates the hidden temporary file that will replace path
// (".<name>.tmp-*" in path's folder, which CleanTemp removes after a
// crash), creating the folder if needed. Write it, then Publish it.
func TempFor(path string) (*os.File, error) {
	dir := filepath.Dir(path)
	if err := MkdirAll(dir, nil); err != nil {
		return nil, err
	}
	return CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
}

// Publish is the one atomic, durable replace of the lake: it makes the
// temporary file f (created in final's folder, by TempFor or CreateTemp)
// the file final — fsync of the file, rename over final, fsync of the
// folder. A reader sees the old file or the new one, never part, and the
// new one survives a crash once Publish returned. f stays open (it is the
// file final now); on error the temporary file is removed.
func Publish(f *os.File, final string) error {
	err := f.Sync()
	if err == nil {
		err = os.Rename(f.Name(), final)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	return SyncDir(filepath.Dir(final))
}

// WriteFile replaces path with data atomically and durably (TempFor,
// Publish).
func WriteFile(path string, data []byte) error {
	f, err := TempFor(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		os.Remove(f.Name())
		return err
	}
	return Publish(f, path)
}
