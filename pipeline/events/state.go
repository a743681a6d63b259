package events

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"

	"github.com/optlake/optlake/internal/datadir"
)

// State is the last known instruments of one source: for each instrument its
// name and a payload (the compared fields and the expiration time, see
// fields.go), plus the time of the snapshot they come from, in
// instrument_name order. A small state is held in memory; a large one is a
// state file (format below) that is read as a stream, so its size does not
// bound the memory of a comparison.
//
// A State is immutable once returned by NewState, Load, Builder.State or
// Differ.Finish and safe for concurrent reads. Close releases its file; a
// state that Differ.Finish or Builder.State wrote to a temporary file and
// that was never saved has that file removed by Close.
type State struct {
	source  string
	hasSnap bool
	snapMs  int64
	n       int

	// In memory: entries sorted by name, names distinct.
	ar   arena
	ents []entry
	ids  []rowID // the entries' identities (empty: none; see rowID)

	mu     sync.Mutex
	f      *os.File // the state file (nil: in memory)
	size   int64
	path   string
	temp   bool // path is a temporary file of this state, removed by Close unless saved
	closed bool
}

// entry locates one instrument's name followed by its payload in an arena.
// key holds the name's first 8 bytes (big-endian, zero-padded): comparing
// keys orders most names without reading them.
type entry struct {
	key        uint64
	chunk, off uint32
	nlen, plen uint32
}

// nameKey returns the key of a name (see entry): its first 8 bytes as a
// big-endian word (zero padded).
func nameKey[S string | []byte](name S) uint64 {
	if len(name) >= 8 {
		return binary.BigEndian.Uint64([]byte(name[:8]))
	}
	var b [8]byte
	copy(b[:], name)
	return binary.BigEndian.Uint64(b[:])
}

// NewState returns the empty state of a source: no snapshot yet, so the next
// comparison lists every instrument with initial = true.
func NewState(source string) *State {
	return &State{source: source}
}

// Source returns the source the state belongs to.
func (s *State) Source() string { return s.source }

// LastSnapshot returns the time of the snapshot the state reflects (UTC, ms)
// and false when the state is empty (no snapshot yet).
func (s *State) LastSnapshot() (time.Time, bool) {
	if !s.hasSnap {
		return time.Time{}, false
	}
	return time.UnixMilli(s.snapMs).UTC(), true
}

// Len returns the number of instruments in the state.
func (s *State) Len() int { return s.n }

// MemBytes estimates the memory the state holds: its entries when it is in
// memory, nothing but buffers while a file-backed state is read.
func (s *State) MemBytes() int64 {
	n := int64(cap(s.ents))*entrySize + int64(cap(s.ids))*8
	for _, c := range s.ar.chunks {
		n += int64(cap(c))
	}
	return n
}

// Close releases the state's file, and removes it when it is a temporary
// file that was never saved. A closed state cannot be read (compared,
// saved) any more; Close is idempotent and a no-op for a state in memory
// other than dropping its entries.
func (s *State) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	// Nothing reads a closed state: its memory goes to the next
	// comparison (Options.Reuse).
	s.ar.re.putEntries(s.ents)
	s.ar.re.putRowIDs(s.ids)
	s.ar.release()
	s.ar, s.ents, s.ids = arena{}, nil, nil
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	if s.temp {
		if rerr := os.Remove(s.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
			err = rerr
		}
	}
	s.f = nil
	if err != nil {
		return fmt.Errorf("instrument events: close state: %w", err)
	}
	return nil
}

func (s *State) name(e int) []byte {
	en := &s.ents[e]
	return s.ar.chunks[en.chunk][en.off : en.off+en.nlen]
}

func (s *State) payload(e int) []byte {
	en := &s.ents[e]
	start := en.off + en.nlen
	return s.ar.chunks[en.chunk][start : start+en.plen]
}

// errClosed reports the use of a closed State.
var errClosed = errors.New("instrument events: state closed")

// Limits that keep a corrupt file from asking for absurd allocations.
const (
	maxName    = 64 << 10
	maxPayload = 16 << 20
)

