package compact

import (
	"bytes"
	"context"
	"errors"
	"math"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"

	pq "github.com/optlake/optlake/sinks/parquet"

	"github.com/optlake/optlake/internal/arrowpool"
)

// A day is compacted by an external merge sort with bounded memory:
//
//  1. The per-snapshot files are read in batches into a chunk of at most
//     Options.ChunkBytes of Arrow data; the chunk is sorted in memory by
//     the key and spilled to a sorted run (each column's Arrow buffers,
//     S2: runfile.go; under .compact/tmp, never in a table folder). Small
//     files share a chunk.
//  2. The runs, and the day's earlier compacted files (already sorted),
//     are merged by a heap that holds one small batch of each: at most
//     mergeFanIn inputs at a time; more runs are first merged into longer
//     runs, a level at a time.
//  3. The merged rows go to the output in batches (output.go).
//
// Memory is the chunk, plus fan-in × batch rows, plus the output's
// buffered row group (compressed pages): independent of the day's size.

// cursor yields the rows of one sorted input, a batch at a time, with the
// union schema.
type cursor interface {
	// next returns the next batch (nil at the end); the cursor keeps
	// ownership, the batch is valid until the following call.
	next() (arrow.Record, error)
	close() error
}

// sorter turns unsorted record batches into sorted runs.
type sorter struct {
	mem      memory.Allocator
	pool     *arrowpool.Pool // the runs' gather and spill buffers
	u        *arrow.Schema
	key      []string
	tmp      string
	budget   int64
	runBatch int
	dict     *keyDict // when set, the rows' ids are kept (keydict.go)

	chunk  []arrow.Record
	views  []keyView
	ids    [][]uint32 // of chunk, with dict (nil for a record without)
	size   int64
	runs   []string   // spilled run files
	runIDs [][]uint32 // of runs, with dict: their rows' ids (nil: none)
}

// add takes a batch (with schema u; the sorter retains it).
func (s *sorter) add(rec arrow.Record) error {
	kv, err := newKeyView(rec, s.key)
	if err != nil {
		return err
	}
	rec.Retain()
	s.chunk = append(s.chunk, rec)
	s.views = append(s.views, kv)
	if s.dict != nil {
		s.ids = append(s.ids, s.dict.idsOf(&kv, int(rec.NumRows())))
	}
	s.size += util.TotalRecordSize(rec)
	if s.size >= s.budget {
		return s.spill()
	}
	return nil
}

type rowRef struct{ rec, row int32 }

// spill sorts the chunk and writes it as a run.
func (s *sorter) spill() error {
	defer func() {
		for _, r := range s.chunk {
			r.Release()
		}
		s.chunk, s.views, s.ids, s.size = s.chunk[:0], s.views[:0], s.ids[:0], 0
	}()
	var refs []rowRef
	for k, r := range s.chunk {
		for i := range int(r.NumRows()) {
			refs = append(refs, rowRef{int32(k), int32(i)})
		}
	}
	if len(refs) == 0 {
		return nil
	}
	s.sortRefs(refs, s.views, s.keyedIDs())
	if err := copyable(s.mem, s.u); err != nil {
		return err
	}
	w, err := newRunWriter(s.pool, s.u, s.tmp)
	if err != nil {
		return err
	}
	for start := 0; start < len(refs); start += s.runBatch {
		if err := w.writeRows(s.chunk, refs[start:min(start+s.runBatch, len(refs))]); err != nil {
			w.abort()
			return err
		}
	}
	path, err := w.finish()
	if err != nil {
		return err
	}
	s.runs = append(s.runs, path)
	if s.dict != nil {
		s.runIDs = append(s.runIDs, s.sortedIDs(refs))
	}
	return nil
}

// keyed reports that every record of the chunk has ids.
func (s *sorter) keyed() bool {
	return s.dict != nil && len(s.ids) == len(s.chunk) && !slices.ContainsFunc(s.ids, func(x []uint32) bool { return x == nil })
}

// keyedIDs are the chunk's ids when every record has them, else nil.
func (s *sorter) keyedIDs() [][]uint32 {
	if s.keyed() {
		return s.ids
	}
	return nil
}

