package storage

import (
	"context"
	"strings"
)

// KV is a Store seen under a folder as a plain key-value store with no
// context arguments: it satisfies pipeline/ledger.Store (Put atomic, Get of
// a missing name errors.Is ErrNotExist, List by prefix, Delete idempotent),
// so the load ledger lives in the data directory wherever that is:
//
//	ledger.New(storage.KV(ctx, st, ledger.Dir), nil)
type KVStore struct {
	ctx    context.Context
	s      Store
	folder string // "" or "x/"
}

// KV returns the key-value view of s under folder; ctx bounds every call.
func KV(ctx context.Context, s Store, folder string) KVStore {
	if folder != "" && !strings.HasSuffix(folder, "/") {
		folder += "/"
	}
	return KVStore{ctx: ctx, s: s, folder: folder}
}

func (k KVStore) Put(name string, data []byte) error { return k.s.Put(k.ctx, k.folder+name, data) }

func (k KVStore) Get(name string) ([]byte, error) { return ReadAll(k.ctx, k.s, k.folder+name) }

func (k KVStore) Delete(name string) error { return k.s.Delete(k.ctx, k.folder+name) }

func (k KVStore) List(prefix string) ([]string, error) {
	l, err := k.s.List(k.ctx, k.folder+prefix)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(l))
	for _, i := range l {
		out = append(out, strings.TrimPrefix(i.Name, k.folder))
	}
	return out, nil
}
