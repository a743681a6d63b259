package pqpage

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
)

// Review of AppendIndices: random cases (page and dictionary limits
// small enough to cut pages and fall back inside batches, batch sizes
// of a few rows, the strings given as sliced arrays) give the chunk
// Append gives.
func TestReview81IndicesRandom(t *testing.T) {
	for seed := range 300 {
		r := rand.New(rand.NewPCG(uint64(seed), 81))
		nv := 1 + r.IntN(60)
		var vals [][]byte
		seen := map[string]bool{}
		for len(vals) < nv {
			var v string
			switch r.IntN(4) {
			case 0:
				v = ""
			case 1:
				v = strings.Repeat("a", r.IntN(20))
			case 2:
				v = fmt.Sprintf("%s%d", strings.Repeat("prefix-long-", r.IntN(3)), r.IntN(100))
			default:
				v = string([]byte{byte(r.IntN(256)), byte(r.IntN(256))})
			}
			if !seen[v] {
				seen[v] = true
				vals = append(vals, []byte(v))
			}
		}
		opt := Options{Type: arrow.BinaryTypes.String, Optional: r.IntN(3) > 0, Stats: r.IntN(4) > 0, Codec: compress.Codecs.Uncompressed,
			PageSize: int64(16 + r.IntN(400)), MaxStatsSize: int64(2 + r.IntN(40)), BatchRows: 1 + r.IntN(50), Dict: true,
			DictPageSize: int64(8 + r.IntN(600)), IndexEncoding: parquet.Encodings.RLEDict, DictEncoding: parquet.Encodings.Plain}
		byVal, _ := New(opt)
		byIdx, _ := New(opt)
		for chunk := range 3 {
			for range 1 + r.IntN(5) {
				n := r.IntN(200)
				ids := make([]uint32, 0, n)
				for len(ids) < n {
					id := uint32(r.IntN(len(vals)))
					if opt.Optional && r.IntN(5) == 0 {
						id = NullIndex
					}
					for range min(1+r.IntN(12), n-len(ids)) {
						ids = append(ids, id)
					}
				}
				pre := r.IntN(5)
				all := append(make([]uint32, pre), ids...)
				a := indexArray(all, vals)
				s := array.NewSlice(a, int64(pre), int64(len(all)))
				a.Release()
				err := byVal.Append(s)
				s.Release()
				if err != nil {
					t.Fatal(err)
				}
				if err := byIdx.AppendIndices(ids, vals); err != nil {
					t.Fatal(err)
				}
			}
			finishSame(t, fmt.Sprintf("seed %d chunk %d", seed, chunk), byIdx, byVal)
			byVal.Reset()
			byIdx.Reset()
		}
	}
}
