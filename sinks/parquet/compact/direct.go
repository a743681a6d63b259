package compact

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"
	"github.com/apache/arrow-go/v18/parquet"

	"github.com/optlake/optlake/internal/arrowpool"
	pq "github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/sinks/parquet/pqpage"
)

// A replayed day whose rows are all its own runs (no earlier compaction,
// no other snapshot file), each in memory or packed (pack.go) and keyed
// by the day's dictionary, is written without a merge: its order is
// worked out at once — every row counted into its key prefix's rank
// (keydict.go), rows of one rank sorted by the rest of the key (an
// integer), ties in run order then each run's own order, which is the
// merge's order (ties to the earlier input) — and the file is written a
// column at a time: a worker reads a column of every packed record once
// and gathers it straight into the pages of every row group, in the
// batches the merge's output would have appended (so that the pages are
// the same: the file is byte for byte the one the merge writes). The row
// groups' finished chunks are held (compressed) until every column is
// done, then laid out as File writes a row group at a time.
//
// Memory: the order (8 bytes a row), each worker's column of the day
// (decompressed), and the file's compressed chunks; a day whose order and
// largest columns need more than Options.directMemory is merged instead
// (bounded whatever the day's size).

// directUnit is a record of the day as the direct writer reads it: in
// memory, or packed.
type directUnit struct {
	rec    arrow.Record // in memory (nil: packed)
	packed *packedRec
	file   *packFile
	kv     *keyView // the rest of the key, at least
	rows   int
}

// directOK reports whether the day can be written by writeDirect (sort
// asks, once the fresh files are read into freshRuns runs): only the
// replay's runs, each packed or in memory with ids, of the day's columns
// (flat, of types pack takes, the rest of the key integers), written by
// pqpage (ColumnWorkers: 1 or more, also on one core), one file's worth.
func (j *partitionJob) directOK(freshRuns int) bool {
	r := j.replayed
	if r == nil || j.opt.noDirect || r.dict == nil || r.Encodings == nil || len(j.old) > 0 || len(j.newFiles) > 0 || freshRuns > 0 {
		return false
	}
	if !packable(j.u, j.key, r.dict) || pq.ColumnWorkers(j.u) == 0 {
		return false
	}
	_, opts, ok, err := pq.PageColumns(j.u, j.props())
	if err != nil || !ok {
		return false
	}
	cols, size, rows, ok := dayBytes(r.Runs, j.u)
	if !ok {
		return false
	}
	j.dayCols = cols
	dict := slices.ContainsFunc(opts, func(o pqpage.Options) bool { return o.Dict })
	if directNeed(cols, rows, pq.ColumnWorkers(j.u), dict) > j.opt.directMemory() {
		return false
	}
	// One file: the merge's output splits past MaxFileBytes, and a day's
	// Parquet takes at most about its Arrow bytes (half of them, to be
	// safe: strings' delta lengths); not with row groups of a few rows,
	// whose pages' headers outweigh their values: writeDirect checks the
	// chunks it built (splits) and leaves such a day to the merge.
	return rows > 0 && size < j.opt.MaxFileBytes/2
}

// directNeed is the memory the direct writer needs for a day of rows
// rows whose columns take cols Arrow bytes, on workers workers, dict when
// a column is a dictionary column: the order (rowRef, id and rank: 16
// bytes a row) and its batches' rows record by record (unitOrder: 8
// bytes a row), a whole column of the day per worker, the largest first,
// and a dictionary column's ids (directDictColumn: 4 bytes a row per
// worker, in a pool buffer of its size class). Bounded memory, as the
// merge's: a day that needs more than directMemory is merged.
func directNeed(cols []int64, rows, workers int, dict bool) int64 {
	cols = slices.Clone(cols)
	slices.SortFunc(cols, func(a, b int64) int { return cmp.Compare(b, a) })
	workers = min(workers, len(cols))
	need := int64(rows) * 24
	for _, c := range cols[:workers] {
		need += c
	}
	// Not counted: each worker's pool may keep up to workerPool (twice
	// the largest column) of buffers idle while it reads a column of
	// other sizes. Counting it sends the bench's replayed day (450,000
	// rows) to the merge; its peak RSS rose ~3 MB with the pools.
	if dict {
		need += int64(workers) * arrowpool.Size(4*rows)
	}
	return need
}

