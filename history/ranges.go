package history

import (
	"io"

	"github.com/apache/arrow-go/v18/parquet/metadata"

	"github.com/optlake/optlake/storage"
)

// tailBytes is how much of a file's end ranges fetches at its first read
// there: the footer's length and the footer (a compacted day's is ~20 KB)
// in one request.
const tailBytes = 64 << 10

// wholeFile is the size up to which ranges fetches the whole file at its
// first read, in one request, instead of its tail and then each row
// group's span: a request costs a bucket's latency (tens of ms on S3) and
// both ends' CPU (signing, checking, opening the object), which is worth
// more than a MiB of transfer. A day of events, or a day of a small
// venue's listing, is one GET.
const wholeFile = 1 << 20

// ranges serves the reads of a file in a bucket from ranges fetched ahead:
// the file's tail (the whole file when it is small) and, before a row
// group is read, the span of its column chunks history reads, each one
// ranged GET. arrow-go reads a footer in
// two reads and each column chunk in one: a dozen requests a day file
// instead of three.
type ranges struct {
	r    io.ReaderAt
	size int64
	got  []span
}

type span struct {
	off int64
	b   []byte
}

func (c *ranges) ReadAt(p []byte, off int64) (int, error) {
	end := off + int64(len(p))
	for _, s := range c.got {
		if off >= s.off && end <= s.off+int64(len(s.b)) {
			return copy(p, s.b[off-s.off:]), nil
		}
	}
	if end == c.size && len(c.got) == 0 { // the footer's length: fetch the tail
		from := max(0, c.size-max(tailBytes, int64(len(p))))
		if c.size <= wholeFile {
			from = 0
		}
		if err := c.fetch(from, c.size); err != nil {
			return 0, err
		}
		return c.ReadAt(p, off)
	}
	return c.r.ReadAt(p, off)
}

// fetch reads [off, end) in one request and keeps it (unless a range
// kept holds it: a small file's tail is all of it).
func (c *ranges) fetch(off, end int64) error {
	for _, s := range c.got {
		if off >= s.off && end <= s.off+int64(len(s.b)) {
			return nil
		}
	}
	b := make([]byte, end-off)
	n, err := c.r.ReadAt(b, off)
	if n == len(b) {
		err = nil
	}
	if err != nil {
		return err
	}
	c.got = append(c.got, span{off, b})
	return nil
}

// rowGroup fetches the span of row group rg's column chunks cols.
func (c *ranges) rowGroup(rg *metadata.RowGroupMetaData, cols []int) error {
	lo, hi := int64(-1), int64(0)
	for _, i := range cols {
		cc, err := rg.ColumnChunk(i)
		if err != nil {
			return err
		}
		start := cc.DataPageOffset()
		if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && cc.DictionaryPageOffset() < start {
			start = cc.DictionaryPageOffset()
		}
		if lo < 0 || start < lo {
			lo = start
		}
		hi = max(hi, start+cc.TotalCompressedSize())
	}
	if lo < 0 || hi > c.size || lo >= hi {
		return nil // let the reads say what is wrong
	}
	return c.fetch(lo, hi)
}

// remote reports a store whose reads are requests (a bucket), not a
// local folder's files.
func remote(st storage.Store) bool { return storage.LocalDir(st) == "" }
