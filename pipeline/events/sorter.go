package events

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"

	"github.com/optlake/optlake/internal/datadir"
)

// The rows of a snapshot are sorted by instrument_name with an external
// sort: a sorter keeps them in a bounded buffer; when the buffer is full it
// sorts it and spills it as a sorted run to an unlinked temporary file. The
// runs and what is left in the buffer are then merged (a k-way merge, the
// later run winning on equal names), which yields the instruments in name
// order, ready to be merged with the previous state. A snapshot that fits in
// the buffer never touches the disk.

// defaultMemBytes bounds a sorter's buffer (names, payloads and
// rowBookkeeping bytes per row).
const defaultMemBytes = 8 << 20

const entrySize = 24 // unsafe.Sizeof(entry{})

// rowBookkeeping is a buffer's memory per row besides its name and payload
// while it sorts: two entries (the rows' and the sorted ones sort gathers)
// and two sort keys (sortKeys' two arrays). Not counted: a replay's row
// ids with Reuse (ids and the sorted ids, 16 bytes a row), a sixth
// of this.
const rowBookkeeping = 2*entrySize + 2*sortKeySize

// cursor iterates entries in name order (names distinct). name and payload
// are valid until the next call of next.
type cursor interface {
	next() bool
	name() []byte
	payload() []byte
	error() error // why next returned false, nil at the end
	close()
}

type sorter struct {
	source string
	budget int64  // per buffer: half of the memory bound
	dir    string // for the runs
	buffer        // rows being added, in arrival order until sorted
	spare  *buffer
	runs   []*runFile
	file   *spillFile // holds the runs (nil until the first spill)
	// bg reports the end of a spill running in the background (nil when
	// none is); while one runs, only it touches spare and runs.
	bg  chan error
	err error // a failed spill: the rows are incomplete
}

// buffer holds rows in memory.
type buffer struct {
	ar   arena
	ents []entry
	// ids, when not empty, holds each entry's row identity (see rowID),
	// in step with ents; empty when no row has one.
	ids []rowID
	// keys and keys2 are sort's working memory, kept for the next sort,
	// and so are ents2 and ids2 (the entries and ids of the last sort's
	// input, which it gathers from them in order).
	keys, keys2 []sortKey
	ents2       []entry
	ids2        []rowID
}

// runFile is a sorted run: n × (uvarint name length, uvarint payload
// length, name, payload), names distinct and in order, at off in the
// sorter's spill file. That one file holds the sorter's runs, one after
// the other; a compaction writes its run to a new file and drops the old
// one. A spill file is unlinked as soon as it is created, so a crash leaves
// nothing behind.
type runFile struct {
	f    *spillFile
	off  int64
	n    int
	size int64
	w    *io.OffsetWriter // while it is written
}

// spillFile is the sorter's file of runs.
type spillFile struct {
	f    *os.File
	path string // still to remove when unlinking failed (e.g. Windows)
	end  int64  // where the next run starts
}

// newSorter returns a sorter holding at most about budget bytes of rows in
// memory: two buffers of half of it, one filling while the other is
// sorted and written in the background.
func newSorter(source string, budget int, dir string, re *Reuse) *sorter {
	if budget <= 0 {
		budget = defaultMemBytes
	}
	if dir == "" {
		dir = os.TempDir()
	}
	return &sorter{source: source, budget: max(int64(budget)/2, 1), dir: dir, buffer: newRowBuffer(re)}
}

// add copies a row; a later row of the same name replaces an earlier one.
func (s *sorter) add(name string, p []byte) error {
	if s.err != nil {
		return s.err
	}
	if len(name) > maxName || len(p) > maxPayload {
		return fmt.Errorf("instrument %.64q: name or values too long", name)
	}
	c, off, buf := s.ar.alloc(len(name) + len(p))
	copy(buf[copy(buf, name):], p)
	s.keys = append(s.keys, rowKey(buf[:len(name)], len(s.ents)))
	s.ents = append(s.ents, entry{key: nameKey(name), chunk: c, off: off, nlen: uint32(len(name)), plen: uint32(len(p))})
	if len(s.ids) > 0 {
		s.ids = append(s.ids, 0)
	}
	if s.ar.used+rowBookkeeping*int64(len(s.ents)) >= s.budget || len(s.ents) >= math.MaxUint32-1 {
		return s.spill()
	}
	return nil
}