// dayBytes is the Arrow bytes of each column of the day's runs (cols),
// of their records (size) and their rows; not ok: a run of other columns
// than u's, or neither packed nor in memory with ids (directOK).
func dayBytes(runs []Run, u *arrow.Schema) (cols []int64, size int64, rows int, ok bool) {
	cols = make([]int64, u.NumFields())
	for _, run := range runs {
		if !sameColumns(run.Schema, u) {
			return nil, 0, 0, false
		}
		switch {
		case run.packed != nil:
			for _, pr := range run.packed.runs {
				for _, rec := range pr.recs {
					size += rec.size
					for c, pc := range rec.cols {
						cols[c] += pc.size
					}
				}
			}
			rows += run.packed.rows()
		case run.mem != nil && run.keyed && run.mem.ids != nil:
			for _, rec := range run.mem.recs {
				size += util.TotalRecordSize(rec)
				for c, a := range rec.Columns() {
					cols[c] += util.TotalArraySize(a)
				}
			}
			rows += len(run.mem.order)
		default:
			return nil, 0, 0, false
		}
	}
	return cols, size, rows, true
}

// props are the day file's writer properties.
func (j *partitionJob) props() *parquet.WriterProperties {
	o := &output{opt: j.opt, mem: j.mem}
	return o.props(j.replayed.encodings()...)
}

// directOrder is the day's rows in the file's order (rowRef.rec indexing
// units), and where each rank's rows start in it (refs[start[k]:
// start[k+1]] hold the key prefix of rank k).
func directOrder(runs []Run, rank []uint32, prefix int) ([]directUnit, []rowRef, []int, error) {
	var units []directUnit
	type part struct {
		base, recs int
		order      []rowRef
		ids        [][]uint32
	}
	var parts []part
	n := 0
	for _, run := range runs {
		if g := run.packed; g != nil {
			for _, pr := range g.runs {
				parts = append(parts, part{len(units), len(pr.recs), pr.order, pr.ids})
				for k := range pr.recs {
					units = append(units, directUnit{packed: &pr.recs[k], file: g.file, kv: &pr.rest[k], rows: pr.recs[k].rows})
				}
				n += len(pr.order)
			}
			continue
		}
		m := run.mem
		parts = append(parts, part{len(units), len(m.recs), m.order, m.ids})
		for k, rec := range m.recs {
			units = append(units, directUnit{rec: rec, kv: &m.views[k], rows: int(rec.NumRows())})
		}
		n += len(m.order)
	}
	// Counting sort by rank (stable: runs in order, each in its order).
	start := make([]int, len(rank)+1)
	for _, p := range parts {
		if len(p.ids) != p.recs {
			return nil, nil, nil, fmt.Errorf("a run's ids do not match its records")
		}
		for _, r := range p.order {
			id := p.ids[r.rec][r.row]
			if int(id) >= len(rank) {
				return nil, nil, nil, fmt.Errorf("key id %d past the dictionary's %d", id, len(rank))
			}
			start[rank[id]+1]++
		}
	}
	for i := 1; i < len(start); i++ {
		start[i] += start[i-1]
	}
	refs := make([]rowRef, n)
	at := slices.Clone(start[:len(rank)])
	for _, p := range parts {
		for _, r := range p.order {
			k := rank[p.ids[r.rec][r.row]]
			refs[at[k]] = rowRef{int32(p.base) + r.rec, r.row}
			at[k]++
		}
	}
	sortRanks(units, refs, start, prefix, true)
	return units, refs, start, nil
}