// sortRefs sorts refs, made in (rec, row) order, stably by the key
// (compareRows). With ids (every record's, of s.dict), by the ranks of the
// ids first — the order of their prefix columns, equal only for equal
// values — as integers, then the rows of one rank by the rest of the key:
// a replay's snapshots are not quite in the key's order, and the stable
// sort's string compares took 0.077 of a replay's ~1.6 CPU-s (issue 33).
func (s *sorter) sortRefs(refs []rowRef, views []keyView, ids [][]uint32) {
	if ids == nil || len(refs) > math.MaxUint32 {
		cmp := func(a, b rowRef) int {
			return compareRows(&views[a.rec], int(a.row), &views[b.rec], int(b.row))
		}
		if !slices.IsSortedFunc(refs, cmp) {
			slices.SortStableFunc(refs, cmp)
		}
		return
	}
	rank := s.dict.ranks() // every id of the chunk has one: given at add
	keys := make([]uint64, len(refs))
	sorted := true
	for i, r := range refs {
		keys[i] = uint64(rank[ids[r.rec][r.row]])<<32 | uint64(i)
		sorted = sorted && (i == 0 || keys[i] > keys[i-1])
	}
	if !sorted {
		keys = sortKeys(keys, len(rank)) // the position in the low bits keeps ties in order
		in := slices.Clone(refs)
		for i, k := range keys {
			refs[i] = in[uint32(k)]
		}
	}
	rest := func(a, b rowRef) int {
		return compareRowsFrom(&views[a.rec], int(a.row), &views[b.rec], int(b.row), s.dict.cols)
	}
	for lo := 0; lo < len(refs); {
		hi := lo + 1
		for hi < len(refs) && keys[hi]>>32 == keys[lo]>>32 {
			hi++
		}
		if hi-lo > 1 && !slices.IsSortedFunc(refs[lo:hi], rest) {
			slices.SortStableFunc(refs[lo:hi], rest)
		}
		lo = hi
	}
}

// sortKeys sorts keys, each a rank (< ranks) in the high 32 bits and a
// distinct position in the low: by counting the ranks when there are not
// many more of them than keys (a snapshot's few thousand names of the
// day's ~8,500: a few times faster than comparing), else by comparing.
func sortKeys(keys []uint64, ranks int) []uint64 {
	if ranks > 4*len(keys)+1024 {
		slices.Sort(keys)
		return keys
	}
	at := make([]int, ranks+1)
	for _, k := range keys {
		at[k>>32+1]++
	}
	for r := 1; r < len(at); r++ {
		at[r] += at[r-1]
	}
	out := make([]uint64, len(keys))
	for _, k := range keys { // in position order: ties stay in it
		out[at[k>>32]] = k
		at[k>>32]++
	}
	return out
}

// sortedIDs are the ids of refs' rows (nil unless the chunk is keyed).
func (s *sorter) sortedIDs(refs []rowRef) []uint32 {
	if !s.keyed() {
		return nil
	}
	out := make([]uint32, len(refs))
	for i, r := range refs {
		out[i] = s.ids[r.rec][r.row]
	}
	return out
}

// sorted hands over the chunk as a run in memory, its rows put in key
// order by a permutation (the rows stay where they are), and its Arrow
// bytes.
func (s *sorter) sorted() (*memRun, int64) {
	ids := s.keyedIDs()
	chunk, views, size := s.chunk, s.views, s.size
	s.chunk, s.views, s.ids, s.size = nil, nil, nil, 0
	if len(chunk) == 0 {
		return nil, 0
	}
	var order []rowRef
	for k, r := range chunk {
		for i := range int(r.NumRows()) {
			order = append(order, rowRef{int32(k), int32(i)})
		}
	}
	s.sortRefs(order, views, ids)
	return &memRun{key: s.key, recs: chunk, views: views, order: order, ids: ids}, size
}

// finish spills what is left and returns the runs.
func (s *sorter) finish() ([]string, error) {
	if len(s.chunk) > 0 {
		if err := s.spill(); err != nil {
			return s.runs, err
		}
	}
	return s.runs, nil
}

// mergeInput is one input's current row: a cursor's, a batch at a time,
// or a run in memory's (memCursor), row by row through its order.
type mergeInput struct {
	c   cursor
	mc  *memCursor   // c, when it is a run in memory
	rec arrow.Record // nil at the end of the input
	kv  *keyView     // rec's
	row int
	own keyView // a cursor's batch's view (kv points here)
	pos int     // mc's position in its order

	// With integer keys (mergeKeys): the current row's id and its rank;
	// a cursor's ids in its row order and the next one's position.
	id, key uint32
	ids     []uint32
	idPos   int
}

func newMergeInput(c cursor) *mergeInput {
	it := &mergeInput{c: c, row: -1, pos: -1}
	it.mc, _ = c.(*memCursor)
	return it
}