// allocRows adds n rows (n <= encodeBlock, together at most chunkSize
// bytes unless n == 1, so that the span's offsets fit in uint32) as one
// span of the arena: row j is the name of row lo+j of the string column
// name followed by size[j] bytes of payload. With a memo old, each row j
// with at[j] >= 0 repeats memo row at[j] (the same name and payload): it
// is copied from the memo whole, a run of rows that repeats consecutive
// memo rows in one copy (the memo's rows of one span of its chunks, laid
// out as here), and pos[j] is set past its payload; of every other
// row (all when old is nil) only the name is written, and the caller
// writes its payload into the returned span before the next settle,
// starting at pos[j] (set here). Rows so added count towards the
// buffer's bound at settle, not at once: a caller adds a block of rows,
// writes them, then settles (which may spill). The caller checks the
// lengths (maxName, maxPayload). ids (nil: none) are the rows' identities
// (rowID). allocRows returns the span (in the chunk of the rows' entries).
func (s *sorter) allocRows(n int, name *column, lo int, size, pos *[encodeBlock]uint32, ids *[encodeBlock]rowID, old *memo, at *[encodeBlock]int32) []byte {
	total := 0
	for j := 0; j < n; j++ {
		total += int(name.offs[lo+j+1]-name.offs[lo+j]) + int(size[j])
	}
	c, off, buf := s.ar.alloc(total)
	p := uint32(0)
	for j := 0; j < n; {
		if old != nil && at[j] >= 0 {
			k := int(at[j])
			first := &old.rows[k]
			end := first.off + first.nlen + first.plen
			z := j + 1
			for z < n && int(at[z]) == k+z-j {
				// the memo's next row, where its block's span goes on
				if r := &old.rows[k+z-j]; r.chunk != first.chunk || r.off != end {
					break
				}
				end += old.rows[k+z-j].nlen + old.rows[k+z-j].plen
				z++
			}
			rows := old.rows[k : k+z-j]
			p0 := p - first.off
			p += uint32(copy(buf[p:], old.chunks[first.chunk][first.off:end]))
			for t := range rows {
				r := &rows[t]
				s.keys = append(s.keys, sortKey{k1: r.k1, k2: r.k2, k3: r.k3, i: uint32(len(s.ents))})
				s.ents = append(s.ents, entry{key: r.k1, chunk: c, off: off + p0 + r.off, nlen: r.nlen, plen: r.plen})
				pos[j+t] = p0 + r.off + r.nlen + r.plen
			}
			j = z
			continue
		}
		nm := name.strAt(lo + j)
		nl := uint32(copy(buf[p:], nm))
		k := rowKey(nm, len(s.ents))
		s.keys = append(s.keys, k)
		s.ents = append(s.ents, entry{key: k.k1, chunk: c, off: off + p, nlen: nl, plen: size[j]})
		pos[j] = p + nl
		p += nl + size[j]
		j++
	}
	switch {
	case ids != nil:
		if len(s.ids) < len(s.ents)-n {
			s.ids = append(s.ids, make([]rowID, len(s.ents)-n-len(s.ids))...)
		}
		s.ids = append(s.ids, ids[:n]...)
	case len(s.ids) > 0:
		s.ids = append(s.ids, make([]rowID, n)...)
	}
	return buf
}

// settle spills the buffer when the rows added since the last spill reach
// its bound.
func (s *sorter) settle() error {
	if s.err != nil {
		return s.err
	}
	if s.ar.used+rowBookkeeping*int64(len(s.ents)) >= s.budget || len(s.ents) >= math.MaxUint32-encodeBlock-1 {
		return s.spill()
	}
	return nil
}

// wait waits for the background spill, if any, and returns the sorter's
// error.
func (s *sorter) wait() error {
	if s.bg != nil {
		if err := <-s.bg; err != nil && s.err == nil {
			s.err = err
		}
		s.bg = nil
	}
	return s.err
}