// sortRanks sorts the rows of each rank (refs[start[k]:start[k+1]]) by
// the rest of the key, stably. A rest of one integer column without nulls
// (a replayed day's snapshot_time) is compared as integers (ints), its
// values read once a row; otherwise row by row (compareRowsFrom), which
// took 60% of directOrder on the bench (a rank's rows come in the order
// their snapshots were committed, two at a time).
func sortRanks(units []directUnit, refs []rowRef, start []int, prefix int, ints bool) {
	if vals := restInts(units, prefix); ints && vals != nil {
		type keyed struct {
			v   int64
			ref rowRef
		}
		var ks []keyed
		for k := range len(start) - 1 {
			s := refs[start[k]:start[k+1]]
			if len(s) < 2 {
				continue
			}
			ks = ks[:0]
			sorted := true
			for _, r := range s {
				v := vals[r.rec][r.row]
				sorted = sorted && (len(ks) == 0 || ks[len(ks)-1].v <= v)
				ks = append(ks, keyed{v, r})
			}
			if sorted {
				continue
			}
			slices.SortStableFunc(ks, func(a, b keyed) int { return cmp.Compare(a.v, b.v) })
			for i, kr := range ks {
				s[i] = kr.ref
			}
		}
		return
	}
	byRest := func(a, b rowRef) int {
		return compareRowsFrom(units[a.rec].kv, int(a.row), units[b.rec].kv, int(b.row), prefix)
	}
	for k := range len(start) - 1 {
		s := refs[start[k]:start[k+1]]
		if len(s) > 1 && !slices.IsSortedFunc(s, byRest) {
			slices.SortStableFunc(s, byRest)
		}
	}
}

// restInts are each unit's values of the rest of the key when it is one
// integer column without nulls (nil otherwise).
func restInts(units []directUnit, prefix int) [][]int64 {
	vals := make([][]int64, len(units))
	for k, u := range units {
		if len(u.kv.cols) != prefix+1 {
			return nil
		}
		c := &u.kv.cols[prefix]
		switch {
		case c.arr == nil || c.arr.NullN() > 0:
			return nil
		case c.i64 != nil:
			vals[k] = c.i64.Int64Values()
		case c.ts != nil:
			vals[k] = arrow.Int64Traits.CastFromBytes(arrow.TimestampTraits.CastToBytes(c.ts.TimestampValues()))
		default:
			return nil
		}
		if len(vals[k]) < u.rows {
			return nil
		}
	}
	return vals
}

// rowGroup is one row group of the direct writer: the parts [lo, hi) of
// the order appended to its chunks one after the other.
type rowGroup struct {
	rows  int64
	parts [][2]int
	perms []unitPerm // per part: its rows record by record (unitOrder)
}

// directGroups cuts n rows into the merge's output batches of batch rows,
// each cut at the row groups' bounds (ColumnWriter.WriteBuffered).
func directGroups(n, batch, rgRows int) []rowGroup {
	var out []rowGroup
	var cur rowGroup
	for lo := 0; lo < n; lo += batch {
		hi := min(lo+batch, n)
		for off := lo; off < hi; {
			k := min(hi-off, rgRows-int(cur.rows))
			cur.parts = append(cur.parts, [2]int{off, off + k})
			cur.rows += int64(k)
			off += k
			if cur.rows == int64(rgRows) {
				out = append(out, cur)
				cur = rowGroup{}
			}
		}
	}
	if cur.rows > 0 {
		out = append(out, cur)
	}
	return out
}