// advance moves the input to its next row, loading the next batch when the
// current one is done; false at the end of its input. With mk, the row's
// id and rank are set too.
func (it *mergeInput) advance(key []string, mk *mergeKeys) (bool, error) {
	if m := it.mc; m != nil {
		it.pos++
		if it.pos >= len(m.order) {
			it.rec, it.kv = nil, nil
			return false, nil
		}
		r := m.order[it.pos]
		it.rec, it.kv, it.row = m.recs[r.rec], &m.views[r.rec], int(r.row)
		if mk != nil {
			it.id = m.ids[r.rec][r.row]
			it.key = mk.rank[it.id]
		}
		return true, nil
	}
	it.row++
	for it.rec == nil || it.row >= int(it.rec.NumRows()) {
		rec, err := it.c.next()
		if err != nil {
			return false, err
		}
		if rec == nil {
			it.rec, it.kv = nil, nil
			return false, nil
		}
		kv, err := newKeyView(rec, key)
		if err != nil {
			return false, err
		}
		it.rec, it.own, it.row = rec, kv, 0
		it.kv = &it.own
	}
	if mk != nil {
		if it.idPos >= len(it.ids) {
			return false, errors.New("merge: a run has more rows than ids")
		}
		it.id = it.ids[it.idPos]
		it.idPos++
		it.key = mk.rank[it.id]
	}
	return true, nil
}

// loserTree picks the smallest of the inputs' current rows: after the
// winner advances, one match per level of the tree finds the next (a heap
// plays two), ties going to the earlier input.
type loserTree struct {
	in   []*mergeInput
	tree []int      // tree[0]: the winner; tree[n], n ≥ 1: the loser of match n
	mk   *mergeKeys // integer keys, or nil: compareRows
}

func newLoserTree(in []*mergeInput, mk *mergeKeys) *loserTree {
	k := len(in)
	t := &loserTree{in: in, tree: make([]int, max(k, 1)), mk: mk}
	if k <= 1 {
		return t
	}
	// Leaves are k..2k-1 (input i at k+i), matches 1..k-1, the children of
	// n being 2n and 2n+1: a complete tree for any k.
	win := make([]int, 2*k)
	for i := range k {
		win[k+i] = i
	}
	for n := k - 1; n >= 1; n-- {
		a, b := win[2*n], win[2*n+1]
		if t.less(b, a) {
			a, b = b, a
		}
		win[n], t.tree[n] = a, b
	}
	t.tree[0] = win[1]
	return t
}

// less orders inputs a and b by their current rows, an ended input last,
// ties by input order.
func (t *loserTree) less(a, b int) bool {
	x, y := t.in[a], t.in[b]
	if x.rec == nil || y.rec == nil {
		return y.rec == nil && (x.rec != nil || a < b)
	}
	first := 0
	if t.mk != nil {
		if x.key != y.key {
			return x.key < y.key
		}
		first = t.mk.prefix // equal ranks: equal prefixes
	}
	if c := compareRowsFrom(x.kv, x.row, y.kv, y.row, first); c != 0 {
		return c < 0
	}
	return a < b
}

// replay plays the winner's matches again after it advanced.
func (t *loserTree) replay() {
	k := len(t.in)
	w := t.tree[0]
	for n := (w + k) / 2; n >= 1; n /= 2 {
		if t.less(t.tree[n], w) {
			w, t.tree[n] = t.tree[n], w
		}
	}
	t.tree[0] = w
}

// merge merges the cursors (each sorted by key) into emit, in key order,
// ties in cursor order; emit gets the cursor's index with the row. It
// closes the cursors.
func merge(ctx context.Context, cursors []cursor, key []string, emit func(src int, rec arrow.Record, row int) error) error {
	return mergeKeyed(ctx, cursors, nil, key, nil, emit)
}

// mergeKeyed is merge comparing integer keys first when mk is set: ids[k]
// are cursor k's rows' ids (unused for a run in memory, which has its
// own). With mk.record, the merged rows' ids are appended to mk.out.
func mergeKeyed(ctx context.Context, cursors []cursor, ids [][]uint32, key []string, mk *mergeKeys, emit func(src int, rec arrow.Record, row int) error) (err error) {
	defer func() {
		for _, c := range cursors {
			if cerr := c.close(); err == nil {
				err = cerr
			}
		}
	}()
	if len(cursors) == 0 {
		return nil
	}
	in := make([]*mergeInput, len(cursors))
	for k, c := range cursors {
		in[k] = newMergeInput(c)
		if mk != nil {
			in[k].ids = ids[k]
		}
		if _, err := in[k].advance(key, mk); err != nil {
			return err
		}
	}
	t := newLoserTree(in, mk)
	record := mk != nil && mk.record
	for n := 1; ; n++ {
		if n%65536 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		w := t.tree[0]
		it := in[w]
		if it.rec == nil {
			return nil
		}
		if err := emit(w, it.rec, it.row); err != nil {
			return err
		}
		if record {
			mk.out = append(mk.out, it.id)
		}
		if _, err := it.advance(key, mk); err != nil {
			return err
		}
		t.replay()
	}
}