// spill hands the buffer to a background goroutine that writes it as a
// sorted run, and goes on with the spare buffer.
func (s *sorter) spill() error {
	if err := s.wait(); err != nil {
		return err
	}
	full := s.buffer
	if s.spare == nil {
		s.spare = &buffer{ar: arena{re: s.ar.re}}
	}
	s.buffer, *s.spare = *s.spare, buffer{}
	spare := s.spare
	s.bg = make(chan error, 1)
	go func() {
		err := s.writeRun(&full)
		full.ents, full.keys, full.ids = full.ents[:0], full.keys[:0], full.ids[:0]
		full.ar.reset()
		*spare = full // reused by the next spill
		s.bg <- err
	}()
	return nil
}

func (b *buffer) name(e *entry) []byte {
	return b.ar.chunks[e.chunk][e.off : e.off+e.nlen]
}

// sort sorts the buffer by name and keeps the last row of each name (rows
// arrive in arena order: chunk, then offset).
//
// The sort moves sortKeys, not entries: a name's first 20 bytes as
// big-endian words, taken as the row is added (its name is at hand then;
// reading it back from the arena while sorting misses the cache), sorted
// stably (equal keys keep their arrival order) by sortKeys. Names
// that share their first 20 bytes are then ordered among themselves by
// their whole name, and the entry's index (its arrival) breaks ties
// between equal names.
func (b *buffer) sort() {
	keys := b.keys // one per entry, added with it
	b.keys2 = grow(b.keys2, len(keys))
	keys, b.keys2 = sortKeys(keys, b.keys2)
	for lo := 0; lo < len(keys); {
		hi := lo + 1
		for hi < len(keys) && keys[hi].k1 == keys[lo].k1 && keys[hi].k2 == keys[lo].k2 && keys[hi].k3 == keys[lo].k3 {
			hi++
		}
		if hi-lo > 1 {
			b.sortTies(keys[lo:hi])
		}
		lo = hi
	}
	b.keys = keys
	// Gather the entries (and ids) in key order into the spare slices,
	// keeping the last row of each name: equal names are adjacent, in
	// arrival order.
	ents, ids := b.ents, b.ids
	out := grow(b.ents2, len(ents))
	var outIDs []rowID
	if len(ids) > 0 {
		outIDs = grow(b.ids2, len(ids))
	}
	n := 0
	for j := range keys {
		k := &keys[j]
		e := &ents[k.i]
		if j+1 < len(keys) && k.k1 == keys[j+1].k1 && k.k2 == keys[j+1].k2 && k.k3 == keys[j+1].k3 &&
			bytes.Equal(b.name(e), b.name(&ents[keys[j+1].i])) {
			continue // a later row of the same name follows
		}
		out[n] = *e
		if outIDs != nil {
			outIDs[n] = ids[k.i]
		}
		n++
	}
	b.ents, b.ents2 = out[:n], ents[:0]
	if outIDs != nil {
		b.ids, b.ids2 = outIDs[:n], ids[:0]
	}
	b.keys = keys[:0] // consumed
}

// sortTies orders keys of equal 20-byte prefixes, in arrival order, by
// their whole names (stable: equal names keep their arrival order).
func (b *buffer) sortTies(ks []sortKey) {
	if len(ks) > 12 {
		slices.SortStableFunc(ks, func(x, y sortKey) int {
			return bytes.Compare(b.name(&b.ents[x.i]), b.name(&b.ents[y.i]))
		})
		return
	}
	for i := 1; i < len(ks); i++ {
		k := ks[i]
		name := b.name(&b.ents[k.i])
		j := i
		for ; j > 0 && bytes.Compare(b.name(&b.ents[ks[j-1].i]), name) > 0; j-- {
			ks[j] = ks[j-1]
		}
		ks[j] = k
	}
}

// maxMergeRuns bounds the ascending runs sortKeys merges (at most
// log2(maxMergeRuns) passes over the keys); input with more is radix
// sorted.
const maxMergeRuns = 64

