package events

import (
	"bytes"
	"io"
	"os"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// BenchmarkStateCodec compresses the uncompressed stream of the state of
// 1,000,000 instruments with the candidate codecs of the state file: time
// per op and the compressed size (the measurement the codec was chosen by,
// see state.go; "s2" is what the state file uses).
func BenchmarkStateCodec(b *testing.B) {
	_, dir := savedBenchState(b)
	z, err := os.ReadFile(StatePath(dir, "venue-sim"))
	if err != nil {
		b.Fatal(err)
	}
	raw, err := io.ReadAll(s2.NewReader(bytes.NewReader(z)))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(raw)), "raw-B")
	for _, c := range []struct {
		name string
		w    func(io.Writer) io.WriteCloser
	}{
		{"zstd-fastest", func(w io.Writer) io.WriteCloser {
			e, _ := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(2), zstd.WithWindowSize(1<<20))
			return e
		}},
		{"zstd-fastest-1", func(w io.Writer) io.WriteCloser {
			e, _ := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(1<<20))
			return e
		}},
		{"s2", func(w io.Writer) io.WriteCloser {
			return s2.NewWriter(w, s2.WriterConcurrency(2), s2.WriterBlockSize(stateBlock))
		}},
		{"s2-1MiB-blocks", func(w io.Writer) io.WriteCloser { return s2.NewWriter(w, s2.WriterConcurrency(2)) }},
		{"s2-better", func(w io.Writer) io.WriteCloser {
			return s2.NewWriter(w, s2.WriterBetterCompression(), s2.WriterConcurrency(2))
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var out bytes.Buffer
			for b.Loop() {
				out.Reset()
				w := c.w(&out)
				for p := raw; len(p) > 0; {
					n := min(len(p), 64<<10)
					w.Write(p[:n])
					p = p[n:]
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(out.Len()), "B")
			b.SetBytes(int64(len(raw)))
		})
	}
}