// mergeRuns merges the runs until at most fanIn of them are spilled, a
// level at a time: each group of fanIn spilled runs (with the runs in
// memory among them: they hold no read buffer) becomes one longer run. It
// takes ownership of runs: those not returned are merged or dropped.
func mergeRuns(ctx context.Context, mem memory.Allocator, pool *arrowpool.Pool, u *arrow.Schema, key []string, dict *keyDict, tmp string, runs []Run, fanIn, batch int) ([]Run, error) {
	for spilled(runs) > fanIn {
		var next []Run
		for len(runs) > 0 {
			n, files := 0, 0
			for n < len(runs) && (files < fanIn || runs[n].Path == "") {
				if runs[n].Path != "" {
					files++
				}
				n++
			}
			group := runs[:n]
			runs = runs[n:]
			if len(group) == 1 {
				next = append(next, group[0])
				continue
			}
			out, err := mergeToRun(ctx, mem, pool, u, key, dict, tmp, group, batch)
			if err != nil {
				dropRuns(runs)
				dropRuns(next)
				return nil, err
			}
			next = append(next, out)
		}
		runs = next
	}
	return runs, nil
}

// spilled counts the runs on disk.
func spilled(runs []Run) int {
	n := 0
	for _, r := range runs {
		if r.Path != "" {
			n++
		}
	}
	return n
}

// mergeToRun merges the runs (taking ownership) into one spilled run of
// schema u, in batches of batch rows; when every run has ids of dict, so
// has the merged run (and the merge compares integers).
func mergeToRun(ctx context.Context, mem memory.Allocator, pool *arrowpool.Pool, u *arrow.Schema, key []string, dict *keyDict, tmp string, group []Run, batch int) (Run, error) {
	mk := keysFor(dict, group, true)
	ids := runIDs(group)
	cursors, err := openRuns(mem, pool, u, group)
	if err != nil {
		return Run{}, err
	}
	w, err := newRunWriter(pool, u, tmp)
	if err != nil {
		closeAll(cursors)
		return Run{}, err
	}
	g := newGatherer(pool, u)
	defer g.release()
	err = mergeKeyed(ctx, cursors, ids, key, mk, func(src int, rec arrow.Record, row int) error {
		g.add(src, rec, row)
		if g.rows() >= batch {
			return g.writeTo(w)
		}
		return nil
	})
	if err == nil {
		err = g.writeTo(w)
	}
	if err != nil {
		w.abort()
		return Run{}, err
	}
	path, err := w.finish()
	if err != nil {
		return Run{}, err
	}
	out := Run{Path: path, Schema: u}
	if mk != nil {
		out.keyed, out.ids = true, mk.out
	}
	return out, nil
}

// runIDs are the runs' ids, for mergeKeyed.
func runIDs(runs []Run) [][]uint32 {
	out := make([][]uint32, len(runs))
	for i, r := range runs {
		out[i] = r.ids
	}
	return out
}

// openRuns opens the runs (taking ownership: on error, those not opened
// are dropped) as cursors yielding schema u.
func openRuns(mem memory.Allocator, pool *arrowpool.Pool, u *arrow.Schema, runs []Run) ([]cursor, error) {
	var cursors []cursor
	for i, r := range runs {
		c, err := r.open(mem, pool, u)
		if err != nil {
			closeAll(cursors)
			dropRuns(runs[i+1:])
			return nil, err
		}
		cursors = append(cursors, c)
	}
	return cursors, nil
}

// open returns the run's cursor, its rows with schema u; the cursor owns
// the run (deletes its file, releases its records).
func (r Run) open(mem memory.Allocator, pool *arrowpool.Pool, u *arrow.Schema) (cursor, error) {
	if r.packed != nil {
		r.packed.release()
		return nil, errors.New("a packed run is merged once unpacked")
	}
	if r.mem != nil {
		if !sameColumns(r.Schema, u) {
			if err := r.mem.conform(mem, u); err != nil {
				r.mem.release()
				return nil, err
			}
		}
		return &memCursor{memRun: r.mem}, nil
	}
	rc, err := openRun(pool, r.Schema, r.Path)
	if err != nil {
		removeQuiet(r.Path)
		return nil, err
	}
	if !sameColumns(r.Schema, u) {
		return &conformCursor{c: rc, mem: mem, u: u}, nil
	}
	return rc, nil
}

