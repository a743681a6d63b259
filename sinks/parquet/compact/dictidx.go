package compact

import (
	"bytes"
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/optlake/optlake/sinks/parquet/pqpage"
)

// The direct writer's dictionary columns (pq.Dictionary: the
// low-cardinality ones, run_id, index_price_raw) are not gathered as
// strings for pqpage to look each of them up again in its chunk's
// dictionary: each record's column is numbered once, in the record's own
// order, against a dictionary of the column's distinct values in the
// whole day (colDict: a value equal to the one before it, or to the one
// that followed the one before it last time, takes its id without a
// lookup — a snapshot's run_id is one value, its currencies' runs are
// long), and the ids (4 bytes a row) are gathered in the day's order and
// handed to pqpage (Chunk.AppendIndices), which maps them to its chunk's
// entries with an array. The file is the same: pqpage writes a chunk of
// ids as the chunk of their strings. A column whose day dictionary
// reaches the chunks' dictionary limit (Options.DictPageSize: past it a
// chunk falls back to PLAIN) is gathered as strings as before: below it,
// no chunk, whose values are some of the day's, falls back.

// colDict numbers the distinct values of a column.
type colDict struct {
	vals  [][]byte // by id (in arena)
	index map[string]uint32
	next  []uint32 // per id: the id of the value that followed it last (pqpage.NullIndex: none)
	bytes int64    // the values' PLAIN bytes: 4 + length each
	arena []byte
}

func newColDict() *colDict { return &colDict{index: map[string]uint32{}} }

// add numbers v, a new value.
func (d *colDict) add(v []byte) uint32 {
	if len(v) > cap(d.arena)-len(d.arena) {
		d.arena = make([]byte, 0, max(len(v), 32<<10))
	}
	at := len(d.arena)
	d.arena = append(d.arena, v...)
	id := uint32(len(d.vals))
	d.vals = append(d.vals, d.arena[at:len(d.arena):len(d.arena)])
	d.next = append(d.next, pqpage.NullIndex)
	d.index[string(v)] = id
	d.bytes += 4 + int64(len(v))
	return id
}

// idsOf sets out[r] to the id of a's row r (pqpage.NullIndex: null). It
// stops, false, once the dictionary's PLAIN bytes reach limit.
func (d *colDict) idsOf(a *array.String, out []uint32, limit int64) bool {
	offs := a.ValueOffsets()
	var data []byte
	if b := a.Data().Buffers()[2]; b != nil {
		data = b.Bytes()
	}
	nulls := a.NullN() > 0
	last := pqpage.NullIndex // the previous value's id
	for r := range out {
		if nulls && a.IsNull(r) {
			out[r] = pqpage.NullIndex
			continue
		}
		v := data[offs[r]:offs[r+1]]
		if last != pqpage.NullIndex {
			if bytes.Equal(v, d.vals[last]) {
				out[r] = last
				continue
			}
			if nx := d.next[last]; nx != pqpage.NullIndex && bytes.Equal(v, d.vals[nx]) {
				out[r], last = nx, nx
				continue
			}
		}
		id, ok := d.index[string(v)]
		if !ok {
			id = d.add(v)
			if d.bytes >= limit {
				return false
			}
		}
		if last != pqpage.NullIndex {
			d.next[last] = id
		}
		out[r], last = id, id
	}
	return true
}

// directDictColumn builds the chunks of column i, a dictionary column,
// from ids (done false, nothing built: its day dictionary reaches the
// limit, gather its strings).
func (j *partitionJob) directDictColumn(ctx context.Context, dd *directDay, i int, readers *unitReaders) (done bool, err error) {
	units := dd.units
	if j.u.Field(i).Type.ID() != arrow.STRING {
		return false, nil
	}
	rows := 0
	for _, u := range units {
		rows += u.rows
	}
	// every id is set before it is read (or the column is left): the
	// pool's buffer, of the same size for each such column
	buf := j.pool.AllocateUnzeroed(4 * rows)
	defer j.pool.Free(buf)
	all := asSlice[uint32](buf)
	ids := make([][]uint32, len(units))
	d := newColDict()
	limit := dd.opts[i].DictPageSize
	for k, u := range units {
		ids[k], all = all[:u.rows:u.rows], all[u.rows:]
		if u.rec == nil && i < len(u.packed.cols) && u.packed.cols[i].dict {
			ok, err := j.packedDayIDs(d, u, i, readers, ids[k], limit)
			if !ok || err != nil {
				return false, err
			}
			continue
		}
		a, err := j.unitColumn(u, i, readers)
		if err != nil {
			return false, err
		}
		s, ok := a.(*array.String)
		if !ok || s.Len() != u.rows {
			if u.rec == nil {
				a.Release()
			}
			return false, fmt.Errorf("a record's column of %d %s, not %d strings", a.Len(), a.DataType(), u.rows)
		}
		ok = d.idsOf(s, ids[k], limit)
		if u.rec == nil {
			a.Release()
		}
		if !ok {
			return false, nil
		}
	}
	var batch []uint32
	err = dd.build(ctx, i, func(c *pqpage.Chunk, rg *rowGroup, k int) error {
		p := rg.parts[k]
		if cap(batch) < p[1]-p[0] {
			batch = make([]uint32, p[1]-p[0])
		}
		batch = batch[:p[1]-p[0]]
		perm := rg.perms[k]
		for u, id := range ids { // record by record (unitOrder)
			for x := perm.start[u]; x < perm.start[u+1]; x++ {
				batch[perm.at[x]] = id[perm.rows[x]]
			}
		}
		return c.AppendIndices(batch, d.vals)
	})
	dd.indexed[i] = err == nil
	return true, err
}

// packedDayIDs sets out to the day's ids of column i of packed unit u,
// packed with ids (packdict.go): its distinct values numbered once each.
func (j *partitionJob) packedDayIDs(d *colDict, u directUnit, i int, readers *unitReaders, out []uint32, limit int64) (bool, error) {
	ids, vals, err := j.packReader(u, readers).dictColumn(u.packed.cols[i], u.rows)
	if err != nil {
		return false, err
	}
	defer ids.Release()
	defer vals.Release()
	return d.dayIDs(ids, vals, out, limit), nil
}