// writeDirect writes the day's runs (directOK) into the staged partition.
func (j *partitionJob) writeDirect(ctx context.Context) (Staged, *output, error) {
	runs := j.runs
	split := false
	defer func() {
		if !split { // the runs are kept for the merge
			dropRuns(runs)
			j.runs = nil
		}
	}()
	r := j.replayed
	dd := &directDay{keyVals: map[int]keyValues{}}
	var err error
	dd.units, dd.refs, dd.start, err = directOrder(runs, r.dict.ranks(), r.dict.cols)
	if err != nil {
		return nil, nil, err
	}
	for k, name := range j.key[:r.dict.cols] {
		var kv keyValues
		kv.vals, kv.valid = r.dict.prefixValues(k)
		dd.keyVals[j.u.FieldIndices(name)[0]] = kv
	}
	dd.cost = slices.Clone(j.dayCols)
	if len(dd.cost) != j.u.NumFields() {
		dd.cost = make([]int64, j.u.NumFields())
	}
	for i, kv := range dd.keyVals {
		dd.cost[i] = kv.bytes(dd.start)
	}
	units, refs := dd.units, dd.refs
	out := &output{opt: j.opt, mem: j.mem, u: j.u, manifest: j.manifest(), fixed: r.encodings()}
	out.useFixed()
	props := out.props(out.encs...)
	pqschema, opts, ok, err := pq.PageColumns(j.u, props)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return nil, nil, fmt.Errorf("the day's columns are not all pqpage's")
	}
	batch := min(8<<10, j.opt.RowGroupRows) // the merge's output batches (partitionJob.write)
	groups := directGroups(len(refs), batch, j.opt.RowGroupRows)
	groupOrders(groups, refs, len(units), pq.ColumnWorkers(j.u))
	chunks := make([][]*pqpage.Chunk, len(groups))
	for g := range chunks {
		chunks[g] = make([]*pqpage.Chunk, j.u.NumFields())
	}
	dd.groups, dd.opts, dd.chunks, dd.indexed = groups, opts, chunks, make([]bool, j.u.NumFields())
	if err := j.directColumns(ctx, dd); err != nil {
		return nil, nil, err
	}
	if splits(groups, chunks, len(refs), batch, j.opt.MaxFileBytes) {
		split = true
		return nil, nil, errSplit
	}

	staged, err := j.st.Stage(ctx, j.pr.Partition)
	if err != nil {
		return nil, nil, err
	}
	name := pq.CompactedName(out.manifest.ID, 0)
	w, err := staged.Create(name)
	if err != nil {
		staged.Abort()
		return nil, nil, fmt.Errorf("create: %w", err)
	}
	cw := &pq.CountingWriter{W: w}
	err = pq.Guard(cw, func() error {
		nf, err := pqpage.NewFile(cw, pqschema, props)
		if err != nil {
			return err
		}
		for g, rg := range groups {
			if err := nf.WriteRowGroup(rg.rows, chunks[g]); err != nil {
				nf.Close()
				return err
			}
			chunks[g] = nil
		}
		m := out.manifest
		m.Rows = int64(len(refs))
		b, err := json.Marshal(m)
		if err != nil {
			nf.Close()
			return err
		}
		if err := nf.AppendKeyValueMetadata(pq.ManifestKey, string(b)); err != nil {
			nf.Close()
			return err
		}
		return nf.Close()
	})
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		staged.Abort()
		return nil, nil, fmt.Errorf("write %s: %w", name, pq.DiskFull(err))
	}
	out.total, out.parts, out.bytes = int64(len(refs)), 1, cw.N
	if want := r.rows(); out.total != want {
		staged.Abort()
		return nil, nil, fmt.Errorf("wrote %d rows, expected %d: left as it was", out.total, want)
	}
	j.pr.direct = true
	return staged, out, nil
}

// errSplit is writeDirect's when the merge would write the day as more
// than one file: the day is merged after all.
var errSplit = errors.New("the day's file would be split")

// splits reports whether the merge's output of these row groups (rows
// rows in batches of batch rows) would close its file past maxBytes
// before the last batch (output.wrote), its later rows going to another
// file in other row groups: the day's Arrow bytes (directOK) bound the
// Parquet bytes only for row groups large enough for their pages'
// headers not to count.
func splits(groups []rowGroup, chunks [][]*pqpage.Chunk, rows, batch int, maxBytes int64) bool {
	pos := int64(4) // "PAR1"
	end := 0
	for g, rg := range groups {
		for _, c := range chunks[g] {
			pos += c.Meta().CompressedSize
		}
		end += int(rg.rows)
		if pos >= maxBytes {
			// checked after the batch in which the row group ends
			return (end-1)/batch < (rows-1)/batch
		}
	}
	return false
}

// directColumns builds every row group's chunk of every column, a column
// at a time on each of the workers: the column of every unit read once,
// then gathered in the order, batch by batch, into its chunks.
func (j *partitionJob) directColumns(ctx context.Context, dd *directDay) error {
	ncols := j.u.NumFields()
	// The largest columns first (by their Arrow bytes, the key columns'
	// built from their ranks as large as the others): a worker left with
	// a large one at the end would leave the other idle.
	cost := dd.cost
	cols := make([]int, ncols)
	for i := range cols {
		cols[i] = i
	}
	slices.SortStableFunc(cols, func(a, b int) int { return cmp.Compare(cost[b], cost[a]) })
	keep := workerPool(cost)
	errs := make([]error, ncols)
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := 0
	for range min(pq.ColumnWorkers(j.u), ncols) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			readers := &unitReaders{pool: arrowpool.New(keep), m: map[*packFile]*packReader{}}
			mu.Lock()
			dd.readers = append(dd.readers, readers)
			mu.Unlock()
			for {
				mu.Lock()
				at := next
				next++
				mu.Unlock()
				if at >= ncols {
					return
				}
				i := cols[at]
				errs[i] = pq.Guard(nil, func() error { return j.directColumn(ctx, dd, i, readers) })
				if errs[i] != nil {
					mu.Lock()
					next = ncols // the others stop after their column
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("column %s: %w", j.u.Field(i).Name, err)
		}
	}
	return nil
}

