package compact

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"

	"github.com/optlake/optlake/internal/arrowpool"
)

// A replayed day's runs in memory, once they fill the day's budget, are
// packed instead of merged (dayRows.startMerge): each record's columns
// are written as they are, not reordered nor gathered, one column's node
// (runfile.go's node: length, nulls, offset, buffers, S2) after another,
// to the day's pack file; an index in memory says where each column of
// each record is, with its bytes' CRC-32C. What the run needs to be
// ordered stays in memory: its order (a permutation of its records'
// rows), its rows' key dictionary ids and the key's columns after the
// dictionary's (integers: snapshot_time). So every row is written once
// more, not gathered, before the day's file; PublishDay then gathers each
// column once, in the day's order (direct.go), or, when the day cannot be
// written that way, reads the packed runs back a group at a time and
// merges them into spilled runs as the packing had not happened
// (unpack).
//
// Only runs of the day's dictionary whose rest of the key is integers and
// whose columns are of the flat types gatherColumn copies are packed;
// otherwise the day merges them as before.

// packFile is a day's pack file, appended by one pack at a time (the
// day's goroutine) and read once the day's runs are handed to its
// publish.
type packFile struct {
	f  *os.File
	cw countWriter
	w  *runWriter // its node and buffer encoders, writing through cw
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

func newPackFile(pool *arrowpool.Pool, dir string) (*packFile, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("pack: %w", err)
	}
	f, err := os.CreateTemp(dir, "day-*.pack")
	if err != nil {
		return nil, fmt.Errorf("pack: %w", err)
	}
	pf := &packFile{f: f}
	pf.cw.w = f
	pf.w = &runWriter{f: f, bw: bufio.NewWriterSize(&pf.cw, 1<<20), pool: pool}
	return pf, nil
}

// pos is the offset of the next byte written.
func (pf *packFile) pos() int64 { return pf.cw.n + int64(pf.w.bw.Buffered()) }

// remove closes and deletes the file (nil: nothing).
func (pf *packFile) remove() {
	if pf == nil {
		return
	}
	pf.f.Close()
	os.Remove(pf.f.Name())
}

// packedCol is where a column of a packed record is: its node's bytes
// and their CRC-32C.
type packedCol struct {
	off  int64
	n    int64
	size int64 // the column's Arrow bytes (its buffers')
	crc  uint32
	dict bool // ids into the record's distinct values, then the values (packdict.go)
	// key, when > 0, is 1 + the index of the dictionary's column the
	// column is: not written (n 0), its values are its rows' ids' (the
	// run's ids, keyDict.prefixColumn).
	key int
}

// packedRec is a packed record: its rows and columns.
type packedRec struct {
	rows int
	size int64 // its Arrow bytes
	cols []packedCol
}

// packedRun is a memRun whose records were packed: its order and ids as
// they were, and per record the key's columns after the dictionary's (a
// keyView whose first prefix columns are empty).
type packedRun struct {
	recs  []packedRec
	order []rowRef
	ids   [][]uint32
	rest  []keyView
	arrs  []arrow.Array // the rest's arrays, retained
}

// packedGroup is the runs one pack took, in their order (as one run of
// the day: the merge they replace would have made one).
type packedGroup struct {
	file   *packFile
	u      *arrow.Schema
	prefix int // the dictionary's columns
	runs   []*packedRun
}

func (g *packedGroup) release() {
	if g == nil {
		return
	}
	for _, r := range g.runs {
		for _, a := range r.arrs {
			a.Release()
		}
		r.arrs, r.rest = nil, nil
	}
	g.runs = nil
}

func (g *packedGroup) rows() int {
	n := 0
	for _, r := range g.runs {
		n += len(r.order)
	}
	return n
}

// packable reports whether runs of schema u keyed by dict can be packed:
// the rest of the key is integers and every column a flat type gather
// copies.
func packable(u *arrow.Schema, key []string, dict *keyDict) bool {
	if dict == nil {
		return false
	}
	for _, name := range key[dict.cols:] {
		idx := u.FieldIndices(name)
		if len(idx) != 1 {
			return false
		}
		switch u.Field(idx[0]).Type.ID() {
		case arrow.INT64, arrow.TIMESTAMP:
		default:
			return false
		}
	}
	for _, f := range u.Fields() {
		switch f.Type.ID() {
		case arrow.STRING, arrow.INT64, arrow.FLOAT64, arrow.TIMESTAMP, arrow.BOOL:
		default:
			return false
		}
	}
	return true
}

