package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/minio/simdjson-go"
)

// SimdjsonTape is the parsing reference of issue 6: simdjson-go building its
// tape of the whole listing, warm (the file already in memory, a second
// parse into the first one's buffers), with no extraction at all. Seconds is
// that second parse; Rows the instruments in the listing (counted on the
// tape, untimed). simdjson-go needs the whole document in memory and a CPU
// with AVX2 and CLMUL.
func SimdjsonTape(ctx context.Context, path string) (Result, error) {
	if !simdjson.SupportedCPU() {
		return Result{}, errors.New("simdjson-go: this CPU lacks AVX2/CLMUL")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Result{}, err
	}
	pj, err := simdjson.Parse(data, nil) // cold: allocates the tape
	if err != nil {
		return Result{}, fmt.Errorf("simdjson-go: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	start := time.Now()
	pj, err = simdjson.Parse(data, pj, simdjson.WithCopyStrings(false))
	took := time.Since(start)
	if err != nil {
		return Result{}, fmt.Errorf("simdjson-go: %w", err)
	}
	rows, err := countInstruments(pj)
	if err != nil {
		return Result{}, err
	}
	return Result{Rows: rows, InBytes: int64(len(data)), Seconds: took.Seconds()}, nil
}

// countInstruments counts the elements of every group's "instruments" array.
func countInstruments(pj *simdjson.ParsedJson) (int64, error) {
	it := pj.Iter()
	it.Advance()
	var root simdjson.Iter
	if _, r, err := it.Root(nil); err != nil {
		return 0, err
	} else {
		root = *r
	}
	groups, err := root.Array(nil)
	if err != nil {
		return 0, fmt.Errorf("listing: %w", err)
	}
	var n int64
	var obj simdjson.Object
	var elem simdjson.Element
	gi := groups.Iter()
	for gi.Advance() != simdjson.TypeNone {
		if _, err := gi.Object(&obj); err != nil {
			return 0, err
		}
		if obj.FindKey("instruments", &elem) == nil {
			continue
		}
		arr, err := elem.Iter.Array(nil)
		if err != nil {
			return 0, err
		}
		ai := arr.Iter()
		for ai.Advance() != simdjson.TypeNone {
			n++
		}
	}
	return n, nil
}
