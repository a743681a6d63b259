// Package archive keeps every response body exactly as received, compressed
// with zstd, under DATA/raw/<endpoint>/date=YYYY-MM-DD/, with a metadata
// sidecar. Bodies are written as they stream in, before and regardless of
// parsing, so nothing a venue sent is ever lost and replay can rebuild any
// table from them.
//
// A body file is written under a hidden temporary name and renamed when the
// response ends; the sidecar (<name>.meta.json) is written last, so a body
// with a sidecar is complete as far as the response went, and a body without
// one was cut off by a crash.
package archive

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/optlake/optlake/internal/datadir"
)

// TimeLayout formats snapshot times in file names (sortable, UTC, ms).
const TimeLayout = "20060102T150405.000Z"

// Meta describes one archived response. It never holds secrets: URL is
// redacted by the caller and request headers are not recorded.
type Meta struct {
	Endpoint     string            `json:"endpoint"`
	Account      string            `json:"account,omitempty"` // account label (account endpoints)
	Request      int               `json:"request"`           // index of the request within the endpoint's fan-out
	Requests     int               `json:"requests"`          // requests of the endpoint in this run
	Params       map[string]string `json:"params,omitempty"`
	Attempt      int               `json:"attempt"`
	URL          string            `json:"url"`
	Status       int               `json:"status"`
	ContentType  string            `json:"content_type,omitempty"`
	SnapshotTime time.Time         `json:"snapshot_time"`
	RunID        string            `json:"run_id"`
	Source       string            `json:"source"`
	FetchTime    time.Time         `json:"fetch_time"`
	Bytes        int64             `json:"bytes"`  // body bytes as received (after HTTP content decoding)
	SHA256       string            `json:"sha256"` // of those bytes
	Complete     bool              `json:"complete"`
	Error        string            `json:"error,omitempty"`
	Compression  string            `json:"compression"`
	File         string            `json:"file"` // body file, relative to the data directory
}

// Archive writes under a data directory.
type Archive struct {
	dir string
}

// New returns an archive rooted at dataDir (bodies go to dataDir/raw).
func New(dataDir string) *Archive { return &Archive{dir: dataDir} }

// BodyPath returns the body file for m, relative to the data directory.
func BodyPath(m Meta) string {
	ts := m.SnapshotTime.UTC()
	name := fmt.Sprintf("%s-%s-r%03d-a%d.json.zst", ts.Format(TimeLayout), safe(m.RunID), m.Request, m.Attempt)
	return filepath.Join("raw", safe(m.Endpoint), "date="+ts.Format("2006-01-02"), name)
}

func safe(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "_"
	}
	return string(b)
}

// Entry is one body being archived. It is an io.Writer: tee the response
// body into it.
type Entry struct {
	meta  Meta
	final string
	f     *os.File
	zw    *zstd.Encoder
	h     hash.Hash
	n     int64
	done  bool
	werr  error

	// The hash and the compression run on their own goroutine (started
	// by the first Write), fed copies of the body's chunks through a
	// bounded queue, so that they do not slow the decoder reading the
	// tee. async holds the first error they met; wait stops them.
	queue chan []byte
	free  chan []byte
	idle  chan struct{}
	async atomic.Pointer[error]
}

// entryQueue bounds the chunks in flight between Write and the hashing
// and compressing goroutine (each chunk is one Read of the response body).
const entryQueue = 4

// Create starts archiving a body described by m (Status, Bytes, SHA256,
// Complete and Error are filled in by Finish).
func (a *Archive) Create(m Meta) (*Entry, error) {
	m.File = BodyPath(m)
	m.Compression = "zstd"
	final := filepath.Join(a.dir, m.File)
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	f, err := datadir.CreateTemp(filepath.Dir(final), "."+filepath.Base(final)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	zw, err := zstd.NewWriter(f, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(2))
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("archive: %w", err)
	}
	return &Entry{meta: m, final: final, f: f, zw: zw, h: sha256.New()}, nil
}

// Write compresses p into the archive. An archive write error is sticky and
// reported by Write and Finish: losing the raw copy fails the fetch.
//
// Write copies p to a bounded queue; a goroutine hashes and compresses it.
// An error of that goroutine is returned by the next Write (and Finish).
func (e *Entry) Write(p []byte) (int, error) {
	if e.werr != nil {
		return 0, e.werr
	}
	if err := e.async.Load(); err != nil {
		e.werr = *err
		return 0, e.werr
	}
	if len(p) == 0 {
		return 0, nil
	}
	if e.done {
		return 0, fmt.Errorf("archive %s: write after finish", e.meta.File)
	}
	if e.queue == nil {
		e.start()
	}
	var buf []byte
	select {
	case buf = <-e.free:
	default:
	}
	e.queue <- append(buf[:0], p...)
	e.n += int64(len(p))
	return len(p), nil
}

