// Package archive keeps every response body exactly as received, compressed
// with zstd, under DATA/raw/<endpoint>/date=YYYY-MM-DD/, with a metadata
// sidecar. Bodies are written as they stream in, before and regardless of
// parsing, so nothing a venue sent is ever lost and replay can rebuild any
// table from them.
//
// The archive lives on the data directory's store (package storage: a
// local folder or a bucket prefix). A body is streamed into the store as it
// arrives and becomes visible whole when the response ends (a hidden temp
// file renamed, or a completed multipart upload); the sidecar
// (<name>.meta.json) is written last, so a body with a sidecar is complete
// as far as the response went, and a body without one was cut off by a
// crash. The sidecar's object_sha256 is the sha256 of the stored object
// (what `sha256sum` prints for the .json.zst); OpenVerified checks it.
package archive

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/optlake/optlake/pipeline/extract/envelope"
	"github.com/optlake/optlake/pipeline/fieldmap"
	"github.com/optlake/optlake/storage"
)

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
	Bytes        int64             `json:"bytes"` // body bytes as received (after HTTP content decoding)
	// ObjectSHA256 is the hex sha256 of the stored object (the .json.zst
	// file's bytes as written): `sha256sum FILE.json.zst` checks it, and
	// replay and catch-up verify it before decoding (OpenVerified).
	ObjectSHA256 string `json:"object_sha256,omitempty"`
	// SHA256 is the sha256 of the body (the decompressed bytes), written
	// by archives before object_sha256 and no longer: kept to read them.
	SHA256      string `json:"sha256,omitempty"`
	Complete    bool   `json:"complete"`
	Error       string `json:"error,omitempty"`
	Compression string `json:"compression"`
	File        string `json:"file"` // body file, relative to the data directory
	// Paginated requests: each page is its own body, numbered from 1;
	// the last one says so (a request without it is incomplete).
	Page     int  `json:"page,omitempty"`
	LastPage bool `json:"last_page,omitempty"`
	// Walk numbers the walks of a request's pages (from 1; 0 in archives
	// written before walks were numbered): a listing that shifted under
	// a walk is walked again, its bodies archived with attempts after the
	// earlier walk's. Replay and catch-up take the last walk only.
	Walk int `json:"walk,omitempty"`
	// Pagination is the kind of the walk (paginate.Offset, …), so that a
	// replay checks an offset walk as the run did.
	Pagination string `json:"pagination,omitempty"`
	// Envelope: the rows are the records at the dotted path Records
	// ("" the whole body), the rest is envelope (replay decodes it so).
	Envelope bool   `json:"envelope,omitempty"`
	Records  string `json:"records,omitempty"`
	// Shape and Fields: how the records became rows (keyed objects,
	// positional arrays, the listing's field mapping).
	Shape  *envelope.Shape `json:"shape,omitempty"`
	Fields fieldmap.Map    `json:"fields,omitempty"`
	// VenueError: a 2xx body that reported an error (not rows).
	VenueError bool `json:"venue_error,omitempty"`
}

// Archive writes and reads the raw archive of a data directory.
type Archive struct {
	st storage.Store
	// decoders are idle zstd decoders (concurrency 1) for Open: a new
	// decoder allocates and clears its history window for every body,
	// 6% of a replay's CPU on 3,000-instrument snapshots. decoders[checked]
	// verify each frame's content checksum; decoders[trusted] skip it, for
	// objects whose very bytes OpenVerified checked against object_sha256.
	decoders [2]sync.Pool
	// buffers hold objects OpenVerified reads whole (*bytes.Buffer).
	buffers sync.Pool
	// wholeDecoders are idle decoders (concurrency 1, checksum trusted,
	// output bounded by the destination's capacity) for bodies decoded
	// whole with DecodeAll, into buffers from bodies.
	wholeDecoders sync.Pool
	bodies        bodyBuffers
}

// bodyBuffers keeps a few buffers of decoded bodies for the next ones: a
// replay decodes a body of 1-2 MiB per snapshot, a few at once, and a
// sync.Pool lost them to the frequent collections (the bench replay
// allocated 118 MB of its 285 MB of bodies). At most keepBodies buffers of
// at most keepBodyMax bytes are kept.
type bodyBuffers struct {
	mu   sync.Mutex
	free []*[]byte
}

