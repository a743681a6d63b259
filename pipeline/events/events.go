// Package events derives instrument lifecycle events (table
// schema.InstrumentEvents) by comparing each instruments snapshot of a source
// with the last known state of every (source, instrument_name).
//
// # The comparison
//
// A Differ is fed the schema.Instruments records of one snapshot of one
// source (Observe) and, at Finish, emits one row per event:
//
//   - listed: the instrument is not in the previous state. On the first
//     snapshot of a source (the state has no snapshot yet) every listed event
//     has initial = true: it is the start of the history, not a real listing.
//     An instrument that reappears after it was delisted is listed again
//     (initial = false).
//   - delisted: in the previous snapshot, not in this one; expired instead
//     when its expiration_time (as known from the state) is at or before this
//     snapshot's time.
//   - activated / deactivated: is_active went false → true / true → false
//     (field "is_active", old/new value "false"/"true").
//   - deployed / undeployed: the same for deployed (field "deployed").
//   - changed: any other compared venue field changed value, one event per
//     field with field = the column name and old_value/new_value as text. A
//     transition between null and a value is a change (the null side's value
//     column is null), and so is is_active or deployed going to or from null.
//
// Compared are the 25 venue fields except instrument_name (the key) and
// index_price: index prices move every snapshot, they are history, not
// events. The derived columns index_price_raw, creation_time,
// expiration_time and extra, and the meta columns, are not compared either.
// Every column of schema.Instruments not in that exclusion list is compared,
// so a venue field added to the schema is picked up (and makes old state
// files unreadable, see Load).
//
// Values are rendered as text: strings as is, float64 with
// strconv.FormatFloat(v, 'g', -1, 64), int64 in decimal, bool as
// "true"/"false"; e.g. maker_commission 0.0003 → 0.0002.
//
// Events are emitted sorted by instrument_name (bytewise), then by kind in
// the order of the Kind constants, then by field name, so the same inputs
// always give the same rows. When one snapshot holds several rows with the
// same instrument_name, the last one wins (Stats.Duplicates counts the
// others).
//
// # State
//
// A State holds the last known instruments of one source: per instrument its
// name and one compact byte string with the compared fields and the
// expiration time, in instrument_name order. It is kept in
// DATA/_state/instrument_events/<source>.state.zst (format version 3, S2, see
// state.go), replaced atomically by Save. A loaded State is a handle on that
// file (checked once by Load: CRC, order, payloads) and is read as a stream;
// a small state built in memory stays in memory. A State is never modified
// once built: Finish returns a new one, so a caller whose load fails keeps
// the previous one and simply does not Save. Close a State when done with
// it: a next state that Finish wrote to a temporary file and that was never
// saved is removed.
//
// Snapshots must be applied in time order: NewDiffer refuses a snapshot
// whose time is at or before the state's last snapshot with ErrOutOfOrder,
// including the same snapshot time (its events were already derived, and
// comparing a snapshot with itself would yield none). To recompute events,
// replay from the beginning with an empty state (NewState): replay in
// snapshot order gives exactly the same events. When the state file is lost,
// Rebuild (or a Builder) recreates it from the instruments rows of the last
// snapshot, from ClickHouse or from Parquet.
//
// # Memory
//
// A comparison holds at most Options.MemBytes (8 MiB by default) of rows,
// whatever the size of the listing: Observe encodes each row into a buffer
// and, when it is full, sorts it by name (the last row of a name winning)
// and writes it as a sorted run to an unlinked temporary file in
// Options.TempDir (in the background, while a second buffer fills). Finish
// merges the runs and the previous state, both in name order, so the events
// come out in their documented order without being collected, and writes
// the next state as it goes (into Options.TempDir, from where Save renames
// it into place); the merge runs in a goroutine of its own and hands the
// events over in batches to the caller's goroutine, which renders and
// emits them (a small comparison in memory, such as a replay's snapshot,
// merges on the caller's goroutine). A listing that fits in one buffer
// (MemBytes/2) never touches the disk before Save. Version 1 state files
// (unsorted) are still read: Load sorts them the same way, and the next
// Save writes version 3; version 2 files (zstd) are read as they are.
//
// The comparisons of a replay share a Reuse (Options.Reuse), which lends
// each the memory of the ones before and remembers the record each last
// encoded: the rows of the next snapshot that repeat it (found by name,
// every compared value equal on the Arrow buffers) are copied from it
// instead of encoded, which is most rows of a realistic listing (the memo
// shares the sorter's arena chunks that hold its rows, see memo.chunks).
// Such a row keeps the id of the row it is copied from (rowID), and
// Finish passes over the instruments whose rows have the previous state's
// ids without reading their names or payloads. The events and the state
// are exactly those of encoding and comparing every row.
//
// # Use
//
//	prev, err := events.Load(dataDir, source)          // empty state when no file
//	defer prev.Close()
//	opt := events.Options{TempDir: events.StateDir(dataDir)}
//	d, err := events.NewDiffer(prev, sinks.Snapshot{Time: t, RunID: id, Source: source}, opt)
//	// for each schema.Instruments record of the snapshot (e.g. from transform's Emit):
//	err = d.Observe(rec)                               // (d.Close() to abandon it)
//	stats, next, err := d.Finish(writeToSinks)         // schema.InstrumentEvents records
//	defer next.Close()
//	// after the sinks committed the events:
//	err = next.Save(dataDir)
//
// The rows observed are taken to be the whole listing: an instrument not
// among them is delisted. Do not call Finish for a listing whose download or
// decoding failed.
package events