// workerPool is the most a column worker's pool keeps of the buffers of
// the units' columns it has read (cost: each column's Arrow bytes): twice
// the largest column (a buffer takes the power of two of its size). A
// worker holds a column of every unit at once (~150 records of ~24 KB a
// float column on the bench) and reads the next one's once it is done:
// from its pool, those buffers are its next column's, where the day's
// shared pool (its merges' gather batches, half of ChunkBytes) kept only
// some of them and the rest were allocated again, ~50 MB a bench replay.
// What it keeps is buffers the worker held at once (directNeed's column
// per worker), idle while a column of other sizes is read.
func workerPool(cost []int64) int64 {
	return 2 * slices.Max(append([]int64{0}, cost...))
}

// directDay is a day the direct writer writes.
type directDay struct {
	units  []directUnit
	refs   []rowRef // the file's order
	start  []int    // refs[start[k]:start[k+1]]: the rows of rank k
	groups []rowGroup
	cost   []int64           // per column, its Arrow bytes (directColumns' order)
	opts   []pqpage.Options  // per column
	chunks [][]*pqpage.Chunk // per row group and column, built by directColumn
	// readers are the column workers' (tests: what their pools made)
	readers []*unitReaders
	// keyVals are the values of the key's dictionary columns by rank, by
	// column index: a row's value is its rank's, not read nor gathered.
	keyVals map[int]keyValues
	// byValue (tests): the dictionary columns are gathered as strings,
	// not as ids (dictidx.go); indexed: per column, whether it was.
	byValue bool
	indexed []bool
}

// keyValues are a dictionary column's values by rank (valid nil: no null).
type keyValues struct {
	vals  []string
	valid []bool
}

// bytes is the Arrow bytes of the column built from kv in the order
// (start: directOrder's): its values and offsets.
func (kv keyValues) bytes(start []int) int64 {
	var n int64
	for k := range len(start) - 1 {
		rows := int64(start[k+1] - start[k])
		n += rows * 4
		if kv.valid == nil || kv.valid[k] {
			n += rows * int64(len(kv.vals[k]))
		}
	}
	return n
}

// directColumn builds column i's chunks.
func (j *partitionJob) directColumn(ctx context.Context, dd *directDay, i int, readers *unitReaders) error {
	units, refs := dd.units, dd.refs
	t := j.u.Field(i).Type
	if kv, ok := dd.keyVals[i]; ok {
		// not read (a packed record's is not packed: pack.go), but a
		// damaged pack fails the day all the same
		for _, u := range units {
			if u.rec == nil && i < len(u.packed.cols) && u.packed.cols[i].key == 0 {
				if err := j.packReader(u, readers).check(u.packed.cols[i]); err != nil {
					return err
				}
			}
		}
		return j.directKeyColumn(ctx, dd, i, kv)
	}
	if dd.opts[i].Dict && !dd.byValue {
		done, err := j.directDictColumn(ctx, dd, i, readers)
		if done || err != nil {
			return err
		}
	}
	arrs := make([]arrow.Array, len(units))
	defer func() {
		for k, a := range arrs {
			if a != nil && units[k].rec == nil {
				a.Release()
			}
		}
	}()
	for k, u := range units {
		a, err := j.unitColumn(u, i, readers)
		if err != nil {
			return err
		}
		arrs[k] = a
	}
	return dd.build(ctx, i, func(c *pqpage.Chunk, rg *rowGroup, k int) error {
		p := rg.parts[k]
		arr, err := gatherByUnit(j.pool, t, arrs, refs[p[0]:p[1]], rg.perms[k])
		if err != nil {
			return err
		}
		defer arr.Release()
		return c.Append(arr)
	})
}

