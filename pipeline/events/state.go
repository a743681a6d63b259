package events

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/maphash"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
)

// State is the last known instruments of one source: for each instrument its
// name and a payload (the compared fields and the expiration time, see
// fields.go), plus the time of the snapshot they come from. A State is
// immutable once returned by NewState, Load, Builder.State or Differ.Finish
// and safe for concurrent reads.
type State struct {
	source  string
	hasSnap bool
	snapMs  int64

	ar   arena
	ents []entry // in order of first appearance in the snapshot (or the file)
	idx  index
}

// entry locates one instrument's name followed by its payload in the arena.
type entry struct {
	chunk, off uint32
	nlen, plen uint32
}

// NewState returns the empty state of a source: no snapshot yet, so the next
// comparison lists every instrument with initial = true.
func NewState(source string) *State {
	s := &State{source: source}
	s.idx.init(maphash.MakeSeed(), 0)
	return s
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
func (s *State) Len() int { return len(s.ents) }

// MemBytes estimates the memory the state holds (arena, entries, index).
func (s *State) MemBytes() int64 {
	n := int64(cap(s.ents))*16 + int64(len(s.idx.slots))*8
	for _, c := range s.ar.chunks {
		n += int64(cap(c))
	}
	return n
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

// find returns the entry named name (whose hash is h), or -1.
func (s *State) find(h uint64, name string) int {
	return s.idx.find(s, h, name)
}

// append adds an entry (not indexed: Builder.index does that).
func (s *State) append(name string, p []byte) error {
	if len(s.ents) >= math.MaxUint32-1 {
		return errors.New("too many instruments in one snapshot")
	}
	en, err := s.put(name, p)
	if err != nil {
		return err
	}
	s.ents = append(s.ents, en)
	return nil
}

func (s *State) put(name string, p []byte) (entry, error) {
	if len(name) > maxName || len(p) > maxPayload {
		return entry{}, fmt.Errorf("instrument %.64q: name or values too long", name)
	}
	c, off, buf := s.ar.alloc(len(name) + len(p))
	copy(buf[copy(buf, name):], p)
	return entry{chunk: c, off: off, nlen: uint32(len(name)), plen: uint32(len(p))}, nil
}

// Limits that keep a corrupt file from asking for absurd allocations.
const (
	maxName    = 64 << 10
	maxPayload = 16 << 20
)

// arena stores names and payloads in 1 MiB chunks: no large copies while
// growing, no pointers for the garbage collector to scan.
type arena struct {
	chunks [][]byte
}

const chunkSize = 1 << 20

func (a *arena) alloc(n int) (chunk, off uint32, buf []byte) {
	if len(a.chunks) == 0 || cap(a.chunks[len(a.chunks)-1])-len(a.chunks[len(a.chunks)-1]) < n {
		a.chunks = append(a.chunks, make([]byte, 0, max(chunkSize, n)))
	}
	i := len(a.chunks) - 1
	c := a.chunks[i]
	o := len(c)
	a.chunks[i] = c[:o+n]
	return uint32(i), uint32(o), a.chunks[i][o : o+n]
}

// index is an open-addressing hash table (linear probing) from names to
// entries. A slot holds the top 32 bits of the name's hash (which also give
// its home position) and the entry number + 1; 0 is an empty slot. Load
// factor stays at or below 3/4.
type index struct {
	seed  maphash.Seed
	slots []uint64
	bits  uint // log2(len(slots))
	n     int
}

func (x *index) init(seed maphash.Seed, hint int) {
	x.seed = seed
	x.bits = 4
	for (1<<x.bits)*3/4 < hint {
		x.bits++
	}
	x.slots = make([]uint64, 1<<x.bits)
	x.n = 0
}

func (x *index) hash(name string) uint64 { return maphash.String(x.seed, name) }

func (x *index) hashBytes(name []byte) uint64 { return maphash.Bytes(x.seed, name) }

func (x *index) find(s *State, h uint64, name string) int {
	tag := uint32(h >> 32)
	mask := len(x.slots) - 1
	for pos := int(tag >> (32 - x.bits)); ; pos = (pos + 1) & mask {
		v := x.slots[pos]
		if v == 0 {
			return -1
		}
		if uint32(v>>32) == tag {
			if e := int(uint32(v)) - 1; string(s.name(e)) == name {
				return e
			}
		}
	}
}

// findBytes is find for a name held as bytes.
func (x *index) findBytes(s *State, h uint64, name []byte) int {
	tag := uint32(h >> 32)
	mask := len(x.slots) - 1
	for pos := int(tag >> (32 - x.bits)); ; pos = (pos + 1) & mask {
		v := x.slots[pos]
		if v == 0 {
			return -1
		}
		if uint32(v>>32) == tag {
			if e := int(uint32(v)) - 1; string(s.name(e)) == string(name) {
				return e
			}
		}
	}
}

func (x *index) insert(h uint64, e int) {
	if (x.n+1)*4 > len(x.slots)*3 {
		x.grow()
	}
	x.place(uint64(uint32(h>>32))<<32 | uint64(e+1))
	x.n++
}

func (x *index) place(v uint64) {
	mask := len(x.slots) - 1
	pos := int(uint32(v>>32) >> (32 - x.bits))
	for x.slots[pos] != 0 {
		pos = (pos + 1) & mask
	}
	x.slots[pos] = v
}

func (x *index) grow() {
	old := x.slots
	x.bits++
	x.slots = make([]uint64, 1<<x.bits)
	for _, v := range old {
		if v != 0 {
			x.place(v)
		}
	}
}

// The state file.
//
// DATA/_state/instrument_events/<source>.state.zst is one zstd frame holding
//
//	magic "OPTLAKE-IEVSTATE" (16 bytes), uvarint format version (1)
//	string source                       (uvarint length + bytes)
//	string compared field signature     (names and types of the payload items)
//	byte has_snapshot, varint snapshot time (Unix ms)
//	uvarint count
//	count × (string instrument_name, string payload)
//	"END", uint32 little-endian CRC-32C of every byte before "END"
//
// The file is written to a hidden temporary file in the same folder, fsynced,
// renamed over the old one and the folder fsynced, so a reader sees the old
// or the new state, never a mix.
const (
	fileMagic   = "OPTLAKE-IEVSTATE"
	fileVersion = 1
	fileEnd     = "END"
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// StatePath returns the state file of a source under dataDir:
// DATA/_state/instrument_events/<source>.state.zst. The source is escaped
// for the file name (bytes other than letters, digits, '-', '_' and a
// non-leading '.' become %XX), so distinct sources never share a file.
func StatePath(dataDir, source string) string {
	return filepath.Join(dataDir, "_state", "instrument_events", escapeName(source)+".state.zst")
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

// Save writes the state to StatePath(dataDir, s.Source()), atomically
// replacing the previous file. The folder is created if missing.
func (s *State) Save(dataDir string) (err error) {
	if s.source == "" {
		return errors.New("instrument events: save state: empty source")
	}
	final := StatePath(dataDir, s.source)
	wrap := func(err error) error { return fmt.Errorf("instrument events: save state %s: %w", final, err) }
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return wrap(err)
	}
	f, err := os.CreateTemp(filepath.Dir(final), "."+filepath.Base(final)+".tmp-*")
	if err != nil {
		return wrap(err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	zw, err := zstd.NewWriter(f, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		return wrap(err)
	}
	w := &fileWriter{w: zw, buf: make([]byte, 0, 128<<10)}
	w.bytes([]byte(fileMagic))
	w.uvarint(fileVersion)
	w.str(s.source)
	w.str(fieldSignature)
	if s.hasSnap {
		w.buf = append(w.buf, 1)
	} else {
		w.buf = append(w.buf, 0)
	}
	w.buf = binary.AppendVarint(w.buf, s.snapMs)
	w.uvarint(uint64(len(s.ents)))
	for e := range s.ents {
		name, p := s.name(e), s.payload(e)
		w.uvarint(uint64(len(name)))
		w.buf = append(w.buf, name...)
		w.uvarint(uint64(len(p)))
		w.bytes(p)
	}
	w.flush()
	if w.err == nil {
		_, w.err = zw.Write(binary.LittleEndian.AppendUint32([]byte(fileEnd), w.crc))
	}
	if w.err != nil {
		zw.Close()
		return wrap(w.err)
	}
	if err := zw.Close(); err != nil {
		return wrap(err)
	}
	if err := f.Sync(); err != nil {
		return wrap(err)
	}
	if err := f.Close(); err != nil {
		return wrap(err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return wrap(err)
	}
	if err := syncDir(filepath.Dir(final)); err != nil {
		return wrap(err)
	}
	return nil
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

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Load reads the state of source from StatePath(dataDir, source). A missing
// file gives the empty state (NewState). A file that cannot be decoded gives
// an error wrapping ErrCorruptState; other I/O failures are returned as they
// are.
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
	defer f.Close()
	zr, err := zstd.NewReader(f, zstd.WithDecoderConcurrency(2))
	if err != nil {
		return nil, fmt.Errorf("instrument events: load state %s: %w", path, err)
	}
	defer zr.Close()
	s, err := readState(newFileReader(zr), source)
	if err != nil {
		var ioErr *os.PathError
		if errors.As(err, &ioErr) {
			return nil, fmt.Errorf("instrument events: load state %s: %w", path, err)
		}
		return nil, fmt.Errorf("%w %s: %w (rebuild the state from the last instruments snapshot, or delete the file to start the history over)", ErrCorruptState, path, err)
	}
	return s, nil
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

func readState(r *fileReader, source string) (*State, error) {
	magic := make([]byte, len(fileMagic))
	if err := r.full(magic); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if string(magic) != fileMagic {
		return nil, errors.New("not an instrument events state file (bad magic)")
	}
	v, err := r.uvarint()
	if err != nil {
		return nil, fmt.Errorf("version: %w", err)
	}
	if v != fileVersion {
		return nil, fmt.Errorf("format version %d, this build reads %d", v, fileVersion)
	}
	src, err := r.str(maxName, "source")
	if err != nil {
		return nil, err
	}
	if src != source {
		return nil, fmt.Errorf("file holds source %q, expected %q", src, source)
	}
	sig, err := r.str(maxPayload, "field signature")
	if err != nil {
		return nil, err
	}
	if sig != fieldSignature {
		return nil, fmt.Errorf("file was written for compared fields %q, this build compares %q", sig, fieldSignature)
	}
	s := &State{source: source}
	hs, err := r.ReadByte()
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if hs > 1 {
		return nil, fmt.Errorf("bad has_snapshot byte %d", hs)
	}
	s.hasSnap = hs == 1
	if s.snapMs, err = binary.ReadVarint(r); err != nil {
		return nil, fmt.Errorf("snapshot time: %w", err)
	}
	count, err := r.uvarint()
	if err != nil {
		return nil, fmt.Errorf("count: %w", err)
	}
	if count >= math.MaxUint32-1 {
		return nil, fmt.Errorf("count %d too large", count)
	}
	if count > 0 && !s.hasSnap {
		return nil, fmt.Errorf("%d instruments but no snapshot time", count)
	}
	s.ents = make([]entry, 0, min(count, 1<<22))
	s.idx.init(maphash.MakeSeed(), int(min(count, 1<<22)))
	var nb []byte
	for i := uint64(0); i < count; i++ {
		nl, err := r.length(maxName, "instrument name")
		if err != nil {
			return nil, fmt.Errorf("instrument %d: %w", i, err)
		}
		nb = append(nb[:0], make([]byte, nl)...)
		if err := r.full(nb); err != nil {
			return nil, fmt.Errorf("instrument %d: name: %w", i, err)
		}
		pl, err := r.length(maxPayload, "payload")
		if err != nil {
			return nil, fmt.Errorf("instrument %d (%q): %w", i, nb, err)
		}
		c, off, buf := s.ar.alloc(nl + pl)
		copy(buf, nb)
		if err := r.full(buf[nl:]); err != nil {
			return nil, fmt.Errorf("instrument %d (%q): payload: %w", i, nb, err)
		}
		if err := validPayload(buf[nl:]); err != nil {
			return nil, fmt.Errorf("instrument %d (%q): %w", i, nb, err)
		}
		h := s.idx.hashBytes(buf[:nl])
		if s.idx.findBytes(s, h, buf[:nl]) >= 0 {
			return nil, fmt.Errorf("instrument %q appears twice", nb)
		}
		s.ents = append(s.ents, entry{chunk: c, off: off, nlen: uint32(nl), plen: uint32(pl)})
		s.idx.insert(h, len(s.ents)-1)
	}
	want := r.sum()
	var end [len(fileEnd) + 4]byte
	if err := r.full(end[:]); err != nil {
		return nil, fmt.Errorf("trailer: %w", err)
	}
	if string(end[:len(fileEnd)]) != fileEnd {
		return nil, errors.New("bad trailer")
	}
	if got := binary.LittleEndian.Uint32(end[len(fileEnd):]); got != want {
		return nil, fmt.Errorf("checksum mismatch (file %08x, computed %08x)", got, want)
	}
	if eof, err := r.atEOF(); err != nil {
		return nil, err
	} else if !eof {
		return nil, errors.New("data after the trailer")
	}
	return s, nil
}