// packGroup packs the runs in memory of group (keyed, of schema u) into
// g, releasing their records.
func packGroup(ctx context.Context, pf *packFile, u *arrow.Schema, key []string, prefix int, group []*memRun) (g *packedGroup, err error) {
	g = &packedGroup{file: pf, u: u, prefix: prefix}
	defer func() {
		for _, m := range group {
			m.release()
		}
		if err != nil {
			g.release()
		}
	}()
	restIdx := make([]int, 0, len(key)-prefix)
	for _, name := range key[prefix:] {
		restIdx = append(restIdx, u.FieldIndices(name)[0])
	}
	// the string columns but the key's may be packed with ids; the
	// dictionary's columns are not packed: their values are the ids'
	byIDs := make([]bool, u.NumFields())
	for j, f := range u.Fields() {
		byIDs[j] = f.Type.ID() == arrow.STRING
	}
	prefixOf := make([]int, u.NumFields())
	for k, name := range key {
		j := u.FieldIndices(name)[0]
		byIDs[j] = false
		if k < prefix {
			prefixOf[j] = k + 1
		}
	}
	// Per column, the records left before ids (localDict) or S2 are
	// tried again after they did not pay (a column of distinct names; of
	// distinct timestamps): skipped, not retried on every record.
	noDict, noS2 := make([]int, u.NumFields()), make([]int, u.NumFields())
	var ld localDict
	for _, m := range group {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		pr := &packedRun{order: m.order, ids: m.ids}
		g.runs = append(g.runs, pr)
		for _, rec := range m.recs {
			if !sameColumns(rec.Schema(), u) {
				return nil, errors.New("pack: a record's columns are not the day's")
			}
			prec := packedRec{rows: int(rec.NumRows()), size: util.TotalRecordSize(rec), cols: make([]packedCol, u.NumFields())}
			for j := range u.NumFields() {
				d := rec.Column(j).Data()
				if prefixOf[j] > 0 {
					prec.cols[j] = packedCol{off: pf.pos(), size: dataBytes(d), key: prefixOf[j]}
					continue
				}
				off := pf.pos()
				pf.w.crc = 0
				dict := false
				if s, ok := rec.Column(j).(*array.String); ok && byIDs[j] {
					if noDict[j] > 0 {
						noDict[j]--
					} else if dict = ld.encode(s); dict {
						ld.write(pf.w, s)
					} else {
						noDict[j] = retryAfter
					}
				}
				if !dict {
					pf.w.noS2, pf.w.s2In, pf.w.s2Out = noS2[j] > 0, 0, 0
					pf.w.array(d)
					pf.w.noS2 = false
					if noS2[j] > 0 {
						noS2[j]--
					} else if pf.w.s2Out > pf.w.s2In/2 {
						noS2[j] = retryAfter // S2 saved less than half
					}
				}
				prec.cols[j] = packedCol{off: off, n: pf.pos() - off, size: dataBytes(d), crc: pf.w.crc, dict: dict}
			}
			if err := pf.w.flushErr(); err != nil {
				return nil, fmt.Errorf("pack: %w", err)
			}
			pr.recs = append(pr.recs, prec)
			kv := keyView{cols: make([]keyCol, len(key))}
			for k, j := range restIdx {
				a := rec.Column(j)
				a.Retain()
				pr.arrs = append(pr.arrs, a)
				c := keyCol{arr: a, nulls: a.NullN() > 0}
				switch a := a.(type) {
				case *array.Int64:
					c.i64 = a
				case *array.Timestamp:
					c.ts = a
				default:
					return nil, fmt.Errorf("pack: key column %s is %s", key[prefix+k], a.DataType())
				}
				kv.cols[prefix+k] = c
			}
			pr.rest = append(pr.rest, kv)
		}
	}
	if err := pf.w.bw.Flush(); err != nil {
		return nil, fmt.Errorf("pack: %w", err)
	}
	return g, nil
}

// retryAfter is the records of a column packed without ids or S2 after
// either did not pay, before it is tried again.
const retryAfter = 16

// dataBytes are the bytes of d's buffers.
func dataBytes(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	return n
}

// packReader reads columns of packed records.
type packReader struct {
	pf   *packFile
	pool *arrowpool.Pool
	buf  []byte
	br   *bufio.Reader
	rd   bytes.Reader
	c    runCursor
}

func newPackReader(pf *packFile, pool *arrowpool.Pool) *packReader {
	r := &packReader{pf: pf, pool: pool}
	r.br = bufio.NewReaderSize(&r.rd, 64<<10)
	r.c.pool = pool
	return r
}

// column reads column pc of a packed record of rows rows, of type t. What
// it reads is checked: its CRC, then its node against t and the rows.
func (r *packReader) column(t arrow.DataType, pc packedCol, rows int) (arrow.Array, error) {
	if pc.key > 0 {
		return nil, fmt.Errorf("read pack %s: a key column, not packed", r.pf.f.Name())
	}
	if pc.dict {
		if t.ID() != arrow.STRING {
			return nil, fmt.Errorf("read pack %s at %d: ids of a %s column", r.pf.f.Name(), pc.off, t)
		}
		ids, vals, err := r.dictColumn(pc, rows)
		if err != nil {
			return nil, err
		}
		defer ids.Release()
		defer vals.Release()
		return r.strings(t, ids, vals)
	}
	var arr arrow.Array
	err := r.nodes(pc, func() error {
		d, err := r.c.node(t)
		if err != nil {
			return err
		}
		defer d.Release()
		if d.Len() != rows {
			return fmt.Errorf("a column of %d rows, not %d", d.Len(), rows)
		}
		arr = array.MakeFromData(d)
		return nil
	})
	return arr, err
}