// unitColumn is column i of unit u: its record's, or read from its pack
// (then the caller releases it).
func (j *partitionJob) unitColumn(u directUnit, i int, readers *unitReaders) (arrow.Array, error) {
	if u.rec != nil {
		return u.rec.Column(i), nil
	}
	rd := j.packReader(u, readers)
	if i >= len(u.packed.cols) {
		return nil, fmt.Errorf("a packed record without all its columns")
	}
	return rd.column(j.u.Field(i).Type, u.packed.cols[i], u.rows)
}

// packReader is the reader of u's pack file.
func (j *partitionJob) packReader(u directUnit, readers *unitReaders) *packReader {
	rd := readers.m[u.file]
	if rd == nil {
		rd = newPackReader(u.file, readers.pool)
		readers.m[u.file] = rd
	}
	return rd
}

// unitReaders are a column worker's readers of the day's pack files,
// their columns' buffers from a pool of the worker's own (workerPool).
type unitReaders struct {
	pool *arrowpool.Pool
	m    map[*packFile]*packReader
}

// build builds column i's chunk of every row group, add adding each of
// its parts to the chunk.
func (dd *directDay) build(ctx context.Context, i int, add func(c *pqpage.Chunk, rg *rowGroup, k int) error) error {
	c, err := pqpage.New(dd.opts[i])
	if err != nil {
		return err
	}
	for g := range dd.groups {
		if err := ctx.Err(); err != nil {
			return err
		}
		rg := &dd.groups[g]
		for k := range rg.parts {
			if err := add(c, rg, k); err != nil {
				return err
			}
		}
		if err := c.Finish(); err != nil {
			return err
		}
		dd.chunks[g][i] = c.Done()
		c.Reset()
	}
	return nil
}

// directKeyColumn builds the chunks of column i, one of the dictionary's:
// each row's value is its rank's (kv).
func (j *partitionJob) directKeyColumn(ctx context.Context, dd *directDay, i int, kv keyValues) error {
	t := j.u.Field(i).Type
	return dd.build(ctx, i, func(c *pqpage.Chunk, rg *rowGroup, k int) error {
		p := rg.parts[k]
		arr, err := keyColumn(j.pool, t, dd.start, kv, p[0], p[1])
		if err != nil {
			return err
		}
		defer arr.Release()
		return c.Append(arr)
	})
}

// keyColumn builds the string array of rows [lo, hi) of the order of a
// dictionary column: each row's value is its rank's.
func keyColumn(pool *arrowpool.Pool, t arrow.DataType, start []int, kv keyValues, lo, hi int) (arrow.Array, error) {
	n := hi - lo
	first, _ := slices.BinarySearch(start, lo+1) // start[first] > lo: rank first-1 holds row lo
	// the bytes, and the nulls
	bytes, nulls := 0, 0
	for k, p := first-1, lo; p < hi; k++ {
		end := min(hi, start[k+1])
		if kv.valid != nil && !kv.valid[k] {
			nulls += end - p
		} else {
			bytes += len(kv.vals[k]) * (end - p)
		}
		p = end
	}
	if err := stringsFit(0, bytes); err != nil {
		return nil, err
	}
	var valid *memory.Buffer
	var bits []byte
	if nulls > 0 {
		valid = pool.BufferUnzeroed(int(bitutil.BytesForBits(int64(n))))
		bits = valid.Bytes()
		clear(bits)
	}
	offBuf := pool.BufferUnzeroed((n + 1) * 4)
	offs := asSlice[int32](offBuf.Bytes())
	data := pool.AllocateUnzeroed(bytes)
	pos := 0
	for k, p := first-1, lo; p < hi; k++ {
		end := min(hi, start[k+1])
		null := kv.valid != nil && !kv.valid[k]
		v := kv.vals[k]
		for ; p < end; p++ {
			offs[p-lo] = int32(pos)
			if null {
				continue
			}
			if bits != nil {
				bitutil.SetBit(bits, p-lo)
			}
			pos += copy(data[pos:], v)
		}
	}
	offs[n] = int32(pos)
	return finishArray(t, n, nulls, valid, offBuf, memory.NewBufferWithAllocator(data, pool)), nil
}

// A batch of the day's order takes its rows from every record of the day
// (~150 on the bench: the same instruments in every snapshot), so that a
// gather in the batch's order reads from as many places at once, more
// than a CPU's prefetchers follow: each value's cache line missed. So the
// direct writer copies a batch's values record by record (unitOrder),
// each record's read forward, into their places in the batch (a few
// hundred KB, in cache): gatherFixedByUnit, gatherStringsByUnit.