// sortKeys sorts keys by (k1, k2, k3), stably, using tmp (as long as
// keys), and returns the sorted slice and the other one. Listings arrive
// nearly in name order (a realistic listing of 3,000 instruments has about
// 30 descents, the 1M listing 178 in all), so it merges the input's
// ascending runs when there are few (a natural merge sort: a few passes,
// against the dozen or more of radixSort over keys whose bytes vary), and
// radix sorts the rest. Both are stable, so the result is the same.
func sortKeys(keys, tmp []sortKey) (sorted, other []sortKey) {
	var starts [maxMergeRuns + 1]int
	runs := 0
	for i := range keys {
		if i == 0 || keyLess(&keys[i], &keys[i-1]) {
			if runs == maxMergeRuns {
				return radixSort(keys, tmp)
			}
			starts[runs] = i
			runs++
		}
	}
	starts[runs] = len(keys)
	return mergeRuns(keys, tmp, starts[:runs+1])
}

// keyLess orders sort keys by their name bytes (not by i).
func keyLess(a, b *sortKey) bool {
	if a.k1 != b.k1 {
		return a.k1 < b.k1
	}
	if a.k2 != b.k2 {
		return a.k2 < b.k2
	}
	return a.k3 < b.k3
}

// mergeRuns sorts keys made of the ascending runs that start at
// starts[:len(starts)-1] (starts ends with len(keys)) by merging adjacent
// runs pairwise, pass after pass, between keys and tmp; of equal keys the
// earlier run's come first (stable). It returns the sorted slice and the
// other one; starts is overwritten.
func mergeRuns(keys, tmp []sortKey, starts []int) (sorted, other []sortKey) {
	tmp = tmp[:len(keys)]
	for len(starts) > 2 {
		n := 0 // runs after this pass
		for r := 0; r+1 < len(starts); r += 2 {
			lo, mid := starts[r], starts[r+1]
			if r+2 >= len(starts) { // an odd run out: copied as is
				copy(tmp[lo:mid], keys[lo:mid])
				starts[n] = lo
				n++
				continue
			}
			hi := starts[r+2]
			// The left run's keys up to the right run's first, and the
			// right run's from the left run's last on, are in place
			// already (runs of a listing hardly overlap): copied as
			// they are, only the overlap is merged key by key.
			i := lo + sort.Search(mid-lo, func(x int) bool { return keyLess(&keys[mid], &keys[lo+x]) })
			end := mid + sort.Search(hi-mid, func(x int) bool { return !keyLess(&keys[mid+x], &keys[mid-1]) })
			copy(tmp[lo:i], keys[lo:i])
			copy(tmp[end:hi], keys[end:hi])
			j, k := mid, i
			hi = end
			for i < mid && j < hi {
				if keyLess(&keys[j], &keys[i]) {
					tmp[k] = keys[j]
					j++
				} else {
					tmp[k] = keys[i]
					i++
				}
				k++
			}
			k += copy(tmp[k:], keys[i:mid])
			copy(tmp[k:], keys[j:hi])
			starts[n] = lo
			n++
		}
		starts[n] = len(keys)
		starts = starts[:n+1]
		keys, tmp = tmp, keys
	}
	return keys, tmp
}

// radixSort sorts keys by (k1, k2, k3), stably, using tmp (as long as
// keys): an LSD radix sort on the 20 bytes, skipping the bytes that are
// the same in every key (venue names share their first bytes). It returns the
// sorted slice and the other one.
func radixSort(keys, tmp []sortKey) (sorted, other []sortKey) {
	if len(keys) < 2 {
		return keys, tmp
	}
	var hist [keyBytes][256]uint32
	for i := range keys {
		k := &keys[i]
		for p := range keyBytes {
			hist[p][digitOf(k, p)]++
		}
	}
	n := uint32(len(keys))
	for p := keyBytes - 1; p >= 0; p-- {
		h := &hist[p]
		if h[digitOf(&keys[0], p)] == n {
			continue // every key has this byte
		}
		var sum uint32
		for d := range h {
			c := h[d]
			h[d] = sum
			sum += c
		}
		for i := range keys {
			d := digitOf(&keys[i], p)
			tmp[h[d]] = keys[i]
			h[d]++
		}
		keys, tmp = tmp, keys
	}
	return keys, tmp
}