const (
	keepBodies  = 4
	keepBodyMax = 4 << 20
)

// get returns a buffer of capacity at least n: a kept one that is large
// enough, else a new one with room for a slightly larger next body.
func (p *bodyBuffers) get(n int) *[]byte {
	p.mu.Lock()
	for i, b := range p.free {
		if cap(*b) >= n {
			last := len(p.free) - 1
			p.free[i] = p.free[last]
			p.free = p.free[:last]
			p.mu.Unlock()
			return b
		}
	}
	p.mu.Unlock()
	s := make([]byte, 0, n+n/8)
	return &s
}

// put keeps b for a next get, unless enough are kept or it is too large.
func (p *bodyBuffers) put(b *[]byte) {
	if cap(*b) > keepBodyMax {
		return
	}
	p.mu.Lock()
	if len(p.free) < keepBodies {
		p.free = append(p.free, b)
	} else if i := slices.IndexFunc(p.free, func(k *[]byte) bool { return cap(*k) < cap(*b) }); i >= 0 {
		p.free[i] = b // the larger ones are kept
	}
	p.mu.Unlock()
}

// New returns the archive of a local data directory (bodies go to
// dataDir/raw).
func New(dataDir string) *Archive { return OnStore(storage.NewLocal(dataDir)) }

// OnStore returns the archive of the data directory st (bodies go to raw/).
func OnStore(st storage.Store) *Archive { return &Archive{st: st} }

// BodyPath returns the body file for m, relative to the data directory.
func BodyPath(m Meta) string {
	ts := m.SnapshotTime.UTC()
	page := ""
	if m.Page > 0 {
		page = fmt.Sprintf("-p%05d", m.Page)
	}
	name := fmt.Sprintf("%s-%s-r%03d%s-a%d.json.zst", ts.Format(storage.TimeLayout), storage.SafeName(m.RunID), m.Request, page, m.Attempt)
	return path.Join("raw", storage.SafeName(m.Endpoint), "date="+ts.Format("2006-01-02"), name)
}

// Entry is one body being archived. It is an io.Writer: tee the response
// body into it.
type Entry struct {
	meta Meta
	ctx  context.Context
	st   storage.Store
	w    storage.Writer
	zw   *zstd.Encoder
	h    hash.Hash // of the object, as zw writes it to w
	n    int64
	done bool
	werr error

	// The compression (and the object's hash) run on their own goroutine
	// (started by the first Write), fed copies of the body's chunks through a
	// bounded queue, so that they do not slow the decoder reading the
	// tee. async holds the first error they met; wait stops them.
	queue chan []byte
	free  chan []byte
	idle  chan struct{}
	async atomic.Pointer[error]
}

// entryQueue bounds the chunks in flight between Write and the
// compressing goroutine (each chunk is one Read of the response body).
const entryQueue = 4

// Create starts archiving a body described by m (Status, Bytes,
// ObjectSHA256, Complete and Error are filled in by Finish). Cancelling ctx abandons the
// body (nothing becomes visible).
func (a *Archive) Create(ctx context.Context, m Meta) (*Entry, error) {
	m.File = BodyPath(m)
	m.Compression = "zstd"
	w, err := a.st.Create(ctx, m.File)
	if err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	// The object is hashed as the encoder writes it (no second read); the
	// frame keeps zstd's content checksum (the encoder's default).
	h := sha256.New()
	zw, err := zstd.NewWriter(hashingWriter{w, h}, encoderOptions...)
	if err != nil {
		w.Abort()
		return nil, fmt.Errorf("archive: %w", err)
	}
	return &Entry{meta: m, ctx: ctx, st: a.st, w: w, zw: zw, h: h}, nil
}

// encoderOptions make the archive's zstd stream: zstd's fastest level, the
// frame's content checksum on, and
//   - one goroutine (the entry's own, fed by Write): the encoder's
//     concurrent mode starts two goroutines per 128 KiB block, hand-offs
//     that cost more CPU than they save while the decoder and the sinks
//     keep both cores busy;
//   - a 128 KiB window instead of the level's 4 MiB: the encoder shifts its
//     history down by one window each time it is full, so with a 4 MiB
//     window every byte is copied once more; and the nearer matches cost
//     fewer bits.
//
// On the 1M listing (630 MB) the stream took 0.70 instead of 1.1 CPU-s and
// 14.5 instead of 16.3 MB (docs/PERFORMANCE.md, issue 33). The frames are
// standard: `zstd -d`, DuckDB and any decoder read them, in less memory.
var encoderOptions = []zstd.EOption{
	zstd.WithEncoderLevel(zstd.SpeedFastest),
	zstd.WithEncoderCRC(true),
	zstd.WithEncoderConcurrency(1),
	zstd.WithWindowSize(archiveWindow),
}