// groupOrders sets each row group's perms (unitOrder of each of its
// parts), the groups shared among workers goroutines.
func groupOrders(groups []rowGroup, refs []rowRef, units, workers int) {
	var wg sync.WaitGroup
	for w := range max(1, workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for g := w; g < len(groups); g += max(1, workers) {
				for _, p := range groups[g].parts {
					groups[g].perms = append(groups[g].perms, unitOrder(refs[p[0]:p[1]], units))
				}
			}
		}()
	}
	wg.Wait()
}

// unitPerm is a batch's rows record by record (unitOrder): record u's
// rows of the batch are k in [start[u], start[u+1]), at[k] its place in
// the batch and rows[k] its row in the record. A gather reads them in
// that order, a record's rows one after the other: each value costs a
// load of its row and of its place, read forward, where reading the
// batch's rowRef at each place and the record's values by its index
// (dependent loads, at places all over the batch) took half again as
// long (the ids of a dictionary column, 3 ns a row on the bench).
type unitPerm struct {
	at, rows []int32
	start    []int32 // per record, and the end
}

// unitOrder returns refs' rows record by record (stably: a record's rows
// in the batch's order), refs' rec indexing units records.
func unitOrder(refs []rowRef, units int) unitPerm {
	p := unitPerm{at: make([]int32, len(refs)), rows: make([]int32, len(refs)), start: make([]int32, units+1)}
	for _, r := range refs {
		p.start[r.rec+1]++
	}
	for u := range units {
		p.start[u+1] += p.start[u]
	}
	next := slices.Clone(p.start[:units])
	for i, r := range refs {
		k := next[r.rec]
		p.at[k], p.rows[k] = int32(i), r.row
		next[r.rec]++
	}
	return p
}

// gatherByUnit is gatherArrays, the values of fixed-width and string
// columns copied record by record (perm: unitOrder).
func gatherByUnit(pool *arrowpool.Pool, t arrow.DataType, arrs []arrow.Array, refs []rowRef, perm unitPerm) (arrow.Array, error) {
	switch t.ID() {
	case arrow.STRING:
		return gatherStringsByUnit(pool, t, as[*array.String](arrs), refs, perm)
	case arrow.FLOAT64:
		return gatherFixedByUnit(pool, t, as[*array.Float64](arrs), (*array.Float64).Float64Values, refs, perm), nil
	case arrow.INT64:
		return gatherFixedByUnit(pool, t, as[*array.Int64](arrs), (*array.Int64).Int64Values, refs, perm), nil
	case arrow.TIMESTAMP:
		return gatherFixedByUnit(pool, t, as[*array.Timestamp](arrs), (*array.Timestamp).TimestampValues, refs, perm), nil
	case arrow.BOOL:
		return gatherBoolsByUnit(pool, t, as[*array.Boolean](arrs), refs, perm), nil
	}
	return gatherArrays(pool, t, arrs, refs)
}

// validityByUnit is validity, record by record: the validity bitmap of
// n rows (nil, 0 when no source has a null; else cleared first) and the
// nulls. A column with nulls in some records (1 in 8 rows of the
// benchmark's nullable columns) had its bits read in the batch's order,
// as many places at once as records (validityInto): ~a third of the
// gathers of BenchmarkPublishReplayedDay.
func validityByUnit[A arrow.Array](pool *arrowpool.Pool, src []A, n int, perm unitPerm) (*memory.Buffer, int) {
	if !slices.ContainsFunc(src, func(a A) bool { return a.NullN() > 0 }) {
		return nil, 0
	}
	buf := pool.BufferUnzeroed(int(bitutil.BytesForBits(int64(n))))
	bits := buf.Bytes()
	clear(bits)
	valid := 0
	for u, a := range src {
		lo, hi := perm.start[u], perm.start[u+1]
		if a.NullN() == 0 {
			for k := lo; k < hi; k++ {
				bitutil.SetBit(bits, int(perm.at[k]))
			}
			valid += int(hi - lo)
			continue
		}
		d := a.Data()
		v, off := d.Buffers()[0].Bytes(), d.Offset()
		for k := lo; k < hi; k++ {
			if bitutil.BitIsSet(v, off+int(perm.rows[k])) {
				bitutil.SetBit(bits, int(perm.at[k]))
				valid++
			}
		}
	}
	return buf, n - valid
}

