package events

import (
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Reuse keeps the memory of finished comparisons for the next ones: the
// arena chunks a snapshot's rows were encoded into, its entries and its
// sort keys. A replay compares a small snapshot after another (3,000
// instruments, one 1 MiB chunk each); without it each allocated and
// cleared its chunk and grew its slices afresh. Give the same Reuse to
// the Differs of a replay (Options.Reuse): a sorter takes its memory from
// it and gives it back when it is closed, a State when it is closed. It
// keeps a few of each (reuseChunks, reuseSlices), enough for the
// comparisons a pipelined replay has under way, so that what it holds
// stays small; the rest goes to the garbage collector. It also
// remembers the last records encoded, per source (memo.go), so that the
// rows the next snapshot repeats are copied, not encoded: those records
// stay retained until Close. It is safe for concurrent use.
type Reuse struct {
	mu     sync.Mutex
	chunks freeList[byte]
	ents   freeList[entry]
	keys   freeList[sortKey]
	ids    freeList[rowID]
	// memos are the records last encoded, per source and record of a
	// snapshot (see memo); spare keeps the slices of dropped ones.
	memos   map[memoKey]*memo
	held    map[string]int // rows the memos of each source hold
	maxHeld int            // the bound of held (trimMemos; 0: 2*memoRows)
	spare   []*memo
	// pins counts, per arena chunk (by its first byte), the memos that
	// share it (memo.chunks): a pinned chunk is not handed out again
	// when its arena lets it go (putChunks, arena.reset), but when the
	// last memo is done with it.
	pins     map[*byte]*pin
	gen      uint64           // the last memo's generation (under mu; see rowID)
	batches  []*eventBatchBuf // of Finish's event queues
	emitters []*emitter       // their scratch slices, for Finish's next emitter
	// copied counts the rows copied from memos (tests).
	copied atomic.Int64
	// passed counts the instruments merges passed over by their rows'
	// ids (tests).
	passed atomic.Int64
}

// How many chunks and slices of each kind a Reuse keeps at most, and the
// largest slice it keeps: a snapshot far larger than a replay's (a large
// Options.MemBytes, a listing of a million instruments) leaves slices of
// tens of MB, which would otherwise stay held for the rest of the replay.
const (
	reuseChunks     = 8
	reuseSlices     = 8
	reuseSliceBytes = 4 << 20
)

// NewReuse returns an empty Reuse.
func NewReuse() *Reuse { return &Reuse{} }

// freeList holds up to a number of slices of T for reuse.
type freeList[T any] struct{ s [][]T }

// get returns an empty slice, with the capacity of one put back if any.
func (f *freeList[T]) get() []T {
	if n := len(f.s); n > 0 {
		s := f.s[n-1]
		f.s[n-1] = nil
		f.s = f.s[:n-1]
		return s[:0]
	}
	return nil
}

func (f *freeList[T]) put(s []T, limit int) {
	var zero T
	if cap(s) > 0 && len(f.s) < limit && cap(s)*int(unsafe.Sizeof(zero)) <= reuseSliceBytes {
		f.s = append(f.s, s[:0])
	}
}

// chunk returns an empty chunk of cap chunkSize (its bytes are stale: the
// arena's callers write every byte they allocate).
func (r *Reuse) chunk() []byte {
	if r != nil {
		r.mu.Lock()
		c := r.chunks.get()
		r.mu.Unlock()
		if c != nil {
			return c
		}
	}
	return make([]byte, 0, chunkSize)
}

// putChunks takes back an arena's chunks of the standard size (a chunk a
// memo shares comes back when the memo is done with it).
func (r *Reuse) putChunks(chunks [][]byte) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range chunks {
		if p := r.pins[unsafe.SliceData(c[:cap(c)])]; p != nil {
			p.released = true
		} else if cap(c) == chunkSize {
			r.chunks.put(c, reuseChunks)
		}
	}
}

// pin is the memos sharing one chunk.
type pin struct {
	n        int  // memos
	released bool // its arena let it go: it comes back with the last unpin
}

// pin marks chunk c (sliced to its capacity) as shared by one more memo.
func (r *Reuse) pin(c []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pins == nil {
		r.pins = map[*byte]*pin{}
	}
	p := r.pins[unsafe.SliceData(c)]
	if p == nil {
		p = &pin{}
		r.pins[unsafe.SliceData(c)] = p
	}
	p.n++
}

// unpin drops a memo's pins of its chunks (under r.mu).
func (r *Reuse) unpin(chunks [][]byte) {
	for _, c := range chunks {
		k := unsafe.SliceData(c)
		p := r.pins[k]
		if p.n--; p.n > 0 {
			continue
		}
		delete(r.pins, k)
		if p.released && cap(c) == chunkSize {
			r.chunks.put(c, reuseChunks)
		}
	}
}

