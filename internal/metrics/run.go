package metrics

import "time"

// Run is what Observe records of one finished snapshot run. The caller
// converts its run summary (pipeline.Summary) into it, so this package
// does not depend on the pipeline.
type Run struct {
	SnapshotTime time.Time // zero: the time of Observe
	DurationMS   int64
	OK           bool
	Error        string // first failure, one line
	Endpoints    []EndpointRun
	// Pending is, per sink, what the load ledger still holds after the run.
	Pending []Pending
	// CaughtUp are the earlier snapshots loaded (or tried) before the run.
	CaughtUp []CaughtUp
	// UnfinishedCompactions counts compaction journals left in the data
	// directory after the run (a crash; readers of a bucket may see rows
	// twice until the next command recovers them).
	UnfinishedCompactions int
}

// EndpointRun is one endpoint of a run.
type EndpointRun struct {
	Endpoint   string
	Status     string // ok | failed | archived
	Requests   int
	Rows       int64
	Rejects    int64
	Duplicates int64 // of the rejects, rows whose key came earlier in the snapshot
	Events     int64
	Overflow   int64 // account fields past the column budget
	Bytes      int64
	DurationMS int64
	Error      string
	Sinks      map[string]SinkRun
	// EventsSkipped is why the listing's instrument events were not
	// written ("" when they were): a snapshot older than the events
	// state, a state not saved.
	EventsSkipped string
}

// SinkRun is what one sink made of one endpoint.
type SinkRun struct {
	Rows    int64
	Rejects int64
	Bytes   int64
	Error   string
}

// Pending is one sink's backlog in the load ledger.
type Pending struct {
	Sink    string
	Pending int        // snapshots with a pending load
	Oldest  *time.Time // the oldest pending snapshot (nil: none)
}

// CaughtUp is one earlier snapshot the catch-up loaded (OK) into Sinks.
type CaughtUp struct {
	OK    bool
	Sinks []string
}
