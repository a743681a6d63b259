package storage

import (
	"context"
	"strings"
	"time"
)

// KV is a Store seen under a folder as a plain key-value store with no
// context arguments: it satisfies pipeline/ledger.Store (Put atomic, Get of
// a missing name errors.Is ErrNotExist, List by prefix, Delete idempotent),
// so the load ledger lives in the data directory wherever that is:
//
//	ledger.New(storage.KV(ctx, st, ledger.Dir), nil)
type KVStore struct {
	ctx     context.Context
	s       Store
	folder  string        // "" or "x/"
	timeout time.Duration // of each call (0: none beyond ctx)
}

// KV returns the key-value view of s under folder; ctx bounds every call.
func KV(ctx context.Context, s Store, folder string) KVStore {
	if folder != "" && !strings.HasSuffix(folder, "/") {
		folder += "/"
	}
	return KVStore{ctx: ctx, s: s, folder: folder}
}

// Within bounds each call to d as well.
func (k KVStore) Within(d time.Duration) KVStore {
	k.timeout = d
	return k
}

func (k KVStore) call() (context.Context, context.CancelFunc) {
	if k.timeout > 0 {
		return context.WithTimeout(k.ctx, k.timeout)
	}
	return k.ctx, func() {}
}

func (k KVStore) Put(name string, data []byte) error {
	ctx, cancel := k.call()
	defer cancel()
	return k.s.Put(ctx, k.folder+name, data)
}

func (k KVStore) Get(name string) ([]byte, error) {
	ctx, cancel := k.call()
	defer cancel()
	return ReadAll(ctx, k.s, k.folder+name)
}

func (k KVStore) Delete(name string) error {
	ctx, cancel := k.call()
	defer cancel()
	return k.s.Delete(ctx, k.folder+name)
}

func (k KVStore) List(prefix string) ([]string, error) {
	ctx, cancel := k.call()
	defer cancel()
	l, err := k.s.List(ctx, k.folder+prefix)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(l))
	for _, i := range l {
		out = append(out, strings.TrimPrefix(i.Name, k.folder))
	}
	return out, nil
}