// arena stores names and payloads in 1 MiB chunks: no large copies while
// growing, no pointers for the garbage collector to scan. reset keeps the
// chunks for reuse, but those a memo of its Reuse shares (memo.chunks).
type arena struct {
	chunks [][]byte
	cur    int    // chunk being filled
	used   int64  // bytes allocated since reset
	re     *Reuse // where chunks come from and go back to (nil: none)
}

const chunkSize = 1 << 20

func (a *arena) alloc(n int) (chunk, off uint32, buf []byte) {
	for a.cur < len(a.chunks) && cap(a.chunks[a.cur])-len(a.chunks[a.cur]) < n {
		a.cur++
	}
	if a.cur == len(a.chunks) {
		if n <= chunkSize {
			a.chunks = append(a.chunks, a.re.chunk())
		} else {
			a.chunks = append(a.chunks, make([]byte, 0, n))
		}
	}
	c := a.chunks[a.cur]
	o := len(c)
	a.chunks[a.cur] = c[:o+n]
	a.used += int64(n)
	return uint32(a.cur), uint32(o), a.chunks[a.cur][o : o+n]
}

func (a *arena) reset() {
	if a.re != nil {
		// A chunk a memo shares keeps what it holds (see Reuse.pins).
		a.chunks = a.re.unpinned(a.chunks)
	}
	for i := range a.chunks {
		a.chunks[i] = a.chunks[i][:0]
	}
	a.cur, a.used = 0, 0
}

// The state file.
//
// DATA/_state/instrument_events/<source>.state.zst is one compressed stream
// (an S2 stream for version 3, a zstd frame for versions 1 and 2) holding
//
//	magic "OPTLAKE-IEVSTATE" (16 bytes), uvarint format version (3)
//	string source                       (uvarint length + bytes)
//	string compared field signature     (names and types of the payload items)
//	byte has_snapshot, varint snapshot time (Unix ms)
//	per instrument, in instrument_name order (bytewise, names distinct):
//	    byte 1, string instrument_name, string payload
//	byte 0, uvarint count
//	"END", uint32 little-endian CRC-32C of every byte before "END"
//
// The count follows the entries so that a comparison can write the next
// state while it merges, without knowing the count in advance.
//
// The codec is chosen by measurement (BenchmarkStateCodec, the state of
// 1,000,000 instruments, 173 MB uncompressed): zstd at its fastest level
// took 0.70 s on 2 goroutines for 12.5 MB, S2 0.29 s for 23.2 MB (S2's
// better mode 0.40 s for 22.8 MB). The state is written once per snapshot
// and read twice (Load checks it, the next comparison reads it), and S2
// also decodes several times faster; the file stays a local or
// object-store file of the data directory, where 10 MB more per million
// instruments cost less than 0.4 CPU-s per snapshot. Its name keeps the
// .zst suffix of the documented layout.
//
// Older files are still read: the codec is told by the stream's first
// bytes (zstd's frame magic or S2's stream identifier) and must match the
// version. Version 2 (the same layout, zstd) is read as it is (the next
// comparison writes version 3); version 1 (count before the entries, in
// order of appearance, zstd) is sorted by Load into a version 3 state,
// which the next Save writes.
//
// The file is written to a hidden temporary file (".<name>.tmp-*", the
// pattern datadir.CleanTemp removes after a crash), fsynced, renamed over
// the old one and the folder fsynced, so a reader sees the old or the new
// state, never a mix.
const (
	fileMagic     = "OPTLAKE-IEVSTATE"
	fileVersion   = 3 // S2
	fileVersionV2 = 2 // zstd, same layout
	fileVersionV1 = 1 // zstd, count first, unsorted
	fileEnd       = "END"
)

// stateBlock is the S2 block size of the state file: blocks in flight on
// the writer's goroutines and the reader's buffers are a few of them, so
// they bound the memory a comparison holds for the state whatever its size
// (S2's default, 1 MiB, grew the live heap of TestBoundedMemory by 3 MB
// from 25k to 100k instruments).
const stateBlock = 256 << 10