// check reads column pc's bytes and checks their CRC (in r.buf).
func (r *packReader) check(pc packedCol) error {
	if pc.n < 0 || pc.n > 1<<32 {
		return fmt.Errorf("read pack %s: a column of %d bytes", r.pf.f.Name(), pc.n)
	}
	b := grow(&r.buf, int(pc.n))
	if _, err := r.pf.f.ReadAt(b, pc.off); err != nil {
		return fmt.Errorf("read pack %s: %w", r.pf.f.Name(), noEOF(err))
	}
	if got := crc32.Checksum(b, castagnoli); got != pc.crc {
		return fmt.Errorf("read pack %s at %d: checksum %08x, not %08x: the file is damaged", r.pf.f.Name(), pc.off, got, pc.crc)
	}
	return nil
}

// nodes reads column pc's bytes, checks their CRC and reads its nodes
// with read, which must read them all.
func (r *packReader) nodes(pc packedCol, read func() error) (err error) {
	if err := r.check(pc); err != nil {
		return err
	}
	b := r.buf[:pc.n]
	r.rd.Reset(b)
	r.br.Reset(&r.rd)
	r.c.in = runReader{br: r.br, left: pc.n}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("read pack %s at %d: arrays do not fit their buffers: %v", r.pf.f.Name(), pc.off, p)
		}
	}()
	if err := read(); err != nil {
		return fmt.Errorf("read pack %s at %d: %w", r.pf.f.Name(), pc.off, err)
	}
	if r.c.in.left != 0 {
		return fmt.Errorf("read pack %s at %d: %d bytes left after the column", r.pf.f.Name(), pc.off, r.c.in.left)
	}
	return nil
}

// record reads a whole packed record, its dictionary's columns made from
// its rows' ids of dict.
func (r *packReader) record(u *arrow.Schema, pr packedRec, ids []uint32, dict *keyDict) (arrow.Record, error) {
	datas := make([]arrow.ArrayData, 0, u.NumFields())
	defer func() {
		for _, d := range datas {
			d.Release()
		}
	}()
	for j, f := range u.Fields() {
		if j >= len(pr.cols) {
			return nil, errors.New("read pack: a record without all its columns")
		}
		var a arrow.Array
		var err error
		if pc := pr.cols[j]; pc.key > 0 && dict == nil {
			err = errors.New("read pack: a key column and no dictionary")
		} else if pc.key > 0 {
			a, err = dict.prefixColumn(pc.key-1, ids)
		} else {
			a, err = r.column(f.Type, pc, pr.rows)
		}
		if err == nil && a.Len() != pr.rows {
			a.Release()
			err = fmt.Errorf("%d rows, not %d", a.Len(), pr.rows)
		}
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", f.Name, err)
		}
		d := a.Data()
		d.Retain()
		a.Release()
		datas = append(datas, d)
	}
	return buildRecord(u, datas, int64(pr.rows))
}

// unpack reads the group's runs back into memory and merges them into one
// spilled run, what the day's merge would have made of them (the day is
// not written by direct.go).
func (g *packedGroup) unpack(ctx context.Context, pool *arrowpool.Pool, key []string, dict *keyDict, tmp string) (Run, error) {
	defer g.release()
	rd := newPackReader(g.file, pool)
	var runs []Run
	for _, pr := range g.runs {
		m := &memRun{key: key, order: pr.order, ids: pr.ids}
		runs = append(runs, Run{Schema: g.u, mem: m, keyed: true})
		if len(pr.recs) != len(pr.ids) {
			dropRuns(runs)
			return Run{}, errors.New("read pack: a run's ids do not match its records")
		}
		for k, prec := range pr.recs {
			rec, err := rd.record(g.u, prec, pr.ids[k], dict)
			if err == nil {
				m.recs = append(m.recs, rec)
				var kv keyView
				kv, err = newKeyView(rec, key)
				m.views = append(m.views, kv)
			}
			if err != nil {
				dropRuns(runs)
				return Run{}, err
			}
		}
		if len(m.recs) != len(m.ids) {
			dropRuns(runs)
			return Run{}, errors.New("read pack: a run's ids do not match its records")
		}
	}
	return mergeToRun(ctx, memory.DefaultAllocator, pool, g.u, key, dict, tmp, runs, 4096)
}
