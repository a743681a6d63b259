package parquet

import (
	"sync"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/zstd"
)

// pooledZstd is the zstd codec this package registers with arrow-go in
// place of the stock one (compress.RegisterCodec is process-global: every
// Parquet writer and reader of the process uses it, which is why it is
// registered in init, before any goroutine can look codecs up).
//
// The stock codec's EncodeLevel — what a writer with a compression level
// set calls for every page — builds a new zstd.Encoder per page: several
// MiB of fresh tables each time (~2.9 GB allocated per million instrument
// rows). This one keeps encoders in a pool per level, each with one
// goroutine (pages are compressed by the writer's goroutine; the encoder's
// own goroutines would only add hand-offs) and a 1 MiB window (a page is at
// most the 1 MiB default page size plus overhead; a dictionary page larger
// than the window still compresses, only with matches within the window).
// The frames are ordinary zstd frames: any reader decodes them.
//
// The frames carry no content checksum (zstd's XXH64 of the page, which
// klauspost's encoder adds by default): a Parquet page is one small frame
// whose size the page header already states, libzstd — what DuckDB,
// Arrow C++ and parquet-mr's native codec write with — leaves the checksum
// off by default, and hashing every page cost ~0.04 CPU-s per 340 MB of
// pages (the 1M listing's two files; docs/PERFORMANCE.md, issue 33). Being
// the process's codec, this holds for every Parquet file optlake writes:
// per-snapshot files, compacted and replayed days alike. The raw archive
// keeps its checksum (package archive).
//
// Everything but EncodeLevel — decoding, streams, the level-less Encode,
// CompressBound — is the stock codec's.
type pooledZstd struct {
	compress.Codec // the stock codec

	mu    sync.Mutex
	pools map[zstd.EncoderLevel]*sync.Pool
}

func init() {
	stock, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		panic("parquet: arrow-go has no zstd codec: " + err.Error())
	}
	compress.RegisterCodec(compress.Codecs.Zstd, &pooledZstd{Codec: stock, pools: map[zstd.EncoderLevel]*sync.Pool{}})
}

func (z *pooledZstd) pool(level int) *sync.Pool {
	l := zstd.SpeedDefault
	if level != compress.DefaultCompressionLevel {
		l = zstd.EncoderLevelFromZstd(level)
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	p := z.pools[l]
	if p == nil {
		p = &sync.Pool{New: func() any {
			enc, err := zstd.NewWriter(nil, zstd.WithZeroFrames(true), zstd.WithEncoderLevel(l),
				zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(1<<20), zstd.WithEncoderCRC(false))
			if err != nil {
				panic("parquet: zstd encoder: " + err.Error()) // only on invalid options, which these are not
			}
			return enc
		}}
		z.pools[l] = p
	}
	return p
}

// EncodeLevel compresses src into one zstd frame with a pooled encoder.
func (z *pooledZstd) EncodeLevel(dst, src []byte, level int) []byte {
	p := z.pool(level)
	enc := p.Get().(*zstd.Encoder)
	out := enc.EncodeAll(src, dst[:0])
	p.Put(enc)
	return out
}