// zstdMagic starts every zstd frame (versions 1 and 2 of the state file).
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// StatePath returns the state file of a source under dataDir:
// DATA/_state/instrument_events/<source>.state.zst. The source is escaped
// for the file name (bytes other than letters, digits, '-', '_' and a
// non-leading '.' become %XX), so distinct sources never share a file.
func StatePath(dataDir, source string) string {
	return filepath.Join(StateDir(dataDir), escapeName(source)+".state.zst")
}

// StateDir returns the folder of the state files under dataDir; it is also
// the right Options.TempDir for a comparison whose state is saved there.
func StateDir(dataDir string) string {
	return filepath.Join(dataDir, "_state", "instrument_events")
}

func escapeName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' && i > 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// tempPattern is the os.CreateTemp pattern of temporary files of source.
func tempPattern(source, kind string) string {
	return "." + escapeName(source) + "." + kind + ".tmp-*"
}

// Save writes the state to StatePath(dataDir, s.Source()), atomically
// replacing the previous file. The folder is created if missing. A state
// that Finish wrote to a temporary file in that folder is renamed into
// place; any other state is copied.
func (s *State) Save(dataDir string) (err error) {
	if s.source == "" {
		return errors.New("instrument events: save state: empty source")
	}
	final := StatePath(dataDir, s.source)
	wrap := func(err error) error { return fmt.Errorf("instrument events: save state %s: %w", final, err) }
	dir := filepath.Dir(final)
	if err := datadir.MkdirAll(dir, nil); err != nil {
		return wrap(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return wrap(errClosed)
	}
	if s.f != nil && s.temp && sameDir(filepath.Dir(s.path), dir) {
		if err := datadir.Publish(s.f, final); err != nil {
			return wrap(err)
		}
		s.path, s.temp = final, false
		return nil
	}
	var w *stateWriter
	if s.f != nil {
		w, err = createTemp(dir, s.source, "state.zst")
		if err == nil {
			_, err = io.Copy(w.f, io.NewSectionReader(s.f, 0, s.size))
		}
	} else {
		w, err = newStateWriter(dir, s.source, s.hasSnap, s.snapMs)
		for e := 0; err == nil && e < len(s.ents); e++ {
			err = w.add(s.name(e), s.payload(e))
		}
		if err == nil {
			err = w.finish()
		}
	}
	if err != nil {
		if w != nil {
			w.abort()
		}
		return wrap(err)
	}
	err = datadir.Publish(w.f, final)
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return wrap(err)
	}
	return nil
}

func sameDir(a, b string) bool {
	if a == b {
		return true
	}
	x, err1 := os.Stat(a)
	y, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(x, y)
}

// stateWriter writes a state file (or, via createTemp, any temporary file)
// to a hidden temporary file.
type stateWriter struct {
	f    *os.File
	path string
	zw   *s2.Writer
	w    *fileWriter
	n    int
	last []byte // the previous name: entries must come in order
}

func createTemp(dir, source, kind string) (*stateWriter, error) {
	if err := datadir.MkdirAll(dir, nil); err != nil {
		return nil, err
	}
	f, err := datadir.CreateTemp(dir, tempPattern(source, kind))
	if err != nil {
		return nil, err
	}
	return &stateWriter{f: f, path: f.Name()}, nil
}

// newStateWriter starts a state file in dir; add the entries in name order,
// then finish (or abort).
func newStateWriter(dir, source string, hasSnap bool, snapMs int64) (*stateWriter, error) {
	w, err := createTemp(dir, source, "state.zst")
	if err != nil {
		return nil, err
	}
	// S2 (see the file format above for the measurement); its blocks are
	// compressed on 2 goroutines while the merge goes on.
	w.zw = s2.NewWriter(w.f, s2.WriterConcurrency(2), s2.WriterBlockSize(stateBlock))
	fw := &fileWriter{w: w.zw, buf: make([]byte, 0, 128<<10)}
	w.w = fw
	fw.bytes([]byte(fileMagic))
	fw.uvarint(fileVersion)
	fw.str(source)
	fw.str(fieldSignature)
	if hasSnap {
		fw.buf = append(fw.buf, 1)
	} else {
		fw.buf = append(fw.buf, 0)
	}
	fw.buf = binary.AppendVarint(fw.buf, snapMs)
	return w, nil
}