// gatherBoolsByUnit is gatherArrays of a boolean column, its bits copied
// record by record (a null row's bit is 0, as a builder leaves it).
func gatherBoolsByUnit(pool *arrowpool.Pool, t arrow.DataType, src []*array.Boolean, refs []rowRef, perm unitPerm) arrow.Array {
	valid, nulls := validityByUnit(pool, src, len(refs), perm)
	buf := pool.BufferUnzeroed(int(bitutil.BytesForBits(int64(len(refs)))))
	out := buf.Bytes()
	clear(out)
	for u, a := range src {
		lo, hi := perm.start[u], perm.start[u+1]
		if lo == hi {
			continue
		}
		d := a.Data()
		off := d.Offset()
		var b, v []byte // the values' bits, the validity's (nil: no nulls)
		if buf := d.Buffers()[1]; buf != nil {
			b = buf.Bytes()
		}
		if a.NullN() > 0 {
			v = d.Buffers()[0].Bytes()
		}
		for k := lo; k < hi; k++ {
			at := off + int(perm.rows[k])
			if bitutil.BitIsSet(b, at) && (v == nil || bitutil.BitIsSet(v, at)) {
				bitutil.SetBit(out, int(perm.at[k]))
			}
		}
	}
	return finishArray(t, len(refs), nulls, valid, buf)
}

// gatherFixedByUnit is gatherFixed, record by record.
func gatherFixedByUnit[T any, A arrow.Array](pool *arrowpool.Pool, t arrow.DataType, src []A, values func(A) []T, refs []rowRef, perm unitPerm) arrow.Array {
	valid, nulls := validityByUnit(pool, src, len(refs), perm)
	var zero T
	buf := pool.BufferUnzeroed(len(refs) * int(unsafe.Sizeof(zero)))
	out := asSlice[T](buf.Bytes())
	for u, a := range src {
		lo, hi := perm.start[u], perm.start[u+1]
		if lo == hi {
			continue
		}
		vals := values(a)
		for k := lo; k < hi; k++ {
			out[perm.at[k]] = vals[perm.rows[k]]
		}
	}
	return finishArray(t, len(refs), nulls, valid, buf)
}

// gatherStringsByUnit is gatherStrings record by record: each string's
// length put at its place, the offsets summed in the batch's order, then
// the bytes copied.
func gatherStringsByUnit(pool *arrowpool.Pool, t arrow.DataType, src []*array.String, refs []rowRef, perm unitPerm) (arrow.Array, error) {
	valid, nulls := validityByUnit(pool, src, len(refs), perm)
	ss := stringSources(src)
	offBuf := pool.BufferUnzeroed((len(refs) + 1) * 4)
	offs := asSlice[int32](offBuf.Bytes())
	offs[0] = 0
	for u := range ss {
		o := ss[u].offs
		for k := perm.start[u]; k < perm.start[u+1]; k++ {
			r := perm.rows[k]
			offs[perm.at[k]+1] = o[r+1] - o[r]
		}
	}
	pos := 0
	for i := range len(refs) {
		n := int(offs[i+1])
		if err := stringsFit(pos, n); err != nil {
			offBuf.Release()
			if valid != nil {
				valid.Release()
			}
			return nil, err
		}
		pos += n
		offs[i+1] = int32(pos)
	}
	data := pool.AllocateUnzeroed(pos)
	for u := range ss {
		s := &ss[u]
		for k := perm.start[u]; k < perm.start[u+1]; k++ {
			i, r := perm.at[k], perm.rows[k]
			copy(data[offs[i]:offs[i+1]], s.data[s.offs[r]:s.offs[r+1]])
		}
	}
	return finishArray(t, len(refs), nulls, valid, offBuf, memory.NewBufferWithAllocator(data, pool)), nil
}

// directMemory is the most the direct writer may hold for a day's order
// and its workers' columns (directOK): twice ChunkBytes, at least 96 MiB
// (the bench's replayed day of 450,000 instruments needs ~40 MB; a day of
// ~1.1 million is merged instead).
func (o *Options) directMemory() int64 {
	if o.directBytes > 0 {
		return o.directBytes
	}
	return max(2*o.ChunkBytes, 96<<20)
}