// unpinned drops from an arena's chunks those that a memo shares (they
// must not be written again; they come back when the memo is done) and
// returns the rest.
func (r *Reuse) unpinned(chunks [][]byte) [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pins) == 0 {
		return chunks
	}
	return slices.DeleteFunc(chunks, func(c []byte) bool {
		p := r.pins[unsafe.SliceData(c[:cap(c)])]
		if p != nil {
			p.released = true
		}
		return p != nil
	})
}

// takeSlice returns an empty slice of f (under r's lock), nil for a nil r.
func takeSlice[T any](r *Reuse, f func(*Reuse) *freeList[T]) []T {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return f(r).get()
}

// keepSlice gives s back to f (under r's lock), which keeps up to limit.
func keepSlice[T any](r *Reuse, f func(*Reuse) *freeList[T], s []T, limit int) {
	if r != nil {
		r.mu.Lock()
		f(r).put(s, limit)
		r.mu.Unlock()
	}
}

func entsOf(r *Reuse) *freeList[entry]   { return &r.ents }
func idsOf(r *Reuse) *freeList[rowID]    { return &r.ids }
func keysOf(r *Reuse) *freeList[sortKey] { return &r.keys }

func (r *Reuse) entries() []entry        { return takeSlice(r, entsOf) }
func (r *Reuse) putEntries(e []entry)    { keepSlice(r, entsOf, e, reuseSlices) }
func (r *Reuse) rowIDs() []rowID         { return takeSlice(r, idsOf) }
func (r *Reuse) putRowIDs(ids []rowID)   { keepSlice(r, idsOf, ids, reuseSlices) }
func (r *Reuse) sortKeys() []sortKey     { return takeSlice(r, keysOf) }
func (r *Reuse) putSortKeys(k []sortKey) { keepSlice(r, keysOf, k, 2*reuseSlices) }

// release gives the arena's chunks back to its Reuse (if any) and empties
// it; nothing may read what it held any more.
func (a *arena) release() {
	a.re.putChunks(a.chunks)
	*a = arena{re: a.re}
}

// release gives the buffer's memory back to its arena's Reuse (if any) and
// empties it.
func (b *buffer) release() {
	re := b.ar.re
	b.ar.release()
	re.putEntries(b.ents)
	re.putRowIDs(b.ids)
	re.putSortKeys(b.keys)
	re.putSortKeys(b.keys2)
	re.putEntries(b.ents2)
	re.putRowIDs(b.ids2)
	*b = buffer{ar: arena{re: re}}
}

// newRowBuffer returns an empty buffer taking its memory from re (nil: none).
func newRowBuffer(re *Reuse) buffer {
	return buffer{ar: arena{re: re}, ents: re.entries(), ids: re.rowIDs(), keys: re.sortKeys(), keys2: re.sortKeys(), ents2: re.entries(), ids2: re.rowIDs()}
}

// eventBatch returns an empty batch of events for Finish's queue.
func (r *Reuse) eventBatch() *eventBatchBuf {
	if r != nil {
		if bt := popLocked(&r.mu, &r.batches); bt != nil {
			return bt
		}
	}
	return &eventBatchBuf{}
}

// popLocked takes the last of *list under mu (nil when it is empty).
func popLocked[T any](mu *sync.Mutex, list *[]*T) *T {
	mu.Lock()
	defer mu.Unlock()
	n := len(*list)
	if n == 0 {
		return nil
	}
	v := (*list)[n-1]
	*list = (*list)[:n-1]
	return v
}

// putEventBatch takes back an empty batch.
func (r *Reuse) putEventBatch(bt *eventBatchBuf) {
	if r == nil || cap(bt.buf) > reuseSliceBytes {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.batches) < 2*reuseSlices {
		r.batches = append(r.batches, bt)
	}
}

// emitter returns an emitter with no state, whose scratch slices (empty)
// may come from an earlier one.
func (r *Reuse) emitter() *emitter {
	if r != nil {
		if e := popLocked(&r.mu, &r.emitters); e != nil {
			return e
		}
	}
	return &emitter{}
}

// putEmitter takes back the scratch slices of a released emitter.
func (r *Reuse) putEmitter(e *emitter) {
	if r == nil || max(cap(e.name.data), cap(e.field.data), cap(e.old.data), cap(e.new.data)) > reuseSliceBytes {
		return
	}
	kept := &emitter{kinds: e.kinds[:0], initial: e.initial[:0], name: e.name, field: e.field, old: e.old, new: e.new}
	for _, c := range []*strCol{&kept.name, &kept.field, &kept.old, &kept.new} {
		c.reset()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.emitters) < reuseSlices {
		r.emitters = append(r.emitters, kept)
	}
}