// archiveWindow is the zstd window of archived bodies.
const archiveWindow = 128 << 10

// hashingWriter writes to w what it adds to h: the object as stored.
type hashingWriter struct {
	w io.Writer
	h hash.Hash
}

func (hw hashingWriter) Write(p []byte) (int, error) {
	n, err := hw.w.Write(p)
	hw.h.Write(p[:n])
	return n, err
}

// MarkPage records, before Finish, whether the body is the last page of
// its request and whether it is a venue error (a 2xx body that reported
// an error instead of rows).
func (e *Entry) MarkPage(last, venueError bool) {
	e.meta.LastPage, e.meta.VenueError = last, venueError
}

// Write compresses p into the archive. An archive write error is sticky and
// reported by Write and Finish: losing the raw copy fails the fetch.
//
// Write copies p to a bounded queue; a goroutine compresses it.
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

// start starts the goroutine that compresses the queued chunks.
func (e *Entry) start() {
	e.queue = make(chan []byte, entryQueue)
	e.free = make(chan []byte, entryQueue+1)
	e.idle = make(chan struct{})
	go func() {
		defer close(e.idle)
		failed := false
		for b := range e.queue {
			if !failed {
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
	err := e.werr
	if cerr := e.zw.Close(); err == nil && cerr != nil {
		err = cerr
	}
	m.ObjectSHA256 = hex.EncodeToString(e.h.Sum(nil)) // the frame is whole once closed
	if err != nil {
		e.w.Abort()
		return m, fmt.Errorf("archive %s: %w", m.File, err)
	}
	if err := e.w.Commit(); err != nil {
		return m, fmt.Errorf("archive %s: %w", m.File, err)
	}
	if err := putMeta(e.ctx, e.st, m); err != nil {
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
	e.w.Abort()
}

// putMeta writes the sidecar of m (one whole object).
func putMeta(ctx context.Context, st storage.Store, m Meta) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return st.Put(ctx, MetaPath(m.File), append(b, '\n'))
}

// MetaPath returns the sidecar path of a body path.
func MetaPath(body string) string {
	return body[:len(body)-len(".json.zst")] + ".meta.json"
}

// ReadMeta reads a sidecar file of a local data directory.
func ReadMeta(path string) (Meta, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Meta{}, err
	}
	return parseMeta(path, b)
}

// ReadMeta reads the sidecar name (relative to the data directory).
func (a *Archive) ReadMeta(ctx context.Context, name string) (Meta, error) {
	b, err := storage.ReadAll(ctx, a.st, name)
	if err != nil {
		return Meta{}, err
	}
	return parseMeta(name, b)
}

func parseMeta(name string, b []byte) (Meta, error) {
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("archive: %s: %w", name, err)
	}
	return m, nil
}

// Open returns a reader of an archived body (decompressed), given a local
// data directory and the body's relative path.
func Open(dataDir, file string) (io.ReadCloser, error) {
	return New(dataDir).Open(context.Background(), file)
}

// Open returns a reader of an archived body (decompressed), given the
// body's path relative to the data directory. The decoder runs in the
// caller's goroutine (concurrency 1): for replay's many small bodies the
// default concurrent decoder's goroutines and buffers cost more than they
// save (about 10% of replay's CPU on 3,000-instrument snapshots).
func (a *Archive) Open(ctx context.Context, file string) (io.ReadCloser, error) {
	r, err := a.st.Open(ctx, file)
	if err != nil {
		return nil, err
	}
	return a.decode(r, checked)
}

// How a decoder treats the frame's content checksum (an XXH64 of the
// body, about a fifth of decompression's CPU on replay's listings).
const (
	checked = iota // verified against the body as it is decoded
	trusted        // not verified: the object's sha256 was, on the same bytes
)

// decode returns the decompressing reader of the object r, closing r when
// it cannot; mode is checked or trusted.
func (a *Archive) decode(r io.ReadCloser, mode int) (io.ReadCloser, error) {
	pool := &a.decoders[mode]
	zr, _ := pool.Get().(*zstd.Decoder)
	var err error
	if zr == nil {
		zr, err = zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.IgnoreChecksum(mode == trusted))
	} else {
		err = zr.Reset(r)
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return &readCloser{pool: pool, zr: zr, r: r}, nil
}

// ErrObjectHash marks a stored object whose sha256 is not its metadata's
// object_sha256: the file changed after it was written.
var ErrObjectHash = errors.New("stored object does not match its metadata's object_sha256")

// verifyInMemory is the largest object OpenVerified keeps in memory to
// hash and decode it from one read; a larger one is read twice (hashed,
// then decoded), so that memory stays bounded. Replay's snapshots are
// a few hundred KiB compressed; a 1M listing is about 60 MiB.
const verifyInMemory = 8 << 20

// OpenVerified is Open of m's body that first checks the stored object
// against m.ObjectSHA256: a mismatch is an error wrapping ErrObjectHash,
// returned before anything is decoded. An object read whole (at most
// verifyInMemory bytes) is decoded from the bytes that were hashed, so the
// frames' content checksums are not verified again; a larger one is read
// again from the store to be decoded, with them verified. Metadata written
// before object_sha256 existed has only the body's hash; such a body is
// opened unchecked (zstd's frame checksum still checks it as it is decoded).
func (a *Archive) OpenVerified(ctx context.Context, m Meta) (io.ReadCloser, error) {
	if m.ObjectSHA256 == "" {
		return a.Open(ctx, m.File)
	}
	r, err := a.st.Open(ctx, m.File)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	buf, _ := a.buffers.Get().(*bytes.Buffer)
	if buf == nil {
		buf = new(bytes.Buffer)
	}
	buf.Reset()
	n, err := buf.ReadFrom(io.LimitReader(r, verifyInMemory+1))
	h.Write(buf.Bytes())
	whole := n <= verifyInMemory
	if err == nil && !whole {
		_, err = io.Copy(h, r)
	}
	r.Close()
	if err == nil {
		if got := hex.EncodeToString(h.Sum(nil)); got != m.ObjectSHA256 {
			err = fmt.Errorf("%w (sha256 %s, metadata %s)", ErrObjectHash, got, m.ObjectSHA256)
		}
	}
	if err != nil || !whole {
		a.buffers.Put(buf)
		if err != nil {
			return nil, fmt.Errorf("verify: %w", err)
		}
		return a.Open(ctx, m.File)
	}
	if m.Bytes > 0 && m.Bytes <= decodeWholeMax {
		return &wholeBody{a: a, obj: buf, size: int(m.Bytes)}, nil
	}
	return a.decode(bufferReader{bytes.NewReader(buf.Bytes()), buf, a}, trusted)
}

// decodeWholeMax is the largest body (its metadata's bytes) that
// OpenVerified decodes whole into memory when it is first read; a larger
// one streams. Decoding a frame at once (DecodeAll) takes about half the
// CPU of the streaming decoder's reads on replay's listings (no copy out of
// the history window), and the reader of the body can use it in place
// (InMemory). Replay's snapshots are 1-2 MiB of JSON.
const decodeWholeMax = 16 << 20

// wholeBody is a verified object held in memory whose body is decoded
// whole on first use. The decode is bounded by the metadata's size: a
// body that does not decode within it (a frame that is corrupt or larger
// than its metadata says) is read with the streaming decoder instead,
// which reports what is wrong with it as Open's readers do, at the same
// point of the body.
type wholeBody struct {
	a      *Archive
	obj    *bytes.Buffer // the object, until decoded or failed over to r
	size   int           // the body's bytes, from its metadata
	body   *[]byte       // the buffer of data (pooled), once decoded
	data   []byte        // the decoded body
	off    int           // bytes of body read
	r      io.ReadCloser // the streaming decoder, when the whole decode failed
	closed bool
}

// InMemory decodes the body and returns it whole (it aliases a buffer that
// Close hands back), or false when it cannot be: the body is then read
// with Read, from its start. Either way InMemory consumes what it returns.
func (w *wholeBody) InMemory() ([]byte, bool) {
	if w.closed || !w.decode() {
		return nil, false
	}
	b := w.data[w.off:]
	w.off = len(w.data)
	return b, true
}

func (w *wholeBody) Read(p []byte) (int, error) {
	if w.closed {
		return 0, os.ErrClosed
	}
	if !w.decode() {
		return w.r.Read(p)
	}
	if w.off >= len(w.data) {
		return 0, io.EOF
	}
	n := copy(p, w.data[w.off:])
	w.off += n
	return n, nil
}

// decode decodes the body whole the first time and reports whether it is
// in w.data; when not, w.r reads it.
func (w *wholeBody) decode() bool {
	if w.obj == nil {
		return w.body != nil
	}
	obj, a := w.obj, w.a
	w.obj = nil
	zr, _ := a.wholeDecoders.Get().(*zstd.Decoder)
	if zr == nil {
		zr, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.IgnoreChecksum(true), zstd.WithDecodeAllCapLimit(true))
	}
	if zr != nil {
		body := a.bodies.get(w.size)
		out, err := zr.DecodeAll(obj.Bytes(), (*body)[:0:w.size])
		a.wholeDecoders.Put(zr)
		if err == nil && len(out) == w.size {
			w.body, w.data = body, out
			a.buffers.Put(obj)
			return true
		}
		a.bodies.put(body)
	}
	// Not its metadata's size, or corrupt: the streaming decoder tells
	// (it hands obj back when closed).
	r, err := a.decode(bufferReader{bytes.NewReader(obj.Bytes()), obj, a}, trusted)
	if err != nil {
		r = errReader{err}
	}
	w.r = r
	return false
}

