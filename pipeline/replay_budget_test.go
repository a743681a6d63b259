package pipeline

import (
	"testing"
	"time"
)

// The replay's budget lets at most n snapshots in at once and at most max
// bytes together, lets a snapshot larger than max in alone, and gives up
// when stopped.
func TestReplayBudget(t *testing.T) {
	b := newBudget(2, 100)
	never := make(chan struct{})
	if !b.acquire(40, never) || !b.acquire(40, never) {
		t.Fatal("two small snapshots did not fit")
	}
	got := make(chan bool, 1)
	go func() { got <- b.acquire(1, never) }()
	select {
	case <-got:
		t.Fatal("a third snapshot got in with two in flight")
	case <-time.After(50 * time.Millisecond):
	}
	b.release(40)
	if !<-got {
		t.Fatal("the third snapshot did not get in once one left")
	}
	go func() { got <- b.acquire(500, never) }() // larger than max: alone
	select {
	case <-got:
		t.Fatal("a snapshot larger than the budget got in beside others")
	case <-time.After(50 * time.Millisecond):
	}
	b.release(40)
	b.release(1)
	if !<-got {
		t.Fatal("the large snapshot did not get in alone")
	}
	b.release(500)
	// Full again; a waiter whose stop closes gives up instead of waiting
	// for room.
	if !b.acquire(1, never) || !b.acquire(1, never) {
		t.Fatal("two snapshots did not fit in an empty budget")
	}
	stop := make(chan struct{})
	go func() { got <- b.acquire(1, stop) }()
	close(stop)
	b.cond.Broadcast() // wakes the waiter, still without room
	if <-got {
		t.Fatal("a stopped waiter got in without room")
	}
	b.release(1)
	b.release(1)
	if b.count != 0 || b.used != 0 {
		t.Fatalf("budget left at %d snapshots, %d bytes", b.count, b.used)
	}
}