func (w *stateWriter) add(name, p []byte) error {
	if w.n > 0 && bytes.Compare(name, w.last) <= 0 {
		return fmt.Errorf("state entries out of order: %q after %q", name, w.last)
	}
	w.last = append(w.last[:0], name...)
	w.n++
	fw := w.w
	fw.buf = append(fw.buf, 1)
	fw.uvarint(uint64(len(name)))
	fw.buf = append(fw.buf, name...)
	fw.uvarint(uint64(len(p)))
	fw.bytes(p)
	return fw.err
}

// finish ends the file and closes the compressor (not the file).
func (w *stateWriter) finish() error {
	fw := w.w
	fw.buf = append(fw.buf, 0)
	fw.uvarint(uint64(w.n))
	fw.flush()
	if fw.err == nil {
		_, fw.err = w.zw.Write(binary.LittleEndian.AppendUint32([]byte(fileEnd), fw.crc))
	}
	if fw.err != nil {
		return fw.err
	}
	return w.zw.Close()
}

// abort removes the temporary file.
func (w *stateWriter) abort() {
	if w.zw != nil {
		w.zw.Close() // only to release its goroutines: the file goes
	}
	w.f.Close()
	os.Remove(w.path)
}

// state turns the finished file into a file-backed State owning it.
func (w *stateWriter) state(source string, hasSnap bool, snapMs int64) (*State, error) {
	fi, err := w.f.Stat()
	if err != nil {
		w.abort()
		return nil, err
	}
	st := &State{source: source, hasSnap: hasSnap, snapMs: snapMs, n: w.n, f: w.f, size: fi.Size(), path: w.path, temp: true}
	// A state dropped without Close must not leave its temporary file
	// behind (once saved or closed, nothing has that name any more).
	runtime.AddCleanup(st, func(path string) { os.Remove(path) }, w.path)
	return st, nil
}

// fileWriter buffers the uncompressed stream and keeps its CRC.
type fileWriter struct {
	w   io.Writer
	buf []byte
	crc uint32
	err error
}

func (w *fileWriter) flush() {
	if w.err == nil && len(w.buf) > 0 {
		w.crc = crc32.Update(w.crc, crcTable, w.buf)
		_, w.err = w.w.Write(w.buf)
	}
	w.buf = w.buf[:0]
}

func (w *fileWriter) bytes(b []byte) {
	w.buf = append(w.buf, b...)
	if len(w.buf) >= 64<<10 {
		w.flush()
	}
}

func (w *fileWriter) uvarint(v uint64) { w.buf = binary.AppendUvarint(w.buf, v) }

func (w *fileWriter) str(s string) {
	w.uvarint(uint64(len(s)))
	w.buf = append(w.buf, s...)
	if len(w.buf) >= 64<<10 {
		w.flush()
	}
}

// Load reads the state of source from StatePath(dataDir, source). A missing
// file gives the empty state (NewState). The whole file is checked (CRC,
// order, payloads) without holding it in memory: a file that cannot be
// decoded gives an error wrapping ErrCorruptState; other I/O failures are
// returned as they are. The returned state reads the file it was loaded
// from (kept open, so a later Save replacing it does not disturb it): Close
// it when done. A version 1 file is sorted into a temporary file in the same
// folder, which the next Save renames into place.
func Load(dataDir, source string) (*State, error) {
	if source == "" {
		return nil, errors.New("instrument events: load state: empty source")
	}
	path := StatePath(dataDir, source)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return NewState(source), nil
	}
	if err != nil {
		return nil, fmt.Errorf("instrument events: load state: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("instrument events: load state: %w", err)
	}
	s := &State{source: source, f: f, size: fi.Size(), path: path}
	c, err := s.openFile()
	if err == nil {
		for c.next() {
		}
		err = c.err
		c.close()
	}
	if err != nil {
		f.Close()
		return nil, loadError(path, err)
	}
	if c.version == fileVersionV1 {
		defer f.Close()
		st, err := loadV1(s, filepath.Dir(path))
		if err != nil {
			return nil, loadError(path, err)
		}
		return st, nil
	}
	s.hasSnap, s.snapMs, s.n = c.hasSnap, c.snapMs, c.count
	return s, nil
}