// Close hands the buffers back for the next OpenVerified.
func (w *wholeBody) Close() error {
	if w.closed {
		return os.ErrClosed
	}
	w.closed = true
	var err error
	if w.obj != nil {
		w.a.buffers.Put(w.obj)
		w.obj = nil
	}
	if w.r != nil {
		err = w.r.Close()
	}
	if w.body != nil {
		w.a.bodies.put(w.body)
		w.body, w.data = nil, nil
	}
	return err
}

// errReader fails every read with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
func (e errReader) Close() error             { return nil }

// bufferReader is an object held in memory, its buffer handed back to the
// archive on Close.
type bufferReader struct {
	*bytes.Reader
	buf *bytes.Buffer
	a   *Archive
}

func (b bufferReader) Close() error {
	b.a.buffers.Put(b.buf)
	return nil
}

type readCloser struct {
	pool *sync.Pool    // where zr goes back
	zr   *zstd.Decoder // nil once closed
	r    io.ReadCloser
}

func (r *readCloser) Read(p []byte) (int, error) {
	if r.zr == nil {
		return 0, os.ErrClosed
	}
	return r.zr.Read(p)
}

// Close hands the decoder back for the next Open (a decoder of
// concurrency 1 is idle once Reset to no stream).
func (r *readCloser) Close() error {
	if r.zr == nil {
		return os.ErrClosed
	}
	if r.zr.Reset(nil) == nil {
		r.pool.Put(r.zr)
	} else {
		r.zr.Close()
	}
	r.zr = nil
	return r.r.Close()
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

// List scans the raw archive of a local data directory; see Archive.List.
func List(dataDir string, endpoints []string, from, to time.Time) ([]Snapshot, error) {
	return New(dataDir).List(context.Background(), endpoints, from, to)
}

// Days lists the days of a local data directory's archive; see Archive.Days.
func Days(dataDir, endpoint string) ([]time.Time, error) {
	return New(dataDir).Days(context.Background(), endpoint)
}

// dayFiles are the archive's files of one endpoint ("" every endpoint),
// by day folder (raw/<endpoint>/date=YYYY-MM-DD), base names in order, of
// the days that overlap [from, to) (zero bounds are open). A bounded range
// lists the day folders, then the days in it alone: the catch-up of an
// hour reads that day's names, not a year's (210,240 a year for the
// listing).
func (a *Archive) dayFiles(ctx context.Context, endpoint string, from, to time.Time) (map[string][]string, error) {
	out := map[string][]string{}
	add := func(infos []storage.Info) {
		for _, in := range infos {
			dir, base := path.Split(in.Name)
			out[strings.TrimSuffix(dir, "/")] = append(out[strings.TrimSuffix(dir, "/")], base)
		}
	}
	if from.IsZero() && to.IsZero() {
		prefix := path.Join("raw", endpoint) + "/"
		if endpoint == "" {
			prefix = "raw/"
		}
		infos, err := a.st.List(ctx, prefix)
		if err != nil {
			return nil, fmt.Errorf("archive: %w", err)
		}
		add(infos)
		return out, nil
	}
	dirs, err := a.dayDirs(ctx, endpoint)
	if err != nil {
		return nil, err
	}
	for _, dir := range dirs {
		d, ok := parseDay(path.Base(dir))
		if !ok || !from.IsZero() && !d.Add(24*time.Hour).After(from) || !to.IsZero() && !d.Before(to) {
			continue
		}
		infos, err := a.st.List(ctx, dir+"/")
		if err != nil {
			return nil, fmt.Errorf("archive: %w", err)
		}
		add(infos)
	}
	return out, nil
}

// dayDirs lists the archive's day folders of endpoint ("" every
// endpoint), raw/<endpoint>/date=YYYY-MM-DD, in one delimited listing per
// endpoint.
func (a *Archive) dayDirs(ctx context.Context, endpoint string) ([]string, error) {
	eps := []string{endpoint}
	if endpoint == "" {
		ents, err := a.st.ListDir(ctx, "raw/")
		if err != nil {
			return nil, fmt.Errorf("archive: %w", err)
		}
		eps = nil
		for _, e := range ents {
			if name, ok := strings.CutSuffix(e.Name, "/"); ok {
				eps = append(eps, path.Base(name))
			}
		}
	}
	var out []string
	for _, ep := range eps {
		ents, err := a.st.ListDir(ctx, "raw/"+ep+"/")
		if err != nil {
			return nil, fmt.Errorf("archive: %w", err)
		}
		for _, e := range ents {
			if name, ok := strings.CutSuffix(e.Name, "/"); ok {
				out = append(out, name)
			}
		}
	}
	return out, nil
}

// List scans raw/ for the bodies of the given endpoints (all when empty)
// whose snapshot time is in [from, to) (zero bounds are open), and returns
// them grouped by snapshot, oldest first.
func (a *Archive) List(ctx context.Context, endpoints []string, from, to time.Time) ([]Snapshot, error) {
	days := map[string][]string{} // raw/<endpoint>/date=... -> base names
	if len(endpoints) == 0 {
		all, err := a.dayFiles(ctx, "", from, to)
		if err != nil {
			return nil, err
		}
		days = all
	}
	for _, ep := range endpoints {
		d, err := a.dayFiles(ctx, storage.SafeName(ep), from, to)
		if err != nil {
			return nil, err
		}
		for k, v := range d {
			days[k] = v
		}
	}
	type key struct {
		ms  int64
		run string
	}
	snaps := map[key]*Snapshot{}
	best := map[string]Meta{} // snapshot|endpoint|request -> chosen attempt
	// Attempts that cannot be replayed, by their body's request (attempt),
	// reported unless a later attempt of the request is usable (retried).
	type unusable struct {
		k       key
		attempt int
		problem string
	}
	var unusables []unusable
	unusableAt := map[string][]int{} // attempt id -> indexes in unusables
	addUnusable := func(k key, day, base, problem string) {
		id, attempt, ok := attemptID(day, base)
		if !ok {
			snaps[k].Problems = append(snaps[k].Problems, problem)
			return
		}
		unusableAt[id] = append(unusableAt[id], len(unusables))
		unusables = append(unusables, unusable{k, attempt, problem})
	}
	chosen := map[string]int{} // attempt id -> the usable attempt chosen
	for day, names := range days {
		if d, ok := parseDay(path.Base(day)); !ok || path.Dir(path.Dir(day)) != "raw" {
			continue // not raw/<endpoint>/date=...
		} else if !from.IsZero() && !d.Add(24*time.Hour).After(from) || !to.IsZero() && !d.Before(to) {
			continue // the whole day is outside [from, to)
		}
		metas, bodies := map[string]bool{}, map[string]bool{}
		for _, name := range names {
			if strings.HasSuffix(name, ".meta.json") {
				metas[strings.TrimSuffix(name, ".meta.json")] = true
			} else if strings.HasSuffix(name, ".json.zst") {
				bodies[strings.TrimSuffix(name, ".json.zst")] = true
			}
		}
		// Metadata is written after its body: one without a body lost it.
		for base := range metas {
			ts, run, ok := parseBodyName(base)
			if bodies[base] || !ok || (!from.IsZero() && ts.Before(from)) || (!to.IsZero() && !ts.Before(to)) {
				continue
			}
			k := key{ts.UnixMilli(), run}
			if snaps[k] == nil {
				snaps[k] = &Snapshot{Time: ts, RunID: run}
			}
			snaps[k].Problems = append(snaps[k].Problems, path.Join(day, base+".json.zst")+": body missing (its metadata is there)")
		}
		for _, name := range names {
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
			rel := path.Join(day, name)
			if !metas[base] {
				addUnusable(k, day, base, rel+": no metadata (the run stopped while writing it)")
				continue
			}
			m, err := a.ReadMeta(ctx, path.Join(day, base+".meta.json"))
			if err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				s.Problems = append(s.Problems, rel+": "+err.Error())
				continue
			}
			if m.Status < 200 || m.Status > 299 || m.VenueError {
				continue // an answered error; the retry that followed is what counts
			}
			if !m.Complete {
				addUnusable(k, day, base, rel+": body cut off ("+m.Error+")")
				continue
			}
			id := fmt.Sprintf("%d|%s|%s|%06d|%s|%05d", k.ms, k.run, m.Endpoint, m.Request, m.Account, m.Page)
			if prev, ok := best[id]; !ok || m.Attempt > prev.Attempt {
				best[id] = m
			}
			if aid, attempt, ok := attemptID(day, base); ok && attempt > chosen[aid] {
				chosen[aid] = attempt
			}
		}
	}
	// An attempt cut off (or left without metadata) that a later attempt
	// of the same request answered whole was retried: nothing is missing.
	for id, is := range unusableAt {
		for _, i := range is {
			if u := unusables[i]; chosen[id] < u.attempt {
				snaps[u.k].Problems = append(snaps[u.k].Problems, u.problem)
			}
		}
	}
	// A request walked again (its listing shifted): the last walk only.
	lastWalk := map[string]int{}
	for id, m := range best {
		req := id[:strings.LastIndexByte(id, '|')]
		lastWalk[req] = max(lastWalk[req], m.Walk)
	}
	for id, m := range best {
		if m.Walk < lastWalk[id[:strings.LastIndexByte(id, '|')]] {
			continue
		}
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
			if s.Bodies[i].Request != s.Bodies[j].Request {
				return s.Bodies[i].Request < s.Bodies[j].Request
			}
			return s.Bodies[i].Page < s.Bodies[j].Page
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

// Days lists the days (UTC midnights) that have archived bodies of
// endpoint, oldest first.
func (a *Archive) Days(ctx context.Context, endpoint string) ([]time.Time, error) {
	dirs, err := a.dayDirs(ctx, storage.SafeName(endpoint))
	if err != nil {
		return nil, err
	}
	var out []time.Time
	for _, day := range dirs {
		if t, ok := parseDay(path.Base(day)); ok {
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

// attemptID splits a body's base name in its day folder into what names
// its request (the folder, snapshot, run, request and page) and its
// attempt number.
func attemptID(day, base string) (string, int, bool) {
	i := strings.LastIndex(base, "-a")
	if i < 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(base[i+2:])
	if err != nil || n < 1 {
		return "", 0, false
	}
	return day + "/" + base[:i], n, true
}

// parseBodyName splits <snapshot>-<run_id>-rNNN-aN into its time and run id.
func parseBodyName(base string) (time.Time, string, bool) {
	if len(base) < len(storage.TimeLayout)+1 {
		return time.Time{}, "", false
	}
	ts, err := time.Parse(storage.TimeLayout, base[:len(storage.TimeLayout)])
	if err != nil {
		return time.Time{}, "", false
	}
	rest := base[len(storage.TimeLayout)+1:]
	i := strings.LastIndex(rest, "-r")
	if i < 0 {
		return time.Time{}, "", false
	}
	return ts.UTC(), rest[:i], true
}