// keyBytes is the name bytes a sortKey holds.
const keyBytes = 20

// digitOf returns byte p (0–19) of the name bytes k holds.
func digitOf(k *sortKey, p int) byte {
	switch {
	case p < 8:
		return byte(k.k1 >> (56 - 8*p))
	case p < 16:
		return byte(k.k2 >> (56 - 8*(p-8)))
	}
	return byte(k.k3 >> (24 - 8*(p-16)))
}

// sortKey is an entry's place in buffer.sort.
type sortKey struct {
	k1, k2 uint64 // the name's bytes 0–7 and 8–15 (nameKey, nameKey2)
	k3     uint32 // bytes 16–19 (nameKey3; zero in a merge's keys)
	i      uint32 // the entry's index in arrival order
}

// rowKey returns the sort key of a name added as entry i.
func rowKey(name []byte, i int) sortKey {
	return sortKey{k1: nameKey(name), k2: nameKey2(name), k3: nameKey3(name), i: uint32(i)}
}

// nameKey3 is the name's bytes 16–19 as a big-endian word (zero padded).
func nameKey3(name []byte) uint32 {
	if len(name) >= 20 {
		return binary.BigEndian.Uint32(name[16:20])
	}
	var b [4]byte
	if len(name) > 16 {
		copy(b[:], name[16:])
	}
	return binary.BigEndian.Uint32(b[:])
}

// sortKeySize is unsafe.Sizeof(sortKey{}): a buffer holds two per row
// while it sorts (the radix sort's two arrays).
const sortKeySize = 24

// nameKey2 is nameKey of the name's bytes 8–15 (zero when it has no more
// than 8): with nameKey it orders names by their first 16 bytes.
func nameKey2(name []byte) uint64 {
	if len(name) >= 16 {
		return binary.BigEndian.Uint64(name[8:16])
	}
	var b [8]byte
	if len(name) > 8 {
		copy(b[:], name[8:])
	}
	return binary.BigEndian.Uint64(b[:])
}

// maxRuns bounds the runs merged at once (each is read through a
// runReadBuf buffer): when a spill makes that many, they are merged into
// one first.
const (
	maxRuns    = 64
	runReadBuf = 32 << 10
)

// writeRun sorts a buffer and writes it as a run (merging the runs when
// there are maxRuns).
func (s *sorter) writeRun(b *buffer) error {
	b.sort()
	run, bw, err := s.newRun()
	if err != nil {
		return err
	}
	for i := range b.ents {
		e := &b.ents[i]
		c := b.ar.chunks[e.chunk]
		writeRunEntry(bw, c[e.off:e.off+e.nlen], c[e.off+e.nlen:e.off+e.nlen+e.plen])
	}
	if err := s.finish(run, bw, len(b.ents)); err != nil {
		return err
	}
	if len(s.runs) >= maxRuns {
		return s.compact()
	}
	return nil
}

// compact merges the runs into one, written to a new spill file: the old
// file, which holds only the merged runs, is then dropped, so that its
// space is given back at once rather than at close.
func (s *sorter) compact() error {
	old, oldFile := s.runs, s.file
	cs := make([]cursor, 0, len(old))
	for _, r := range old {
		cs = append(cs, r.cursor())
	}
	m := newMerge(cs)
	s.file = nil // newRun starts a fresh file
	run, bw, err := s.newRun()
	if err == nil {
		n := 0
		for m.next() {
			writeRunEntry(bw, m.name(), m.payload())
			n++
		}
		if err = m.error(); err == nil {
			err = s.finish(run, bw, n)
		}
	}
	if err != nil {
		if s.file != nil {
			s.file.close()
		}
		s.runs, s.file = old, oldFile
		return err
	}
	s.runs = []*runFile{run}
	oldFile.close()
	return nil
}