func loadError(path string, err error) error {
	var ioErr *os.PathError
	if errors.As(err, &ioErr) {
		return fmt.Errorf("instrument events: load state %s: %w", path, err)
	}
	return fmt.Errorf("%w %s: %w (rebuild the state from the last instruments snapshot, or delete the file to start the history over)", ErrCorruptState, path, err)
}

// loadV1 sorts a version 1 file (checked) into a version 3 state.
func loadV1(s *State, tempDir string) (*State, error) {
	c, err := s.openFile()
	if err != nil {
		return nil, err
	}
	defer c.close()
	srt := newSorter(s.source, defaultMemBytes, tempDir, nil)
	defer srt.close()
	for c.next() {
		if err := srt.add(string(c.nm), c.pl); err != nil {
			return nil, err
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	st, err := srt.state(c.hasSnap, c.snapMs)
	if err != nil {
		return nil, err
	}
	if st.n != c.count {
		st.Close()
		return nil, fmt.Errorf("%d instruments, %d distinct: an instrument appears twice", c.count, st.n)
	}
	return st, nil
}

// fileReader is a buffered reader over the uncompressed stream that keeps
// the CRC of the bytes consumed so far.
type fileReader struct {
	r      io.Reader
	buf    []byte
	pos    int // next byte to consume
	end    int // end of buffered data
	crcPos int // buf[crcPos:pos] is consumed but not yet in crc
	crc    uint32
	eof    bool
}

func newFileReader(r io.Reader) *fileReader {
	return &fileReader{r: r, buf: make([]byte, 256<<10)}
}

// fill reads more data; io.ErrUnexpectedEOF when the stream has ended.
func (r *fileReader) fill() error {
	r.crc = crc32.Update(r.crc, crcTable, r.buf[r.crcPos:r.pos])
	r.end = copy(r.buf, r.buf[r.pos:r.end])
	r.pos, r.crcPos = 0, 0
	for !r.eof {
		n, err := r.r.Read(r.buf[r.end:])
		r.end += n
		if errors.Is(err, io.EOF) {
			r.eof = true
		} else if err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
	}
	return io.ErrUnexpectedEOF
}

// sum returns the CRC of every byte consumed so far.
func (r *fileReader) sum() uint32 {
	r.crc = crc32.Update(r.crc, crcTable, r.buf[r.crcPos:r.pos])
	r.crcPos = r.pos
	return r.crc
}

func (r *fileReader) ReadByte() (byte, error) {
	if r.pos == r.end {
		if err := r.fill(); err != nil {
			return 0, err
		}
	}
	c := r.buf[r.pos]
	r.pos++
	return c, nil
}

// full fills dst.
func (r *fileReader) full(dst []byte) error {
	for len(dst) > 0 {
		if r.pos == r.end {
			if err := r.fill(); err != nil {
				return err
			}
		}
		n := copy(dst, r.buf[r.pos:r.end])
		r.pos += n
		dst = dst[n:]
	}
	return nil
}

// atEOF reports whether the stream has no more bytes.
func (r *fileReader) atEOF() (bool, error) {
	if r.pos < r.end {
		return false, nil
	}
	err := r.fill()
	if err == io.ErrUnexpectedEOF {
		return true, nil
	}
	return false, err
}

func (r *fileReader) uvarint() (uint64, error) { return binary.ReadUvarint(r) }

// length reads a uvarint length no larger than limit.
func (r *fileReader) length(limit int, what string) (int, error) {
	n, err := r.uvarint()
	if err != nil {
		return 0, fmt.Errorf("%s length: %w", what, err)
	}
	if n > uint64(limit) {
		return 0, fmt.Errorf("%s length %d exceeds %d", what, n, limit)
	}
	return int(n), nil
}

func (r *fileReader) str(limit int, what string) (string, error) {
	n, err := r.length(limit, what)
	if err != nil {
		return "", err
	}
	b := make([]byte, n)
	if err := r.full(b); err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	return string(b), nil
}

// fileCursor reads the entries of a state file in file order, checking
// them (payloads, order and uniqueness for versions 2 and 3, the count, the CRC
// and the end of the stream) as it goes; the first problem stops it with
// err set.
type fileCursor struct {
	release func()
	r       *fileReader
	version uint64
	hasSnap bool
	snapMs  int64
	left    uint64 // version 1: entries still to read
	count   int    // entries read
	nm, pl  []byte
	prev    []byte // versions 2 and 3: the previous name
	done    bool
	err     error
	// lazy: payloads are not checked as they are read (Load did, and the
	// file is held open); a reader checks the payloads it decodes (check).
	lazy bool
}

// openFile starts reading the state's file and checks its header.
func (s *State) openFile() (*fileCursor, error) {
	s.mu.Lock()
	f, size, closed := s.f, s.size, s.closed
	s.mu.Unlock()
	if closed || f == nil {
		return nil, errClosed
	}
	src := io.NewSectionReader(f, 0, size)
	var head [4]byte
	if _, err := src.ReadAt(head[:], 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	var (
		r      io.Reader
		closer func()
		isZstd = bytes.Equal(head[:], zstdMagic)
	)
	if isZstd {
		// A small state (the realistic listing's is ~40 KB) is decoded in
		// the caller's goroutine: the concurrent decoder's buffers (4 MB)
		// cost more than its second goroutine saves; a large one gets
		// both cores.
		conc := 1
		if size > 4<<20 {
			conc = 2
		}
		zr, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(conc), zstd.WithDecoderLowmem(true))
		if err != nil {
			return nil, err
		}
		r, closer = zr, zr.Close
	} else {
		r, closer = s2.NewReader(src, s2.ReaderMaxBlockSize(stateBlock)), func() {}
	}
	c := &fileCursor{release: closer, r: newFileReader(r)}
	if err := c.header(s.source); err != nil {
		closer()
		return nil, err
	}
	if (c.version == fileVersion) == isZstd {
		closer()
		if isZstd {
			return nil, fmt.Errorf("format version %d in a zstd stream (version 3 is S2)", c.version)
		}
		return nil, fmt.Errorf("format version %d in an S2 stream (versions 1 and 2 are zstd)", c.version)
	}
	return c, nil
}

func (c *fileCursor) header(source string) error {
	r := c.r
	magic := make([]byte, len(fileMagic))
	if err := r.full(magic); err != nil {
		return fmt.Errorf("header: %w", err)
	}
	if string(magic) != fileMagic {
		return errors.New("not an instrument events state file (bad magic)")
	}
	v, err := r.uvarint()
	if err != nil {
		return fmt.Errorf("version: %w", err)
	}
	if v < fileVersionV1 || v > fileVersion {
		return fmt.Errorf("format version %d, this build reads %d to %d", v, fileVersionV1, fileVersion)
	}
	c.version = v
	src, err := r.str(maxName, "source")
	if err != nil {
		return err
	}
	if src != source {
		return fmt.Errorf("file holds source %q, expected %q", src, source)
	}
	sig, err := r.str(maxPayload, "field signature")
	if err != nil {
		return err
	}
	if sig != fieldSignature {
		return fmt.Errorf("file was written for compared fields %q, this build compares %q", sig, fieldSignature)
	}
	hs, err := r.ReadByte()
	if err != nil {
		return fmt.Errorf("header: %w", err)
	}
	if hs > 1 {
		return fmt.Errorf("bad has_snapshot byte %d", hs)
	}
	c.hasSnap = hs == 1
	if c.snapMs, err = binary.ReadVarint(r); err != nil {
		return fmt.Errorf("snapshot time: %w", err)
	}
	if v == fileVersionV1 {
		if c.left, err = r.uvarint(); err != nil {
			return fmt.Errorf("count: %w", err)
		}
		if c.left >= math.MaxUint32-1 {
			return fmt.Errorf("count %d too large", c.left)
		}
		if c.left > 0 && !c.hasSnap {
			return fmt.Errorf("%d instruments but no snapshot time", c.left)
		}
	}
	return nil
}

func (c *fileCursor) name() []byte    { return c.nm }
func (c *fileCursor) payload() []byte { return c.pl }
func (c *fileCursor) close()          { c.release() }
func (c *fileCursor) error() error    { return c.err }

func (c *fileCursor) next() bool {
	if c.done {
		return false
	}
	more, err := c.entry()
	if err != nil {
		c.err, c.done = err, true
		return false
	}
	if !more {
		c.done = true
		if err := c.trailer(); err != nil {
			c.err = err
		}
		return false
	}
	c.count++
	return true
}

// entry reads the next entry; false at the end of the entries.
func (c *fileCursor) entry() (bool, error) {
	r, i := c.r, c.count
	if c.version == fileVersionV1 {
		if c.left == 0 {
			return false, nil
		}
		c.left--
	} else {
		m, err := r.ReadByte()
		if err != nil {
			return false, fmt.Errorf("instrument %d: %w", i, err)
		}
		switch m {
		case 0:
			n, err := r.uvarint()
			if err != nil {
				return false, fmt.Errorf("count: %w", err)
			}
			if n != uint64(c.count) {
				return false, fmt.Errorf("count %d, but %d instruments", n, c.count)
			}
			return false, nil
		case 1:
		default:
			return false, fmt.Errorf("instrument %d: bad entry marker %d", i, m)
		}
		if !c.hasSnap {
			return false, errors.New("instruments but no snapshot time")
		}
		c.prev = append(c.prev[:0], c.nm...)
	}
	nl, err := r.length(maxName, "instrument name")
	if err != nil {
		return false, fmt.Errorf("instrument %d: %w", i, err)
	}
	c.nm = grow(c.nm, nl)
	if err := r.full(c.nm); err != nil {
		return false, fmt.Errorf("instrument %d: name: %w", i, err)
	}
	if c.version != fileVersionV1 && i > 0 {
		switch cmp := bytes.Compare(c.nm, c.prev); {
		case cmp == 0:
			return false, fmt.Errorf("instrument %q appears twice", c.nm)
		case cmp < 0:
			return false, fmt.Errorf("instrument %q after %q: not in name order", c.nm, c.prev)
		}
	}
	pl, err := r.length(maxPayload, "payload")
	if err != nil {
		return false, fmt.Errorf("instrument %d (%q): %w", i, c.nm, err)
	}
	c.pl = grow(c.pl, pl)
	if err := r.full(c.pl); err != nil {
		return false, fmt.Errorf("instrument %d (%q): payload: %w", i, c.nm, err)
	}
	if !c.lazy {
		if err := c.check(); err != nil {
			return false, err
		}
	}
	return true, nil
}

// check validates the current payload.
func (c *fileCursor) check() error {
	if err := validPayload(c.pl); err != nil {
		return fmt.Errorf("instrument %q: %w", c.nm, err)
	}
	return nil
}

func (c *fileCursor) trailer() error {
	r := c.r
	want := r.sum()
	var end [len(fileEnd) + 4]byte
	if err := r.full(end[:]); err != nil {
		return fmt.Errorf("trailer: %w", err)
	}
	if string(end[:len(fileEnd)]) != fileEnd {
		return errors.New("bad trailer")
	}
	if got := binary.LittleEndian.Uint32(end[len(fileEnd):]); got != want {
		return fmt.Errorf("checksum mismatch (file %08x, computed %08x)", got, want)
	}
	if eof, err := r.atEOF(); err != nil {
		return err
	} else if !eof {
		return errors.New("data after the trailer")
	}
	return nil
}

// grow returns s resized to n elements (contents undefined).
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, max(n, 2*cap(s)))
	}
	return s[:n]
}
