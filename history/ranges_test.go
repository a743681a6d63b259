package history

import (
	"context"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/storage"
)

// countingStore is a store whose files are read as a bucket's are (it is
// no storage.LocalFolder), counting the reads: each a ranged GET on a
// bucket.
type countingStore struct {
	storage.Store
	reads *atomic.Int64
}

func (s countingStore) Open(ctx context.Context, name string) (storage.Reader, error) {
	r, err := s.Store.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	return countingReader{r, s.reads}, nil
}

type countingReader struct {
	storage.Reader
	reads *atomic.Int64
}

func (r countingReader) ReadAt(p []byte, off int64) (int, error) {
	r.reads.Add(1)
	return r.Reader.ReadAt(p, off)
}

// On a bucket, history reads a file's tail (its footer) in one request and
// each row group it reads in one more (the span of the column chunks it
// needs), and finds what it finds on a local disk. arrow-go alone reads a
// footer in two requests and each column chunk in one: 13 or more a row
// group.
func TestHistoryOnABucketReadsAFileInFewRequests(t *testing.T) {
	ctx := context.Background()
	st, sim, _ := testLake(t)
	remoteSt := countingStore{Store: st, reads: &atomic.Int64{}}
	if !remote(remoteSt) || remote(st) {
		t.Fatal("remote: the counting store must read as a bucket, the local one not")
	}
	names := sim.Instruments()
	for _, name := range []string{names[0].InstrumentName, names[len(names)/2].InstrumentName, names[len(names)-1].InstrumentName} {
		local, err := FromLake(ctx, st, name)
		if err != nil {
			t.Fatal(err)
		}
		remoteSt.reads.Store(0)
		var n Reads
		got, err := fromLake(ctx, remoteSt, name, &n)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, local) {
			t.Fatalf("%s: the bucket's history differs from the local one", name)
		}
		if reads := remoteSt.reads.Load(); reads > int64(n.Files+n.RowGroups) {
			t.Errorf("%s: %d reads for %d files and %d row groups read", name, reads, n.Files, n.RowGroups)
		} else {
			t.Logf("%s: %d reads, %+v", name, reads, n)
		}
	}
}

// On versitygw, history's requests are its two listings (one a table) and
// one GET a file (these are smaller than wholeFile: fetched whole, not
// its tail and then each row group's span): no HEAD a file, whose size
// the listing gave. It finds what it finds on the local copy.
func TestHistoryOnVersityGWSendsNoRequestAFile(t *testing.T) {
	ctx := context.Background()
	st, sim, _ := testLake(t)
	g, reqs := testenv.StartVersityGWCounted(t, "lake")
	if out, err := exec.Command("cp", "-r", storage.LocalDir(st), filepath.Join(g.Dir(), "lake", "h")).CombinedOutput(); err != nil {
		t.Fatalf("copy the lake: %v %s", err, out)
	}
	bucket, err := storage.Open(ctx, reqs.URL("lake", "h"))
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	files, err := st.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	big := 0
	for _, f := range files {
		if strings.HasSuffix(f.Name, ".parquet") && f.Size > wholeFile {
			t.Fatalf("%s is %d bytes: the test wants files of at most %d", f.Name, f.Size, wholeFile)
		}
		if f.Size > tailBytes {
			big++
		}
	}
	if big == 0 {
		t.Fatal("no file larger than a tail: the test would not tell a whole file from a tail")
	}
	name := sim.Instruments()[0].InstrumentName
	local, err := FromLake(ctx, st, name)
	if err != nil {
		t.Fatal(err)
	}
	reqs.Reset()
	var n Reads
	got, err := fromLake(ctx, bucket, name, &n)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, local) {
		t.Fatal("the bucket's history differs from the local one")
	}
	sent := reqs.Reset()
	if want := int64(2 + n.Files); sent["GET"] != want || len(sent) != 1 {
		t.Errorf("%v sent for %d files and %d row groups read: want %d GETs only", sent, n.Files, n.RowGroups, want)
	} else {
		t.Logf("%v for %+v", sent, n)
	}
}