// close closes the file and removes it when unlinking it failed.
func (f *spillFile) close() {
	f.f.Close()
	if f.path != "" {
		os.Remove(f.path)
	}
}

// newRun starts a run at the end of the spill file (created, unlinked, at
// the first spill); finish adds it to s.runs.
func (s *sorter) newRun() (*runFile, *bufio.Writer, error) {
	if s.file == nil {
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			return nil, nil, fmt.Errorf("instrument events: spill: %w", err)
		}
		f, err := datadir.CreateTemp(s.dir, tempPattern(s.source, "run"))
		if err != nil {
			return nil, nil, fmt.Errorf("instrument events: spill: %w", err)
		}
		s.file = &spillFile{f: f}
		if os.Remove(f.Name()) != nil {
			s.file.path = f.Name()
		}
	}
	run := &runFile{f: s.file, off: s.file.end, w: io.NewOffsetWriter(s.file.f, s.file.end)}
	return run, bufio.NewWriterSize(run.w, 256<<10), nil
}

func writeRunEntry(bw *bufio.Writer, name, p []byte) {
	if bw.Available() < 2*binary.MaxVarintLen64 {
		bw.Flush() // an error sticks: Flush in finish reports it
	}
	h := binary.AppendUvarint(bw.AvailableBuffer(), uint64(len(name)))
	h = binary.AppendUvarint(h, uint64(len(p)))
	bw.Write(h)
	bw.Write(name)
	bw.Write(p)
}

// finish flushes the run and adds it to s.runs.
func (s *sorter) finish(r *runFile, bw *bufio.Writer, n int) error {
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("instrument events: spill: %w", err)
	}
	size, err := r.w.Seek(0, io.SeekCurrent)
	if err != nil {
		return fmt.Errorf("instrument events: spill: %w", err)
	}
	r.n, r.size, r.w = n, size, nil
	s.file.end = r.off + size
	s.runs = append(s.runs, r)
	return nil
}

func (r *runFile) cursor() cursor {
	return &runCursor{r: bufio.NewReaderSize(io.NewSectionReader(r.f.f, r.off, r.size), runReadBuf), left: r.n}
}

// stream sorts what is buffered and returns the merge of every row in name
// order, the last row of a name winning. The sorter must not be added to
// afterwards; the cursor reads its buffer and runs until s.close.
func (s *sorter) stream() (cursor, error) {
	if err := s.wait(); err != nil {
		return nil, err
	}
	if s.spare != nil {
		s.spare.release()
		s.spare = nil
	}
	s.buffer.sort()
	mem := &memCursor{ar: &s.ar, ents: s.ents, ids: s.ids, i: -1}
	if len(s.runs) == 0 {
		return mem, nil
	}
	cs := make([]cursor, 0, len(s.runs)+1)
	for _, r := range s.runs {
		cs = append(cs, r.cursor())
	}
	return newMerge(append(cs, mem)), nil // the buffer holds the latest rows
}

// spilled reports whether any rows went to disk.
func (s *sorter) spilled() bool {
	s.wait()
	return len(s.runs) > 0
}

// state builds a State of the rows: in memory when nothing was spilled,
// else a temporary state file in s.dir.
func (s *sorter) state(hasSnap bool, snapMs int64) (*State, error) {
	c, err := s.stream()
	if err != nil {
		return nil, err
	}
	defer c.close()
	if !s.spilled() {
		return s.takeState(hasSnap, snapMs), nil
	}
	w, err := newStateWriter(s.dir, s.source, hasSnap, snapMs)
	if err != nil {
		return nil, fmt.Errorf("instrument events: write state: %w", err)
	}
	for err == nil && c.next() {
		err = w.add(c.name(), c.payload())
	}
	if err == nil {
		err = c.error()
	}
	if err == nil {
		err = w.finish()
	}
	if err != nil {
		w.abort()
		return nil, fmt.Errorf("instrument events: write state: %w", err)
	}
	return w.state(s.source, hasSnap, snapMs)
}