// start starts the goroutine that hashes and compresses the queued chunks.
func (e *Entry) start() {
	e.queue = make(chan []byte, entryQueue)
	e.free = make(chan []byte, entryQueue+1)
	e.idle = make(chan struct{})
	go func() {
		defer close(e.idle)
		failed := false
		for b := range e.queue {
			if !failed {
				e.h.Write(b)
				if _, err := e.zw.Write(b); err != nil {
					err = fmt.Errorf("archive %s: %w", e.meta.File, err)
					e.async.Store(&err)
					failed = true
				}
			}
			select {
			case e.free <- b:
			default:
			}
		}
	}()
}

// wait lets the goroutine finish the queued chunks and stop, and makes
// its error (if any) the entry's.
func (e *Entry) wait() {
	if e.queue == nil {
		return
	}
	close(e.queue)
	<-e.idle
	e.queue = nil
	if err := e.async.Load(); err != nil && e.werr == nil {
		e.werr = *err
	}
}

// Bytes is the number of body bytes archived so far.
func (e *Entry) Bytes() int64 { return e.n }

// Finish completes the body file and writes its sidecar. complete says
// whether the body was read to its end; errMsg (already redacted) says why
// not, or what went wrong after.
func (e *Entry) Finish(status int, contentType string, complete bool, errMsg string) (Meta, error) {
	if e.done {
		return e.meta, errors.New("archive: finish twice")
	}
	e.done = true
	e.wait()
	m := e.meta
	m.Status, m.ContentType, m.Complete, m.Error = status, contentType, complete, errMsg
	m.Bytes = e.n
	m.SHA256 = hex.EncodeToString(e.h.Sum(nil))
	tmp := e.f.Name()
	err := e.werr
	if cerr := e.zw.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err == nil {
		err = e.f.Sync()
	}
	if cerr := e.f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, e.final)
	}
	if err == nil {
		err = writeFileAtomic(e.final[:len(e.final)-len(".json.zst")]+".meta.json", m)
	}
	if err != nil {
		os.Remove(tmp)
		return m, fmt.Errorf("archive %s: %w", m.File, err)
	}
	return m, nil
}

// Abort removes the partial body (used when the run is cancelled before
// anything was received).
func (e *Entry) Abort() {
	if e.done {
		return
	}
	e.done = true
	e.wait()
	e.zw.Close()
	e.f.Close()
	os.Remove(e.f.Name())
}

func writeFileAtomic(path string, m Meta) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return datadir.WriteFile(path, append(b, '\n'))
}

// MetaPath returns the sidecar path of a body path.
func MetaPath(body string) string {
	return body[:len(body)-len(".json.zst")] + ".meta.json"
}

// ReadMeta reads a sidecar.
func ReadMeta(path string) (Meta, error) {
	var m Meta
	b, err := os.ReadFile(path)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("archive: %s: %w", path, err)
	}
	return m, nil
}

// Open returns a reader of an archived body (decompressed), given the data
// directory and the body's relative path. The decoder runs in the caller's
// goroutine (concurrency 1): for replay's many small bodies the default
// concurrent decoder's goroutines and buffers cost more than they save
// (about 10% of replay's CPU on 3,000-instrument snapshots).
func Open(dataDir, file string) (io.ReadCloser, error) {
	f, err := os.Open(filepath.Join(dataDir, file))
	if err != nil {
		return nil, err
	}
	zr, err := zstd.NewReader(f, zstd.WithDecoderConcurrency(1))
	if err != nil {
		f.Close()
		return nil, err
	}
	return &readCloser{zr: zr, f: f}, nil
}

type readCloser struct {
	zr *zstd.Decoder
	f  *os.File
}

func (r *readCloser) Read(p []byte) (int, error) { return r.zr.Read(p) }
func (r *readCloser) Close() error {
	r.zr.Close()
	return r.f.Close()
}

// Snapshot is the archived responses of one run, grouped for replay.
type Snapshot struct {
	Time  time.Time
	RunID string
	// Bodies are the usable response bodies: per endpoint and request, the
	// last attempt that was answered 2xx, in request order.
	Bodies []Meta
	// Problems lists archived files that cannot be replayed (no metadata: a
	// crash mid-write; a body that was cut off), one line each.
	Problems []string
}

