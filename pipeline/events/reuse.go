package events

import "sync"

// Reuse keeps the memory of finished comparisons for the next ones: the
// arena chunks a snapshot's rows were encoded into, its entries and its
// sort keys. A replay compares a small snapshot after another (3,000
// instruments, one 1 MiB chunk each); without it each allocated and
// cleared its chunk and grew its slices afresh. Give the same Reuse to
// the Differs of a replay or of a long-running process (Options.Reuse):
// a sorter takes its memory from it, and gives it back when it is closed,
// a State when it is closed. It is safe for concurrent use; the memory it
// holds goes with the garbage collector's next cycles when unused.
type Reuse struct {
	chunks sync.Pool // *[]byte of cap chunkSize
	ents   slicePool[entry]
	keys   slicePool[sortKey]
}

// NewReuse returns an empty Reuse.
func NewReuse() *Reuse { return &Reuse{} }

// chunk returns an empty chunk of cap chunkSize (its bytes are stale: the
// arena's callers write every byte they allocate).
func (r *Reuse) chunk() []byte {
	if r != nil {
		if p, ok := r.chunks.Get().(*[]byte); ok {
			return (*p)[:0]
		}
	}
	return make([]byte, 0, chunkSize)
}

// putChunks takes back an arena's chunks of the standard size.
func (r *Reuse) putChunks(chunks [][]byte) {
	if r == nil {
		return
	}
	for _, c := range chunks {
		if cap(c) == chunkSize {
			c = c[:0]
			r.chunks.Put(&c)
		}
	}
}

// slicePool recycles slices of T.
type slicePool[T any] struct{ p sync.Pool }

// get returns an empty slice, with the capacity of one put back if any.
func (sp *slicePool[T]) get() []T {
	if p, ok := sp.p.Get().(*[]T); ok {
		return (*p)[:0]
	}
	return nil
}

func (sp *slicePool[T]) put(s []T) {
	if cap(s) > 0 {
		s = s[:0]
		sp.p.Put(&s)
	}
}

func (r *Reuse) entries() []entry {
	if r == nil {
		return nil
	}
	return r.ents.get()
}

func (r *Reuse) putEntries(e []entry) {
	if r != nil {
		r.ents.put(e)
	}
}

func (r *Reuse) sortKeys() []sortKey {
	if r == nil {
		return nil
	}
	return r.keys.get()
}

func (r *Reuse) putSortKeys(k []sortKey) {
	if r != nil {
		r.keys.put(k)
	}
}

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
	re.putSortKeys(b.keys)
	re.putSortKeys(b.keys2)
	*b = buffer{ar: arena{re: re}}
}

// newRowBuffer returns an empty buffer taking its memory from re (nil: none).
func newRowBuffer(re *Reuse) buffer {
	return buffer{ar: arena{re: re}, ents: re.entries(), keys: re.sortKeys(), keys2: re.sortKeys()}
}
