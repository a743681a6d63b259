package parquet

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/sinktest"
	"github.com/optlake/optlake/storage"
)

func TestConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{New: func(t testing.TB) (sinks.Sink, sinktest.Reader) {
		dir := t.TempDir()
		s, err := New(Options{Store: storage.NewLocal(dir)})
		if err != nil {
			t.Fatal(err)
		}
		return s, sinktest.ParquetFiles{Dir: dir}
	}})
}

// The same suite with the data directory on a bucket prefix of a real
// S3-compatible server; DuckDB reads the objects from the server's folder.
func TestConformanceOnBucket(t *testing.T) {
	g := testenv.StartVersityGW(t, "lake")
	g.SetCredentials(t)
	n := 0
	sinktest.Run(t, sinktest.Harness{New: func(t testing.TB) (sinks.Sink, sinktest.Reader) {
		n++
		prefix := fmt.Sprintf("case%d", n)
		st, err := storage.Open(context.Background(), g.URL("lake", prefix))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		s, err := New(Options{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		return s, sinktest.ParquetFiles{Dir: filepath.Join(g.Dir(), "lake", prefix)}
	}})
}
