package iceberg_test

import (
	"context"
	"testing"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/lake/tableformat"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/storage"
)

// TestViewOpensListedFilesWithoutHEAD: on a bucket (versitygw), the view
// readers have of an Iceberg lake lists a table's files with the sizes
// their manifests record, the objects' sizes, and a listed file is read
// with GETs alone: no HEAD a file (a year's history reads 730 files).
func TestViewOpensListedFilesWithoutHEAD(t *testing.T) {
	ctx := context.Background()
	_, reqs := testenv.StartVersityGWCounted(t, "lake")
	st, err := storage.Open(ctx, reqs.URL("lake", "ice"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	load(t, st, 1, 2)
	f, err := iceberg.NewFormat(ctx, st, tableformat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	prefix := schema.Instruments.Name + "/date="
	objs, err := st.List(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int64{}
	for _, o := range objs {
		sizes[o.Name] = o.Size
	}
	v := f.View()
	listed, err := v.List(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) < 2 {
		t.Fatalf("the view lists %d files, want the 2 snapshots' files", len(listed))
	}
	reqs.Reset()
	for _, o := range listed {
		if o.Size != sizes[o.Name] {
			t.Errorf("%s: listed with %d bytes, the object has %d", o.Name, o.Size, sizes[o.Name])
		}
		r, err := storage.OpenListed(ctx, v, o)
		if err != nil {
			t.Fatal(err)
		}
		tail := make([]byte, 4)
		if _, err := r.ReadAt(tail, r.Size()-4); err != nil || string(tail) != "PAR1" {
			t.Errorf("%s: its last 4 bytes %q (%v), want PAR1", o.Name, tail, err)
		}
		r.Close()
	}
	if sent := reqs.Reset(); sent["HEAD"] != 0 || sent["GET"] != int64(len(listed)) {
		t.Errorf("reading the last bytes of %d listed files sent %v: want a GET a file, no HEAD", len(listed), sent)
	}
}
