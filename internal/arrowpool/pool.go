// Package arrowpool is a memory.Allocator that recycles freed buffers: a
// replay decodes snapshot after snapshot of about the same size, and each
// one's column buffers, allocated fresh, were ~30% of all its allocation
// (the GC's work, their zeroing and page faults); compaction's merges
// gather and read batch after batch of about the same sizes. Buffers come
// back to the pool only when the last holder of their Arrow record
// releases it, so every holder of a record, or of a view into its buffers,
// must Retain it (or copy what it keeps).
package arrowpool

import (
	"fmt"
	"math/bits"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Pool keeps freed buffers for the next allocations of their size class
// (powers of two), up to a bound of bytes held. Allocate returns zeroed
// bytes, as Go's allocator does: the decoder's columns and arrow-go's
// builders rely on it (a null costs nothing). The *Unzeroed methods skip
// the zeroing, for code that writes every byte it later reads
// (compaction's gathered values, offsets and string bytes, a validity
// bitmap it clears itself, a spilled run read back). It is safe for
// concurrent use: records are built on one goroutine and released on
// another.
type Pool struct {
	mu   sync.Mutex
	free [classes][][]byte
	held int64 // bytes in free
	max  int64
	made int64 // bytes of the buffers Allocate made, not having them

	// poison: freed buffers are overwritten, and a buffer freed while
	// it is free already panics (tests; see NewPoisoned).
	poison bool
	freed  map[*byte]bool // poison: the buffers in free
}

const (
	minShift = 6  // 64 B, the smallest class
	classes  = 21 // up to 64 MiB; larger buffers are not kept
)

// PoisonByte fills a buffer freed to a poisoned pool.
const PoisonByte = 0xA5

// New returns a pool holding at most max bytes of freed buffers; past
// that, freed buffers are left to the GC.
func New(max int64) *Pool { return &Pool{max: max} }

// NewPoisoned returns a pool that overwrites every buffer it is given
// back with PoisonByte before it is reused, and panics on a buffer freed
// twice: a holder that reads a record's buffers after its last Release
// reads garbage (tests compare a replay's output with the unpooled one).
func NewPoisoned(max int64) *Pool {
	return &Pool{max: max, poison: true, freed: map[*byte]bool{}}
}

var _ memory.Allocator = (*Pool)(nil)

// class is the size class of n bytes (-1: too large to keep).
func class(n int) int {
	if n <= 1<<minShift {
		return 0
	}
	c := bits.Len(uint(n-1)) - minShift
	if c >= classes {
		return -1
	}
	return c
}

// Size is the bytes an allocation of n takes: its class's size, or n when
// too large to keep.
func Size(n int) int64 {
	if c := class(n); c >= 0 {
		return 1 << (c + minShift)
	}
	return int64(n)
}

// Allocate returns size zeroed bytes (their capacity is the class's).
func (p *Pool) Allocate(size int) []byte {
	b, fresh := p.take(size)
	if !fresh {
		clear(b)
	}
	return b
}

// AllocateUnzeroed returns size bytes whose contents are undefined (a
// poisoned pool's are PoisonByte).
func (p *Pool) AllocateUnzeroed(size int) []byte {
	b, _ := p.take(size)
	return b
}

// BufferUnzeroed returns a buffer of n bytes whose contents are
// undefined, released to the pool.
func (p *Pool) BufferUnzeroed(n int) *memory.Buffer {
	return memory.NewBufferWithAllocator(p.AllocateUnzeroed(n), p)
}

// take returns size bytes of a freed buffer of their class, or of a fresh
// one (fresh: zeroed by Go).
func (p *Pool) take(size int) (b []byte, fresh bool) {
	c := class(size)
	if c < 0 {
		return make([]byte, size), true
	}
	p.mu.Lock()
	if l := p.free[c]; len(l) > 0 {
		b := l[len(l)-1]
		l[len(l)-1] = nil
		p.free[c] = l[:len(l)-1]
		p.held -= int64(cap(b))
		if p.poison {
			delete(p.freed, unsafe.SliceData(b))
		}
		p.mu.Unlock()
		return b[:size], false
	}
	p.made += 1 << (c + minShift)
	p.mu.Unlock()
	return make([]byte, size, 1<<(c+minShift)), true
}

// Reallocate grows or shrinks b to size bytes, keeping its contents; the
// bytes past them are zero.
func (p *Pool) Reallocate(size int, b []byte) []byte {
	if size <= len(b) {
		return b[:size]
	}
	return p.move(p.Allocate(size), b)
}

// ReallocateUnzeroed grows or shrinks b to size bytes, keeping its
// contents; the bytes past them are undefined.
func (p *Pool) ReallocateUnzeroed(size int, b []byte) []byte {
	if size <= cap(b) {
		return b[:size]
	}
	return p.move(p.AllocateUnzeroed(size), b)
}

// move copies b into nb and frees b.
func (p *Pool) move(nb, b []byte) []byte {
	copy(nb, b)
	p.Free(b)
	return nb
}

// Free keeps b for a later Allocate of its class, unless the pool holds
// max bytes already or b is not of a class's size.
func (p *Pool) Free(b []byte) {
	c := class(cap(b))
	if c < 0 || cap(b) != 1<<(c+minShift) {
		return
	}
	b = b[:cap(b)]
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.poison {
		ptr := unsafe.SliceData(b)
		if p.freed[ptr] {
			panic(fmt.Sprintf("arrowpool: a buffer of %d bytes freed twice", cap(b)))
		}
		for i := range b {
			b[i] = PoisonByte
		}
		// Kept even past max, so that a second Free is seen.
		p.freed[ptr] = true
		p.free[c] = append(p.free[c], b[:0])
		p.held += int64(cap(b))
		return
	}
	if p.held+int64(cap(b)) > p.max {
		return
	}
	p.free[c] = append(p.free[c], b[:0])
	p.held += int64(cap(b))
}

// Held is the bytes of freed buffers the pool holds.
func (p *Pool) Held() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// Made is the bytes of the buffers the pool allocated fresh, not having a
// freed one of their class.
func (p *Pool) Made() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.made
}