// drop deletes the run's file or releases its records.
func (r Run) drop() {
	r.packed.release()
	if r.mem != nil {
		r.mem.release()
	}
	if r.Path != "" {
		removeQuiet(r.Path)
	}
}

func dropRuns(runs []Run) {
	for _, r := range runs {
		r.drop()
	}
}

// memRun is a sorted run in memory: records, and the order of their rows.
type memRun struct {
	key   []string
	recs  []arrow.Record
	views []keyView // of recs
	order []rowRef
	ids   [][]uint32 // of recs: their rows' ids (nil: none)
}

func (m *memRun) release() {
	for _, r := range m.recs {
		r.Release()
	}
	m.recs, m.views, m.order, m.ids = nil, nil, nil, nil
}

// conform gives the records schema u.
func (m *memRun) conform(mem memory.Allocator, u *arrow.Schema) error {
	for k, r := range m.recs {
		c := conform(mem, u, r)
		r.Release()
		m.recs[k] = c
		kv, err := newKeyView(c, m.key)
		if err != nil {
			return err
		}
		m.views[k] = kv
	}
	return nil
}

// memCursor is a run in memory as a merge input: merge reads its rows in
// its order (mergeInput), not through next.
type memCursor struct{ *memRun }

func (c *memCursor) next() (arrow.Record, error) {
	return nil, errors.New("a run in memory is read in its order")
}

func (c *memCursor) close() error {
	c.release()
	return nil
}

// conformCursor yields another cursor's rows with schema u (conform).
type conformCursor struct {
	c   cursor
	mem memory.Allocator
	u   *arrow.Schema
	cur arrow.Record
}

func (c *conformCursor) next() (arrow.Record, error) {
	if c.cur != nil {
		c.cur.Release()
		c.cur = nil
	}
	rec, err := c.c.next()
	if rec == nil || err != nil {
		return nil, err
	}
	c.cur = conform(c.mem, c.u, rec)
	return c.cur, nil
}

func (c *conformCursor) close() error {
	if c.cur != nil {
		c.cur.Release()
		c.cur = nil
	}
	return c.c.close()
}

// groupSet is a set of snapshot groups.
type groupSet map[pq.Group]struct{}

// collect adds the groups of the view's first n rows not seen yet to mf's
// (a batch's rows are mostly of one group: a row of the same group as the
// row before is not looked up).
func (s groupSet) collect(kv *keyView, n int, mf *pq.ManifestFile) {
	if n > 1 && kv.oneGroup(n) {
		n = 1 // a snapshot's batch: its rows' groups are its first row's
	}
	var last pq.Group
	for i := range n {
		g := kv.group(i)
		if i > 0 && g == last {
			continue
		}
		last = g
		if _, ok := s[g]; !ok {
			// Copied: kv's strings view the record's buffers, which a
			// replay recycles once the record is released (arrowpool).
			g.RunID, g.Endpoint = strings.Clone(g.RunID), strings.Clone(g.Endpoint)
			s[g] = struct{}{}
			mf.Groups = append(mf.Groups, g)
		}
	}
}

// oneGroup reports whether the view's first n rows are of one group:
// its group columns (those it has) each hold one value (or only nulls),
// compared a column at a time, not row by row.
func (kv *keyView) oneGroup(n int) bool {
	if kv.snap != nil {
		a := kv.snap
		if a.Len() < n || a.NullN() > 0 && a.NullN() != a.Len() {
			return false
		}
		if v := a.TimestampValues(); a.NullN() == 0 && !slices.Equal(v[1:n], v[:n-1]) {
			return false
		}
	}
	return oneString(kv.run, n) && oneString(kv.ep, n)
}

// oneString reports whether a's first n values are one value, or all null
// (nil: the table has no such column).
func oneString(a *array.String, n int) bool {
	if a == nil {
		return true
	}
	if a.Len() < n || a.NullN() > 0 && a.NullN() != a.Len() {
		return false
	}
	if a.NullN() > 0 {
		return true
	}
	offs := a.ValueOffsets()[:n+1]
	size := offs[1] - offs[0]
	for i := 1; i < n; i++ {
		if offs[i+1]-offs[i] != size {
			return false
		}
	}
	// equal lengths: each value is the one before it when the bytes are
	// themselves shifted by one value
	var data []byte // the values buffer, which the offsets index
	if b := a.Data().Buffers()[2]; b != nil {
		data = b.Bytes()
	}
	if len(data) < int(offs[n]) || offs[0] < 0 {
		return false
	}
	return bytes.Equal(data[offs[0]+size:offs[n]], data[offs[0]:offs[n]-size])
}