// List scans dataDir/raw for the bodies of the given endpoints (all when
// empty) whose snapshot time is in [from, to) (zero bounds are open), and
// returns them grouped by snapshot, oldest first.
func List(dataDir string, endpoints []string, from, to time.Time) ([]Snapshot, error) {
	root := filepath.Join(dataDir, "raw")
	eps := endpoints
	if len(eps) == 0 {
		ents, err := os.ReadDir(root)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, nil
			}
			return nil, fmt.Errorf("archive: %w", err)
		}
		for _, e := range ents {
			if e.IsDir() {
				eps = append(eps, e.Name())
			}
		}
	}
	type key struct {
		ms  int64
		run string
	}
	snaps := map[key]*Snapshot{}
	best := map[string]Meta{} // snapshot|endpoint|request -> chosen attempt
	for _, ep := range eps {
		days, err := filepath.Glob(filepath.Join(root, safe(ep), "date=*"))
		if err != nil {
			return nil, err
		}
		for _, day := range days {
			if d, ok := parseDay(filepath.Base(day)); ok && (!from.IsZero() && !d.Add(24*time.Hour).After(from) || !to.IsZero() && !d.Before(to)) {
				continue // the whole day is outside [from, to)
			}
			ents, err := os.ReadDir(day)
			if err != nil {
				return nil, fmt.Errorf("archive: %w", err)
			}
			metas := map[string]bool{}
			for _, e := range ents {
				if strings.HasSuffix(e.Name(), ".meta.json") {
					metas[strings.TrimSuffix(e.Name(), ".meta.json")] = true
				}
			}
			for _, e := range ents {
				name := e.Name()
				if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json.zst") {
					continue
				}
				base := strings.TrimSuffix(name, ".json.zst")
				ts, run, ok := parseBodyName(base)
				if !ok || (!from.IsZero() && ts.Before(from)) || (!to.IsZero() && !ts.Before(to)) {
					continue
				}
				k := key{ts.UnixMilli(), run}
				s := snaps[k]
				if s == nil {
					s = &Snapshot{Time: ts, RunID: run}
					snaps[k] = s
				}
				rel := filepath.Join("raw", safe(ep), filepath.Base(day), name)
				if !metas[base] {
					s.Problems = append(s.Problems, rel+": no metadata (the run stopped while writing it)")
					continue
				}
				m, err := ReadMeta(filepath.Join(day, base+".meta.json"))
				if err != nil {
					s.Problems = append(s.Problems, rel+": "+err.Error())
					continue
				}
				if m.Status < 200 || m.Status > 299 {
					continue // an answered error; the retry that followed is what counts
				}
				if !m.Complete {
					s.Problems = append(s.Problems, rel+": body cut off ("+m.Error+")")
					continue
				}
				id := fmt.Sprintf("%d|%s|%s|%06d|%s", k.ms, k.run, m.Endpoint, m.Request, m.Account)
				if prev, ok := best[id]; !ok || m.Attempt > prev.Attempt {
					best[id] = m
				}
			}
		}
	}
	for _, m := range best {
		k := key{m.SnapshotTime.UnixMilli(), m.RunID}
		if s := snaps[k]; s != nil {
			s.Bodies = append(s.Bodies, m)
		}
	}
	out := make([]Snapshot, 0, len(snaps))
	for _, s := range snaps {
		sort.Slice(s.Bodies, func(i, j int) bool {
			if s.Bodies[i].Endpoint != s.Bodies[j].Endpoint {
				return s.Bodies[i].Endpoint < s.Bodies[j].Endpoint
			}
			return s.Bodies[i].Request < s.Bodies[j].Request
		})
		sort.Strings(s.Problems)
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Time.Equal(out[j].Time) {
			return out[i].Time.Before(out[j].Time)
		}
		return out[i].RunID < out[j].RunID
	})
	return out, nil
}

// Days lists the days (UTC midnights) that have a folder of archived bodies
// of endpoint, oldest first.
func Days(dataDir, endpoint string) ([]time.Time, error) {
	dirs, err := filepath.Glob(filepath.Join(dataDir, "raw", safe(endpoint), "date=*"))
	if err != nil {
		return nil, err
	}
	var out []time.Time
	for _, d := range dirs {
		if t, ok := parseDay(filepath.Base(d)); ok {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out, nil
}

// parseDay parses a day folder's name, date=YYYY-MM-DD.
func parseDay(name string) (time.Time, bool) {
	t, err := time.Parse("2006-01-02", strings.TrimPrefix(name, "date="))
	return t, err == nil && strings.HasPrefix(name, "date=")
}

// parseBodyName splits <snapshot>-<run_id>-rNNN-aN into its time and run id.
func parseBodyName(base string) (time.Time, string, bool) {
	if len(base) < len(TimeLayout)+1 {
		return time.Time{}, "", false
	}
	ts, err := time.Parse(TimeLayout, base[:len(TimeLayout)])
	if err != nil {
		return time.Time{}, "", false
	}
	rest := base[len(TimeLayout)+1:]
	i := strings.LastIndex(rest, "-r")
	if i < 0 {
		return time.Time{}, "", false
	}
	return ts.UTC(), rest[:i], true
}
