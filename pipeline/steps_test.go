package pipeline_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/pipeline/infer"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/memsink"
	"github.com/optlake/optlake/storage"
)

// stepLog records, in order, the steps a runner reports (Config.Step) and
// the tables its sink commits.
type stepLog struct {
	mu  sync.Mutex
	all []string
}

func (l *stepLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, s)
}

func (l *stepLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.all
	l.all = nil
	return out
}

// orderSink is an in-memory sink that logs each commit ("commit TABLE"),
// and can be down.
type orderSink struct {
	*memsink.Sink
	log  *stepLog
	down atomic.Bool
}

func (s *orderSink) Open(ctx context.Context, t *schema.Table, snap sinks.Snapshot) (sinks.Writer, error) {
	if s.down.Load() {
		return nil, context.DeadlineExceeded
	}
	w, err := s.Sink.Open(ctx, t, snap)
	if err != nil {
		return nil, err
	}
	return &orderWriter{Writer: w, log: s.log, table: t.Name}, nil
}

type orderWriter struct {
	sinks.Writer
	log   *stepLog
	table string
}

func (w *orderWriter) Commit(ctx context.Context) (sinks.Committed, error) {
	c, err := w.Writer.Commit(ctx)
	if err == nil {
		w.log.add("commit " + w.table)
	}
	return c, err
}

// TestStepsInOrderEveryMode: a live run, a catch-up and a replay take a
// snapshot through the same steps in the same order (pipeline/steps.go):
// each body durable in the raw archive (live) before its rows commit, the
// listing's events after its rows, the ledger's outcome after both; they
// differ only in the archive write and the runs rows.
func TestStepsInOrderEveryMode(t *testing.T) {
	bodies := map[string]string{
		pathOf(t, "instruments"):     listingOf(`{"instrument_name":"A","strike":1}`, `{"instrument_name":"B","strike":2}`),
		pathOf(t, "account_balance"): `[{"currency":"BTC","balance":1}]`,
	}
	rig := func(log *stepLog) (*fakeRig, *orderSink) {
		s := &orderSink{Sink: memsink.New("mem"), log: log}
		return newFakeRigWith(t, []string{"instruments", "account_balance"}, &fakeFetcher{bodies: bodies}, func(c *pipeline.Config) {
			c.Sinks, c.Events, c.Step = []sinks.Sink{s}, true, log.add
		}), s
	}
	loaded := []string{
		"commit instruments", pipeline.StepEvents, "commit instrument_events", pipeline.StepSettle,
		"commit account_balance", "commit inferred_columns", pipeline.StepSettle,
	}
	live := []string{
		pipeline.StepArchived, "commit instruments", pipeline.StepEvents, "commit instrument_events", pipeline.StepSettle,
		pipeline.StepArchived, "commit account_balance", "commit inferred_columns", pipeline.StepSettle,
		"commit runs",
	}
	ctx := context.Background()

	// Live, then a replay of its archive into an empty sink.
	log := &stepLog{}
	a, _ := rig(log)
	if sum := a.r.Run(ctx); !sum.OK {
		t.Fatal(sum.Error)
	}
	if got := log.take(); !slices.Equal(got, live) {
		t.Errorf("live run:\n%q\nwant\n%q", got, live)
	}
	again := &orderSink{Sink: memsink.New("again"), log: log}
	r, err := pipeline.New(pipeline.Config{
		Client: &fakeFetcher{}, Store: storage.NewLocal(a.dir), Sinks: []sinks.Sink{again}, Source: "fake", Events: true,
		Endpoints: endpoints(t, "instruments", "account_balance"), Schemas: infer.NewRegistry(), Step: log.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := r.Replay(ctx, pipeline.ReplayOptions{}); err != nil || !res.OK() {
		t.Fatalf("replay: %v %+v", err, res)
	}
	if got := log.take(); !slices.Equal(got, loaded) {
		t.Errorf("replay:\n%q\nwant\n%q", got, loaded)
	}

	// A live run with the sink down, then its catch-up.
	b, sink := rig(log)
	sink.down.Store(true)
	if sum := b.r.Run(ctx); sum.OK {
		t.Fatal("the run with the sink down succeeded")
	}
	log.take()
	sink.down.Store(false)
	// The next run's runner (a new process: the inferred schema as saved).
	next, err := pipeline.New(pipeline.Config{
		Client: &fakeFetcher{}, Store: storage.NewLocal(b.dir), Sinks: []sinks.Sink{sink}, Source: "fake", Events: true, Ledger: true,
		Endpoints: endpoints(t, "instruments", "account_balance"), Schemas: infer.NewRegistry(), Step: log.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := next.CatchUp(ctx, pipeline.CatchUpOptions{}); err != nil || len(res.Snapshots) != 1 || !res.Snapshots[0].OK {
		t.Fatalf("catch-up: %v %+v", err, res)
	}
	// (Catch-up takes a snapshot's endpoints in the order of their names.)
	if got, want := byEndpoint(log.take()), byEndpoint(append(slices.Clone(loaded), "commit runs")); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("catch-up:\n%q\nwant\n%q", got, want)
	}
}

// byEndpoint cuts a step log into its endpoints' steps (each ends with
// StepSettle; what follows the last is kept last) and orders them.
func byEndpoint(log []string) [][]string {
	var eps [][]string
	for i := slices.Index(log, pipeline.StepSettle); i >= 0; i = slices.Index(log, pipeline.StepSettle) {
		eps, log = append(eps, log[:i+1]), log[i+1:]
	}
	slices.SortFunc(eps, slices.Compare)
	return append(eps, log)
}