import (
	"errors"
	"fmt"
	"os"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/optlake/optlake/schema"
)

// Kind is the kind of an event. The order of the constants is the order of
// events of one instrument in the output.
type Kind uint8

// Event kinds, in output order.
const (
	Listed Kind = iota
	Delisted
	Expired
	Activated
	Deactivated
	Deployed
	Undeployed
	Changed
	NumKinds = iota // number of kinds
)

var kindNames = [NumKinds]string{"listed", "delisted", "expired", "activated", "deactivated", "deployed", "undeployed", "changed"}

// String returns the value of the event column: "listed", "delisted", ….
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// ErrOutOfOrder is returned (wrapped) by NewDiffer when the snapshot is not
// after the state's last snapshot.
var ErrOutOfOrder = errors.New("instrument events: snapshot out of order")

// ErrCorruptState is returned (wrapped) by Load when the state file cannot be
// decoded: truncated, altered, written by another format version or for
// another set of compared fields. Rebuild the state (Rebuild) or delete the
// file to start the history over.
var ErrCorruptState = errors.New("instrument events: corrupt state file")

// Options tune a Differ.
type Options struct {
	// BatchRows bounds the rows of one emitted record (default schema.DefaultBatchRows).
	BatchRows int
	// Mem allocates the emitted records (default memory.DefaultAllocator).
	Mem memory.Allocator
	// MemBytes bounds the memory holding the observed rows (default
	// 8 MiB, two buffers of half of it). Rows beyond it are sorted and
	// spilled to temporary files.
	MemBytes int
	// Background: a Differ encodes the observed records on a goroutine of
	// its own (holding each record until then), so that Observe costs its
	// caller little more than the rows' checks; see encoder. Without it,
	// Observe encodes the rows before it returns. A small record (fewer
	// than 4096 rows: a realistic listing's snapshot) is encoded in Observe
	// all the same when no other waits: it is still in the caller's cache,
	// and a goroutine would read it cold.
	Background bool
	// backgroundMin overrides the 4096 rows (tests).
	backgroundMin int
	// noMemo: the encoder neither uses nor keeps Reuse's memos (tests).
	noMemo bool
	// encoderGate, when not nil, holds the encoder's goroutine before its
	// first record until it is closed (tests).
	encoderGate chan struct{}
	// Reuse, when not nil, lends the memory of finished comparisons to
	// this one (and takes its back): share one among the comparisons of
	// a replay.
	Reuse *Reuse
	// TempDir holds the spilled rows and the next state while a large
	// snapshot is compared (default os.TempDir()). Use StateDir(dataDir):
	// Save then renames the next state into place instead of copying it,
	// and the temporary files are hidden ".….tmp-*" files, which
	// datadir.CleanTemp removes after a crash.
	TempDir string
}

func (o *Options) defaults() {
	if o.BatchRows <= 0 {
		o.BatchRows = schema.DefaultBatchRows
	}
	if o.Mem == nil {
		o.Mem = memory.DefaultAllocator
	}
	if o.MemBytes <= 0 {
		o.MemBytes = defaultMemBytes
	}
	if o.TempDir == "" {
		o.TempDir = os.TempDir()
	}
	if o.backgroundMin <= 0 {
		o.backgroundMin = 4096
	}
}

// Stats counts what a comparison saw and produced.
type Stats struct {
	Rows        int64           // instrument rows observed
	Duplicates  int64           // rows whose instrument_name came earlier in the same snapshot (the last row wins)
	Instruments int             // distinct instruments in the new state
	Events      int64           // events emitted
	ByKind      [NumKinds]int64 // events emitted per Kind
}
