package pipeline

import (
	"context"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
)

// Fanout hands every record to every sink, each in its own goroutine so
// decoding overlaps encoding and sending. A sink that fails stops receiving
// records; the others go on. Emit is the emit function of the decoders;
// end with Commit or Abort.
type Fanout struct {
	lanes []*lane
}

type item struct {
	t   *schema.Table
	rec arrow.Record
}

type lane struct {
	sink    sinks.Sink
	snap    sinks.Snapshot
	ch      chan item
	done    chan struct{}
	order   []*schema.Table
	writers map[*schema.Table]sinks.Writer
	err     error
}

// NewFanout opens a lane per sink; the tables in eager get a writer even if
// no row arrives (an empty listing is a fact worth recording).
func NewFanout(ctx context.Context, ss []sinks.Sink, snap sinks.Snapshot, eager ...*schema.Table) *Fanout {
	f := &Fanout{}
	for _, s := range ss {
		l := &lane{sink: s, snap: snap, ch: make(chan item, 2), done: make(chan struct{}),
			writers: map[*schema.Table]sinks.Writer{}}
		for _, t := range eager {
			l.open(ctx, t)
		}
		go l.run(ctx)
		f.lanes = append(f.lanes, l)
	}
	return f
}

func (l *lane) open(ctx context.Context, t *schema.Table) sinks.Writer {
	if w, ok := l.writers[t]; ok || l.err != nil {
		return w
	}
	w, err := l.sink.Open(ctx, t, l.snap)
	if err != nil {
		l.err = err
		return nil
	}
	l.writers[t] = w
	l.order = append(l.order, t)
	return w
}

func (l *lane) run(ctx context.Context) {
	defer close(l.done)
	for it := range l.ch {
		if l.err == nil {
			if w := l.open(ctx, it.t); w != nil {
				if err := w.Write(ctx, it.rec); err != nil {
					l.err = err
				}
			}
		}
		it.rec.Release()
	}
}

// Emit hands rec (retained for each sink) to every lane.
func (f *Fanout) Emit(t *schema.Table, rec arrow.Record) error {
	for _, l := range f.lanes {
		rec.Retain()
		l.ch <- item{t: t, rec: rec}
	}
	return nil
}

func (f *Fanout) wait() {
	for _, l := range f.lanes {
		close(l.ch)
	}
	for _, l := range f.lanes {
		<-l.done
	}
}

// Abort stops every lane and aborts its writers: nothing is committed.
func (f *Fanout) Abort() {
	f.wait()
	for _, l := range f.lanes {
		for _, w := range l.writers {
			w.Abort()
		}
	}
}

// Commit finishes every lane: a lane without error commits its writers in
// the order they were opened (the data table before its rejects). The
// result is keyed by sink name.
func (f *Fanout) Commit(ctx context.Context) map[string]SinkResult {
	f.wait()
	out := map[string]SinkResult{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, l := range f.lanes {
		wg.Add(1)
		go func(l *lane) {
			defer wg.Done()
			var sr SinkResult
			if l.err != nil {
				for _, w := range l.writers {
					w.Abort()
				}
				sr.Error = oneLine(l.err)
				sr.rejected = sinks.IsRejected(l.err)
			} else {
				for _, t := range l.order {
					c, err := l.writers[t].Commit(ctx)
					if err != nil {
						sr.Error = oneLine(err)
						sr.rejected = sr.rejected || sinks.IsRejected(err)
						continue
					}
					if t == schema.Rejects {
						sr.Rejects += c.Rows
					} else {
						sr.Rows += c.Rows
					}
					sr.Bytes += c.Bytes
					sr.Files = append(sr.Files, c.Where)
					sr.addSnapshot(t.Name, c.TableSnapshot)
				}
			}
			mu.Lock()
			out[l.sink.Name()] = sr
			mu.Unlock()
		}(l)
	}
	wg.Wait()
	return out
}
