package storage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/optlake/optlake/internal/datadir"
)

// LeaseName is the lease object's name at the root of a data directory.
const LeaseName = ".optlake.lease"

// DefaultLeaseTTL is how long a lease outlives its last renewal: a holder
// killed with -9 blocks the prefix at most this long.
const DefaultLeaseTTL = 60 * time.Second

// leaseRecord is the lease object's content.
type leaseRecord struct {
	Holder  string    `json:"holder"`  // "pid 123 on host since 2026-11-24T10:00:00Z"
	Token   string    `json:"token"`   // random, tells this holder's writes from another's
	Expires time.Time `json:"expires"` // taken over only after this
}

// Lease is a held one-writer-per-prefix lease: an object created with a
// conditional write (If-None-Match: *), renewed in the background every
// TTL/3 until Release. Lost is closed if a renewal finds the lease taken
// over (the holder then must stop writing).
type Lease struct {
	s      Store
	name   string
	ttl    time.Duration
	rec    leaseRecord
	lock   *datadir.Lock // a local folder: the flock instead of an object
	cancel context.CancelFunc
	done   chan struct{}
	lost   chan struct{}

	mu     sync.Mutex
	err    error // last renewal error
	closed bool
}

// AcquireDataDir takes a data directory for one writer: the flock of
// internal/datadir for a local folder (dropped by the kernel when the
// process dies), the lease object for a bucket. A refusal is a
// *datadir.LockedError naming the holder (errors.Is datadir.ErrLocked).
func AcquireDataDir(ctx context.Context, s Store, ttl time.Duration) (*Lease, error) {
	if dir := LocalDir(s); dir != "" {
		lk, err := datadir.Acquire(dir)
		if err != nil {
			return nil, err
		}
		return &Lease{s: s, lock: lk, done: closedChan(), lost: make(chan struct{})}, nil
	}
	return AcquireLease(ctx, s, LeaseName, ttl)
}

func closedChan() chan struct{} { c := make(chan struct{}); close(c); return c }

func holderString() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("pid %d on %s since %s", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
}

// AcquireLease takes the lease object name in s without waiting. If the
// object exists and has not expired, it returns a *datadir.LockedError
// naming the holder; an expired one (its holder died) is taken over.
//
// Takeover is delete-then-conditional-create: of two processes taking over
// the same stale lease at once, the loser's create gets 412 — except in the
// narrow window where one deletes the other's fresh lease; the renewal then
// finds a foreign token and closes Lost. (S3 If-Match on PUT would close that
// window; gocloud.dev/blob does not expose it.)
func AcquireLease(ctx context.Context, s Store, name string, ttl time.Duration) (*Lease, error) {
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	tok := make([]byte, 16)
	rand.Read(tok)
	l := &Lease{s: s, name: name, ttl: ttl, rec: leaseRecord{Holder: holderString(), Token: hex.EncodeToString(tok)},
		done: make(chan struct{}), lost: make(chan struct{})}
	for attempt := 0; ; attempt++ {
		err := l.create(ctx)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrExist) || attempt >= 2 {
			return nil, fmt.Errorf("lease %s/%s: %w", s, name, err)
		}
		cur, rerr := readLease(ctx, s, name)
		if errors.Is(rerr, ErrNotExist) {
			continue // released meanwhile
		}
		if rerr == nil && time.Now().Before(cur.Expires) {
			return nil, &datadir.LockedError{Dir: s.String(), Holder: cur.Holder + ", lease until " + cur.Expires.UTC().Format(time.RFC3339)}
		}
		// Stale (or unreadable): the holder died. Re-check just before
		// deleting, so that a renewal meanwhile wins.
		again, aerr := readLease(ctx, s, name)
		if aerr == nil && rerr == nil && again.Token != cur.Token {
			continue
		}
		if aerr == nil && time.Now().Before(again.Expires) {
			continue
		}
		if err := s.Delete(ctx, name); err != nil {
			return nil, fmt.Errorf("lease %s/%s: take over a stale lease: %w", s, name, err)
		}
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.cancel = cancel
	go l.renew(rctx)
	return l, nil
}

func (l *Lease) create(ctx context.Context) error {
	l.rec.Expires = time.Now().Add(l.ttl).UTC()
	b, _ := json.Marshal(l.rec)
	w, err := l.s.CreateExclusive(ctx, l.name)
	if err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		w.Abort()
		return err
	}
	return w.Commit()
}

func readLease(ctx context.Context, s Store, name string) (leaseRecord, error) {
	var r leaseRecord
	b, err := ReadAll(ctx, s, name)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("lease %s/%s: %w", s, name, err)
	}
	return r, nil
}

func (l *Lease) renew(ctx context.Context) {
	defer close(l.done)
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cur, err := readLease(ctx, l.s, l.name)
		if err != nil && !errors.Is(err, ErrNotExist) && ctx.Err() == nil && time.Now().After(l.rec.Expires) {
			l.setErr(fmt.Errorf("lease %s/%s expired: the store did not answer since it was last renewed: %w", l.s, l.name, err))
			close(l.lost)
			return
		}
		if err == nil && cur.Token != l.rec.Token || errors.Is(err, ErrNotExist) {
			l.setErr(fmt.Errorf("lease %s/%s lost (now held by %s)", l.s, l.name, cur.Holder))
			close(l.lost)
			return
		}
		rec := l.rec
		rec.Expires = time.Now().Add(l.ttl).UTC()
		b, _ := json.Marshal(rec)
		if err := l.s.Put(ctx, l.name, b); err != nil {
			l.setErr(err) // retried at the next tick, before the TTL runs out
			if ctx.Err() == nil && time.Now().After(l.rec.Expires) {
				// Renewals failed for a whole TTL: another process may
				// take the prefix over now, so this one must stop.
				l.setErr(fmt.Errorf("lease %s/%s expired: renewals failed since it was last renewed: %w", l.s, l.name, err))
				close(l.lost)
				return
			}
			continue
		}
		l.mu.Lock()
		l.rec = rec
		l.err = nil
		l.mu.Unlock()
	}
}

func (l *Lease) setErr(err error) {
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
}

// Holder is what the lease object says of this holder.
func (l *Lease) Holder() string { return l.rec.Holder }

// Lost is closed when a renewal finds the lease taken by another process,
// or when renewals failed for a whole TTL (another process may take it).
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Err is the last renewal error (nil when the last renewal succeeded).
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Release stops the renewal and deletes the lease object (if still ours).
func (l *Lease) Release(ctx context.Context) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	if l.lock != nil {
		return l.lock.Release()
	}
	l.cancel()
	<-l.done
	cur, err := readLease(ctx, l.s, l.name)
	if errors.Is(err, ErrNotExist) {
		return nil
	}
	if err == nil && cur.Token != l.rec.Token {
		return nil // taken over: not ours to delete
	}
	if err := l.s.Delete(ctx, l.name); err != nil {
		return fmt.Errorf("release lease: %w", err)
	}
	return nil
}

// ReadLease returns the holder and expiry of the data directory's lease
// (ErrNotExist when there is none: a local folder, or no command holds
// it). An expiry in the past means the next command takes it over.
func ReadLease(ctx context.Context, s Store) (holder string, expires time.Time, err error) {
	r, err := readLease(ctx, s, LeaseName)
	return r.Holder, r.Expires, err
}
