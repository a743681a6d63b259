package arrowpool

import (
	"bytes"
	"testing"
	"unsafe"
)

// A freed buffer is reused by the next allocation of its class, zeroed,
// and not kept past the pool's bound or when it is not of a class's size.
func TestPoolReusesZeroed(t *testing.T) {
	p := New(4096)
	a := p.Allocate(1000)
	if len(a) != 1000 || cap(a) != 1024 {
		t.Fatalf("Allocate(1000): len %d cap %d, want 1000 and its class, 1024", len(a), cap(a))
	}
	for i := range a {
		a[i] = 7
	}
	p.Free(a)
	if p.Held() != 1024 {
		t.Fatalf("held %d after a free, want 1024", p.Held())
	}
	b := p.Allocate(600) // the same class
	if unsafe.SliceData(b) != unsafe.SliceData(a) {
		t.Fatal("a buffer of the same class was not reused")
	}
	if !bytes.Equal(b, make([]byte, 600)) {
		t.Fatal("a reused buffer is not zeroed")
	}
	p.Free(b)
	for range 8 {
		p.Free(make([]byte, 1024))
	}
	if p.Held() != 4096 {
		t.Fatalf("held %d, want the bound 4096", p.Held())
	}
	p.Free(make([]byte, 100, 100)) // not a class's size
	p.Free(make([]byte, 100<<20))  // too large to keep
	if p.Held() != 4096 {
		t.Fatalf("held %d, want 4096", p.Held())
	}
	c := p.Reallocate(3000, p.Allocate(10))
	if len(c) != 3000 || !bytes.Equal(c, make([]byte, 3000)) {
		t.Fatalf("Reallocate: len %d, or not zeroed", len(c))
	}
}

// A poisoned pool overwrites what is freed and panics on a buffer freed
// twice.
func TestPoisonedPool(t *testing.T) {
	p := NewPoisoned(1 << 20)
	a := p.Allocate(100)
	view := a[:cap(a)]
	p.Free(a)
	if !bytes.Equal(view, bytes.Repeat([]byte{PoisonByte}, len(view))) {
		t.Fatal("a freed buffer was not poisoned")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a buffer freed twice did not panic")
		}
	}()
	p.Free(a)
}

// The unzeroed methods hand out buffers of the size asked, grow a buffer
// keeping its bytes, keep freed ones of their classes up to the bound,
// and count what they had to make.
func TestPoolUnzeroed(t *testing.T) {
	p := New(4096)
	b := p.AllocateUnzeroed(100)
	if len(b) != 100 || cap(b) != 128 || p.Made() != 128 {
		t.Fatalf("len %d cap %d, made %d", len(b), cap(b), p.Made())
	}
	copy(b, "kept")
	b = p.ReallocateUnzeroed(1000, b)
	if len(b) != 1000 || string(b[:4]) != "kept" {
		t.Fatalf("reallocated: len %d, %q", len(b), b[:4])
	}
	if g := p.ReallocateUnzeroed(1020, b); unsafe.SliceData(g) != unsafe.SliceData(b) {
		t.Fatal("grown within its class, yet copied")
	}
	p.Free(b)
	if p.Held() != 128+1024 { // the first buffer, freed by Reallocate, and b
		t.Fatalf("held %d after a free", p.Held())
	}
	c := p.AllocateUnzeroed(900)
	if cap(c) != 1024 || p.Held() != 128 || p.Made() != 128+1024 {
		t.Fatalf("not reused: cap %d, held %d, made %d", cap(c), p.Held(), p.Made())
	}
	if string(c[:4]) != "kept" {
		t.Fatalf("an unzeroed buffer was cleared: %q", c[:4])
	}
	buf := p.BufferUnzeroed(1000)
	buf.Release() // back to the pool
	if p.Held() != 128+1024 {
		t.Fatalf("held %d after a buffer's release", p.Held())
	}
	if Size(100) != 128 || Size(200<<20) != 200<<20 {
		t.Fatalf("Size: %d, %d", Size(100), Size(200<<20))
	}
	if big := p.AllocateUnzeroed(200 << 20); len(big) != 200<<20 {
		t.Fatal("a large buffer")
	}
}
