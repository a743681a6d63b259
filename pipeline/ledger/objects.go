package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/optlake/optlake/storage"
)

// CallTimeout bounds one call of the ledger to its store (a small object's
// PUT, GET, DELETE or a listing).
const CallTimeout = 30 * time.Second

// objects is the data directory's store seen under Dir/. Its calls outlive
// the caller's cancellation: the first SIGTERM or SIGINT cancels a run's
// ctx, and the snapshot in flight still finishes and must be recorded (a
// second signal aborts it, and that too is recorded: pending). Each call
// is bounded by CallTimeout instead, so a store that hangs cannot hold the
// process.
type objects struct{ st storage.Store }

func (o objects) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), CallTimeout)
}

func (o objects) put(ctx context.Context, name string, data []byte) error {
	ctx, cancel := o.call(ctx)
	defer cancel()
	return o.st.Put(ctx, Dir+"/"+name, data)
}

// get returns nil, nil when name does not exist.
func (o objects) get(ctx context.Context, name string) ([]byte, error) {
	ctx, cancel := o.call(ctx)
	defer cancel()
	b, err := storage.ReadAll(ctx, o.st, Dir+"/"+name)
	if errors.Is(err, storage.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

func (o objects) delete(ctx context.Context, name string) error {
	ctx, cancel := o.call(ctx)
	defer cancel()
	return o.st.Delete(ctx, Dir+"/"+name)
}

// list returns the names (relative to Dir/) that start with prefix.
func (o objects) list(ctx context.Context, prefix string) ([]string, error) {
	return o.names(ctx, prefix, o.st.List)
}

// listDir returns the names (relative to Dir/) one level below dir (a
// name ending in '/'), its sub-folders ending in '/'.
func (o objects) listDir(ctx context.Context, dir string) ([]string, error) {
	return o.names(ctx, dir, o.st.ListDir)
}

func (o objects) names(ctx context.Context, prefix string, list func(context.Context, string) ([]storage.Info, error)) ([]string, error) {
	ctx, cancel := o.call(ctx)
	defer cancel()
	infos, err := list(ctx, Dir+"/"+prefix)
	if err != nil {
		return nil, fmt.Errorf("list %s/%s: %w", Dir, prefix, err)
	}
	out := make([]string, 0, len(infos))
	for _, i := range infos {
		out = append(out, strings.TrimPrefix(i.Name, Dir+"/"))
	}
	return out, nil
}
