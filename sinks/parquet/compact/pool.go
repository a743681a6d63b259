package compact

import (
	"math/bits"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// bufPool is a memory.Allocator that keeps freed buffers for the next
// allocations of their size class (powers of two), up to max bytes held:
// the merges gather and read a batch after another of about the same
// sizes, and fresh large buffers cost their zeroing, their page faults
// and the GC's returning them to the OS.
//
// Its memory is NOT zeroed: only code that writes every byte it later
// reads may use it (gather's values, offsets and string bytes, a
// validity bitmap it clears itself, a spilled run's buffers read back),
// never an arrow-go builder or MakeArrayOfNull. It is safe for concurrent
// use: a batch is gathered on one goroutine and released on another.
type bufPool struct {
	mu   sync.Mutex
	free [poolClasses][][]byte
	held int64 // bytes in free
	max  int64
	made int64 // bytes of the buffers Allocate made, not having them (tests)
}

const (
	poolMinShift = 6  // 64 B, the smallest class
	poolClasses  = 21 // up to 64 MiB; larger buffers are not kept
)

func newBufPool(max int64) *bufPool { return &bufPool{max: max} }

var _ memory.Allocator = (*bufPool)(nil)

// class is the size class of n bytes (-1: too large to keep).
func poolClass(n int) int {
	if n <= 1<<poolMinShift {
		return 0
	}
	c := bits.Len(uint(n-1)) - poolMinShift
	if c >= poolClasses {
		return -1
	}
	return c
}

// poolSize is the bytes Allocate takes for n: its class's size, or n
// when too large to keep.
func poolSize(n int) int64 {
	if c := poolClass(n); c >= 0 {
		return 1 << (c + poolMinShift)
	}
	return int64(n)
}

// Allocate returns size bytes whose contents are undefined.
func (p *bufPool) Allocate(size int) []byte {
	c := poolClass(size)
	if c < 0 {
		return make([]byte, size)
	}
	p.mu.Lock()
	if l := p.free[c]; len(l) > 0 {
		b := l[len(l)-1]
		l[len(l)-1] = nil
		p.free[c] = l[:len(l)-1]
		p.held -= int64(cap(b))
		p.mu.Unlock()
		return b[:size]
	}
	p.made += 1 << (c + poolMinShift)
	p.mu.Unlock()
	return make([]byte, size, 1<<(c+poolMinShift))
}

// Reallocate grows or shrinks b to size bytes, keeping its contents.
func (p *bufPool) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		return b[:size]
	}
	nb := p.Allocate(size)
	copy(nb, b)
	p.Free(b)
	return nb
}

// Free keeps b for a later Allocate of its class, unless the pool holds
// max bytes already or b is not of a class's size.
func (p *bufPool) Free(b []byte) {
	c := poolClass(cap(b))
	if c < 0 || cap(b) != 1<<(c+poolMinShift) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held+int64(cap(b)) > p.max {
		return
	}
	p.free[c] = append(p.free[c], b[:0])
	p.held += int64(cap(b))
}

// buffer returns a buffer of n bytes from the pool (contents undefined),
// released to it.
func (p *bufPool) buffer(n int) *memory.Buffer {
	return memory.NewBufferWithAllocator(p.Allocate(n), p)
}