// takeState moves the sorted buffer into an in-memory State.
func (s *sorter) takeState(hasSnap bool, snapMs int64) *State {
	st := &State{source: s.source, hasSnap: hasSnap, snapMs: snapMs, n: len(s.ents), ar: s.ar, ents: s.ents, ids: s.ids}
	s.buffer = buffer{ar: arena{re: s.ar.re}, keys: s.keys, keys2: s.keys2, ents2: s.ents2, ids2: s.ids2} // go back at close
	return st
}

// close removes the runs and drops the buffers.
func (s *sorter) close() {
	s.wait()
	if s.spare != nil {
		s.spare.release()
		s.spare = nil
	}
	s.runs = nil
	if s.file != nil {
		s.file.close()
		s.file = nil
	}
	s.buffer.release()
}

// memCursor reads sorted entries held in memory.
type memCursor struct {
	ar   *arena
	ents []entry
	ids  []rowID // the entries' identities (empty: none)
	i    int
}

func (c *memCursor) next() bool {
	if c.i+1 >= len(c.ents) {
		c.i = len(c.ents)
		return false
	}
	c.i++
	return true
}

func (c *memCursor) name() []byte {
	e := &c.ents[c.i]
	return c.ar.chunks[e.chunk][e.off : e.off+e.nlen]
}

func (c *memCursor) payload() []byte {
	e := &c.ents[c.i]
	return c.ar.chunks[e.chunk][e.off+e.nlen : e.off+e.nlen+e.plen]
}

func (c *memCursor) error() error { return nil }
func (c *memCursor) close()       {}

// runCursor reads a run.
//
// An entry that lies whole in the reader's buffer is read in place (its
// name and payload are the buffer's bytes, until next); one that does not
// (a payload larger than the buffer) is copied.
type runCursor struct {
	r    *bufio.Reader
	left int
	buf  []byte // the current entry: name, then payload
	nl   int
	used int // bytes of the reader's buffer the current entry holds
	own  []byte
	err  error
}

func (c *runCursor) next() bool {
	if c.left == 0 || c.err != nil {
		return false
	}
	c.left--
	if c.used > 0 {
		c.r.Discard(c.used) // peeked: cannot fail
		c.used = 0
	}
	if hdr, _ := c.r.Peek(2 * binary.MaxVarintLen64); len(hdr) > 0 {
		nl, k1 := binary.Uvarint(hdr)
		if k1 > 0 {
			pl, k2 := binary.Uvarint(hdr[k1:])
			if k2 > 0 && nl <= maxName && pl <= maxPayload {
				if n := k1 + k2 + int(nl) + int(pl); n <= c.r.Size() {
					if b, err := c.r.Peek(n); err == nil {
						c.buf, c.nl, c.used = b[k1+k2:], int(nl), n
						return true
					}
				}
			}
		}
	}
	nl, err := binary.ReadUvarint(c.r)
	if err != nil {
		c.err = fmt.Errorf("instrument events: read spilled rows: %w", err)
		return false
	}
	pl, err := binary.ReadUvarint(c.r)
	if err != nil || nl > maxName || pl > maxPayload {
		c.err = fmt.Errorf("instrument events: read spilled rows: bad lengths (%v)", err)
		return false
	}
	c.nl = int(nl)
	c.own = grow(c.own, int(nl+pl))
	if _, err := io.ReadFull(c.r, c.own); err != nil {
		c.err = fmt.Errorf("instrument events: read spilled rows: %w", err)
		return false
	}
	c.buf = c.own
	return true
}

func (c *runCursor) name() []byte    { return c.buf[:c.nl] }
func (c *runCursor) payload() []byte { return c.buf[c.nl:] }
func (c *runCursor) error() error    { return c.err }
func (c *runCursor) close()          {}

// mergeCursor merges cursors with a binary heap; on equal names the cursor
// with the highest index wins and the others' entries are skipped.
type mergeCursor struct {
	cs  []cursor
	h   []int // heap of the cursors that have a current entry, except cur
	cur int   // the cursor of the current entry, or -1
	err error
	// keys are the first 16 bytes of each cursor's current name (nameKey,
	// nameKey2), set by advance: they order most pairs of names without
	// reading them (a first snapshot of 1M instruments merges ~45 runs).
	keys []sortKey
}

func newMerge(cs []cursor) *mergeCursor {
	m := &mergeCursor{cs: cs, cur: -1, keys: make([]sortKey, len(cs))}
	for i := range cs {
		if m.advance(i) {
			m.h = append(m.h, i)
		} else if err := cs[i].error(); err != nil && m.err == nil {
			m.err = err
		}
	}
	for i := len(m.h)/2 - 1; i >= 0; i-- {
		m.down(i)
	}
	return m
}

// advance moves cursor i on and keys its name.
func (m *mergeCursor) advance(i int) bool {
	c := m.cs[i]
	if !c.next() {
		return false
	}
	name := c.name()
	m.keys[i] = sortKey{k1: nameKey(name), k2: nameKey2(name)}
	return true
}

func (m *mergeCursor) less(a, b int) bool {
	ka, kb := &m.keys[a], &m.keys[b]
	if ka.k1 != kb.k1 {
		return ka.k1 < kb.k1
	}
	if ka.k2 != kb.k2 {
		return ka.k2 < kb.k2
	}
	if c := bytes.Compare(m.cs[a].name(), m.cs[b].name()); c != 0 {
		return c < 0
	}
	return a > b
}

func (m *mergeCursor) down(i int) {
	h := m.h
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		j := l
		if r := l + 1; r < len(h) && m.less(h[r], h[l]) {
			j = r
		}
		if !m.less(h[j], h[i]) {
			return
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}

// advance moves the cursor at the top of the heap on.
func (m *mergeCursor) advanceTop() {
	c := m.cs[m.h[0]]
	if m.advance(m.h[0]) {
		m.down(0)
		return
	}
	if err := c.error(); err != nil {
		m.err = err
	}
	last := len(m.h) - 1
	m.h[0] = m.h[last]
	m.h = m.h[:last]
	m.down(0)
}

// next moves on to the next name. The cursor of the current entry, moved
// on, stays current while its name still comes before every other
// cursor's (one comparison, no heap operation: the runs of a listing that
// arrives nearly in name order hardly overlap); else it takes the top of
// the heap's place.
func (m *mergeCursor) next() bool {
	if m.err != nil {
		return false
	}
	if m.cur >= 0 {
		c := m.cs[m.cur]
		for len(m.h) > 0 && m.err == nil && m.keys[m.h[0]] == m.keys[m.cur] && bytes.Equal(m.cs[m.h[0]].name(), c.name()) {
			m.advanceTop() // an earlier row of the same instrument
		}
		if m.err != nil {
			return false
		}
		if !m.advance(m.cur) {
			if err := c.error(); err != nil {
				m.err = err
				return false
			}
			m.cur = -1
		} else if len(m.h) == 0 || m.less(m.cur, m.h[0]) {
			return true
		} else {
			m.cur, m.h[0] = m.h[0], m.cur
			m.down(0)
			return true
		}
	}
	if len(m.h) == 0 {
		return false
	}
	m.cur = m.h[0]
	last := len(m.h) - 1
	m.h[0] = m.h[last]
	m.h = m.h[:last]
	m.down(0)
	return true
}

func (m *mergeCursor) name() []byte    { return m.cs[m.cur].name() }
func (m *mergeCursor) payload() []byte { return m.cs[m.cur].payload() }
func (m *mergeCursor) error() error    { return m.err }

func (m *mergeCursor) close() {
	for _, c := range m.cs {
		c.close()
	}
}

// cursor returns a cursor over the state's entries in name order.
func (s *State) cursor() (cursor, error) {
	s.mu.Lock()
	closed, inFile := s.closed, s.f != nil
	s.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	if !inFile {
		return &memCursor{ar: &s.ar, ents: s.ents, ids: s.ids, i: -1}, nil
	}
	c, err := s.openFile()
	if err != nil {
		return nil, err
	}
	if c.version == fileVersionV1 {
		c.close()
		return nil, fmt.Errorf("state file version %d", c.version)
	}
	c.lazy = true
	return c, nil
}
