package storage_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/optlake/optlake/internal/datadir"
	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/storage"
	"github.com/optlake/optlake/storage/storagetest"
)

func TestLocalConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store { return storage.NewLocal(t.TempDir()) })
}

func TestS3Conformance(t *testing.T) {
	g := testenv.StartVersityGW(t, "lake")
	g.SetCredentials(t)
	n := 0
	storagetest.Run(t, func(t *testing.T) storage.Store {
		n++
		s, err := storage.Open(context.Background(), g.URL("lake", "hist"+strings.Repeat("x", n)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// The start of a process walks a local data directory whole once a day
// (CleanedMarker) and only the recent partitions in between: a temp file in
// an old partition is removed by the first start and by the first start a
// day later, not by the starts between.
func TestCleanIncompleteWalksOldPartitionsDaily(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := storage.NewLocal(dir)
	old := filepath.Join(dir, "instruments", "date=2020-01-01", ".a.parquet.tmp-1")
	today := filepath.Join(dir, "instruments", "date="+time.Now().UTC().Format(time.DateOnly), ".b.parquet.tmp-2")
	put := func(p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }

	put(old)
	put(today)
	if n, err := storage.CleanIncomplete(ctx, s); err != nil || n != 2 || exists(old) || exists(today) {
		t.Fatalf("first start: removed %d (%v), old left %v, today's left %v; want both removed", n, err, exists(old), exists(today))
	}
	marker := filepath.Join(dir, storage.CleanedMarker)
	if !exists(marker) {
		t.Fatalf("no %s after a full walk", storage.CleanedMarker)
	}
	// It lists the table's folder: the next starts look in it for today's
	// and yesterday's folders only (and still find today's temp file).
	if b, _ := os.ReadFile(marker); string(b) != "instruments\n" {
		t.Fatalf("%s holds %q, want the folder of day folders", storage.CleanedMarker, b)
	}

	put(old)
	put(today)
	if n, err := storage.CleanIncomplete(ctx, s); err != nil || n != 1 || !exists(old) || exists(today) {
		t.Fatalf("next start: removed %d (%v), old left %v, today's left %v; want only today's removed", n, err, exists(old), exists(today))
	}

	dayAgo := time.Now().Add(-25 * time.Hour)
	if err := os.Chtimes(marker, dayAgo, dayAgo); err != nil {
		t.Fatal(err)
	}
	if n, err := storage.CleanIncomplete(ctx, s); err != nil || n != 1 || exists(old) {
		t.Fatalf("a day later: removed %d (%v), old left %v; want it removed", n, err, exists(old))
	}
	if st, err := os.Stat(marker); err != nil || time.Since(st.ModTime()) > time.Hour {
		t.Fatalf("marker not renewed by the full walk: %v, %v", st, err)
	}
}

// The sweep does not enter the folders it is told to skip (compaction's
// trash, cmd/optlake's lockStore): a hidden temp-like name there is left,
// and the daily sweep leaves the partitions unchanged since the last one.
func TestCleanIncompleteSkipsTrashAndUnchangedPartitions(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := storage.NewLocal(dir)
	today := time.Now().UTC().Format(time.DateOnly)
	trashed := filepath.Join(dir, ".compact/trash/20260101T000000Z-id/instruments/date="+today, ".a.parquet.tmp-1")
	old := filepath.Join(dir, "instruments/date=2020-01-01", ".b.parquet.tmp-2")
	for _, p := range []string{trashed, old} {
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("x"), 0o644)
	}
	// The last daily sweep was 25 hours ago, and the old partition has
	// not changed since (its temp file is older than that sweep: it cannot
	// be, so leaving it shows the partition was not read).
	dayAgo := time.Now().Add(-25 * time.Hour)
	before := dayAgo.Add(-time.Hour)
	os.Chtimes(filepath.Dir(old), before, before)
	marker := filepath.Join(dir, storage.CleanedMarker)
	os.WriteFile(marker, nil, 0o644)
	os.Chtimes(marker, dayAgo, dayAgo)
	if n, err := storage.CleanIncomplete(ctx, s, ".compact/trash"); err != nil || n != 0 {
		t.Fatalf("removed %d (%v), want none", n, err)
	}
	for _, p := range []string{trashed, old} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed: the sweep entered its folder", p)
		}
	}
}

func TestLocalTempHiddenAndCleaned(t *testing.T) {
	dir := t.TempDir()
	s := storage.NewLocal(dir)
	ctx := context.Background()
	w, err := s.Create(ctx, "t/date=2026-11-24/p.parquet")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("x"))
	ents, _ := os.ReadDir(filepath.Join(dir, "t/date=2026-11-24"))
	if len(ents) != 1 || strings.HasSuffix(ents[0].Name(), ".parquet") || !strings.HasPrefix(ents[0].Name(), ".") {
		t.Fatalf("in-flight temp file: %v", ents)
	}
	// A crash leaves the temp file: start-up cleanup removes it.
	if n, err := datadir.CleanTemp(dir, datadir.Sweep{}); n != 1 || err != nil {
		t.Fatalf("CleanTemp = %d, %v", n, err)
	}
	mustCommit := func(name string) {
		w, _ := s.Create(ctx, name)
		w.Write([]byte("y"))
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	mustCommit("t/a")
	st, err := os.Stat(filepath.Join(dir, "t/a"))
	if err != nil || st.Mode().Perm() != 0o644&^umask() {
		t.Fatalf("mode %v, %v", st.Mode(), err)
	}
	st, _ = os.Stat(filepath.Join(dir, "t"))
	if st.Mode().Perm() != 0o755&^umask() {
		t.Fatalf("folder mode %v", st.Mode())
	}
}

func umask() os.FileMode {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return os.FileMode(m)
}

func TestOpenURLs(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ in, want string }{
		{"/tmp/lake", "/tmp/lake"},
		{"rel/lake", "rel/lake"},
		{"file:///tmp/lake", "/tmp/lake"},
		{"s3://bucket/pre/fix?endpoint=http://127.0.0.1:9000&region=us-east-1", "s3://bucket/pre/fix"},
		{"s3://bucket", "s3://bucket"},
	} {
		s, err := storage.Open(ctx, tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if s.String() != tc.want {
			t.Errorf("%s: String() = %q, want %q", tc.in, s, tc.want)
		}
		s.Close()
	}
	const secret = "wJalrXUtnFEMIK7MDENGbPxRfiCYzzz"
	for _, in := range []string{
		"s3://AKIA:" + secret + "@bucket/p",
		"s3://bucket/p?secret_access_key=" + secret,
		"s3://bucket/p?X-Amz-Signature=" + secret,
		"s3://bucket/p?token=" + secret,
		"azblob://c/p?sas_token=" + secret,
		"s3://bucket/p?endpoint=http://u:" + secret + "@127.0.0.1:9000",
		"ftp://host/p",
		"s3://bucket/p?bogus=1",
	} {
		_, err := storage.Open(ctx, in)
		if err == nil {
			t.Fatalf("%s: accepted", in)
		}
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("error shows the secret: %v", err)
		}
	}
}

// The secret key appears in no error and no object.
func TestS3SecretNeverShown(t *testing.T) {
	g := testenv.StartVersityGW(t, "lake")
	g.SetCredentials(t)
	ctx := context.Background()
	s, err := storage.Open(ctx, g.URL("lake", "p"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var errs []error
	_, err = s.Open(ctx, "missing")
	errs = append(errs, err)
	if err := s.Put(ctx, "ok/date=2026-11-24/x", []byte("data")); err != nil {
		t.Fatal(err)
	}
	l, err := storage.AcquireLease(ctx, s, storage.LeaseName, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, err = storage.AcquireLease(ctx, s, storage.LeaseName, time.Minute)
	errs = append(errs, err)
	// Wrong secret: the server refuses; the error names the store only.
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong-"+testenv.S3SecretKey)
	bad, err := storage.Open(ctx, g.URL("lake", "p"))
	if err != nil {
		t.Fatal(err)
	}
	err = bad.Put(ctx, "x", []byte("x"))
	if err == nil {
		t.Fatal("a wrong secret key was accepted")
	}
	errs = append(errs, err)
	bad.Close()
	filepath.WalkDir(g.Dir(), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			if strings.Contains(string(b), testenv.S3SecretKey) {
				t.Errorf("object %s holds the secret key", p)
			}
		}
		return nil
	})
	l.Release(ctx)
	// Server gone: the error names the store.
	g.Stop()
	err = s.Put(ctx, "y", []byte("y"))
	if err == nil {
		t.Fatal("put to a stopped server succeeded")
	}
	errs = append(errs, err)
	for _, err := range errs {
		if err == nil {
			t.Fatal("expected an error")
		}
		if strings.Contains(err.Error(), testenv.S3SecretKey) || strings.Contains(fmt.Sprintf("%+v", err), testenv.S3SecretKey) {
			t.Fatalf("error shows the secret: %v", err)
		}
		if !strings.Contains(err.Error(), "s3://lake/p") {
			t.Fatalf("error does not name the store: %v", err)
		}
	}
	t.Logf("errors checked: %q", errs)
}

// A writer killed with -9 in the middle of a multipart upload leaves an
// incomplete upload: invisible, and aborted by CleanIncomplete at the next
// start.
func TestS3CleanIncomplete(t *testing.T) {
	g := testenv.StartVersityGW(t, "lake")
	g.SetCredentials(t)
	ctx := context.Background()
	s, err := storage.Open(ctx, g.URL("lake", "hist"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, bucket, prefix := storage.S3Client(s)
	// As a dead writer left it: an upload created, one part sent, never
	// completed nor aborted. Plus one outside the prefix, not ours.
	for _, key := range []string{prefix + "raw/date=2026-11-24/listing.json", "other/x"} {
		up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: up.UploadId,
			PartNumber: aws.Int32(1), Body: bytes.NewReader(bytes.Repeat([]byte("x"), 5<<20))})
		if err != nil {
			t.Fatal(err)
		}
	}
	if l, err := s.List(ctx, ""); err != nil || len(l) != 0 {
		t.Fatalf("an incomplete upload is visible: %v, %v", l, err)
	}
	n, err := storage.CleanIncomplete(ctx, s)
	if err != nil || n != 1 {
		t.Fatalf("CleanIncomplete = %d, %v; want 1", n, err)
	}
	out, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Uploads) != 1 || aws.ToString(out.Uploads[0].Key) != "other/x" {
		t.Fatalf("uploads left: %+v", out.Uploads)
	}
	// And an aborted storage Writer leaves no upload behind.
	w, err := s.Create(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	w.Write(make([]byte, storage.PartSize+1))
	w.Abort()
	if n, err := storage.CleanIncomplete(ctx, s); err != nil || n != 0 {
		t.Fatalf("after Abort, CleanIncomplete found %d uploads (%v)", n, err)
	}
}

// A holder whose store stops answering for a whole TTL gives the lease up
// (Lost closes, Err says why): past that point another process may take
// the prefix over, so this one must stop writing.
func TestLeaseLostWhenStoreGone(t *testing.T) {
	g := testenv.StartVersityGW(t, "lake")
	g.SetCredentials(t)
	ctx := context.Background()
	s, err := storage.Open(ctx, g.URL("lake", "gone"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const ttl = 1500 * time.Millisecond
	l, err := storage.AcquireLease(ctx, s, storage.LeaseName, ttl)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	// Renewed while the store answers.
	select {
	case <-l.Lost():
		t.Fatalf("lost while the store answers: %v", l.Err())
	case <-time.After(2 * ttl):
	}
	g.Stop()
	stopped := time.Now()
	select {
	case <-l.Lost():
		if time.Since(stopped) < ttl/3 || !strings.Contains(fmt.Sprint(l.Err()), "expired") {
			t.Errorf("lost %s after the store stopped: %v", time.Since(stopped), l.Err())
		}
	case <-time.After(4 * ttl):
		t.Fatalf("still held %s after the store stopped (err %v)", 4*ttl, l.Err())
	}
}

// A POSIX-backed S3 server (versitygw) removes a folder once its last object
// is deleted; a PUT of another object into the same folder at that moment
// fails with 409 ExistingObjectIsDirectory (the folder went away between
// the server creating it and linking the object). Compaction publishes days
// of several tables at once, each writing and then deleting its journal in
// .compact/journal/, which is that race (seen in CI). Put retries it, and so
// does a Writer's Commit of an object that fits one part: two writers that
// each write and delete their own object in one folder, over and over (one
// by Put, one by Create and Commit), never see an error.
func TestS3PutRacingFolderRemoval(t *testing.T) {
	g := testenv.StartVersityGW(t, "lake")
	g.SetCredentials(t)
	ctx := context.Background()
	s, err := storage.Open(ctx, g.URL("lake", "race"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const rounds = 300
	errc := make(chan error, 2)
	write := map[string]func(name string) error{
		"j/a.json": func(name string) error { return s.Put(ctx, name, []byte("{}")) },
		"j/b.json": func(name string) error {
			w, err := s.Create(ctx, name)
			if err != nil {
				return err
			}
			if _, err := w.Write([]byte("{}")); err != nil {
				return err
			}
			return w.Commit()
		},
	}
	for name, write := range write {
		go func() {
			for range rounds {
				if err := write(name); err != nil {
					errc <- err
					return
				}
				if err := s.Delete(ctx, name); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}

// On a bucket, reading a small object whole is one GET, a delete one
// DELETE, and a file a listing described is opened without a HEAD (its
// size is the listing's): a command that reads a year's day files sends
// no request a file beyond its reads. A read of an object that changed
// size since it was listed fails, naming it.
func TestS3ReadsSendNoHEAD(t *testing.T) {
	_, reqs := testenv.StartVersityGWCounted(t, "lake")
	ctx := context.Background()
	s, err := storage.Open(ctx, reqs.URL("lake", "p"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := []byte("a small object\n")
	for _, n := range []string{"d/a", "d/b", "d/c"} {
		if err := s.Put(ctx, n, want); err != nil {
			t.Fatal(err)
		}
	}
	reqs.Reset()
	got, err := storage.ReadAll(ctx, s, "d/a")
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("ReadAll: %q, %v", got, err)
	}
	if n := reqs.Reset(); n["GET"] != 1 || len(n) != 1 {
		t.Errorf("ReadAll sent %v, want one GET", n)
	}
	if _, err := storage.ReadAll(ctx, s, "d/absent"); !errors.Is(err, storage.ErrNotExist) {
		t.Errorf("ReadAll of an absent object: %v, want ErrNotExist", err)
	}
	empty := []byte{}
	if err := s.Put(ctx, "d/empty", empty); err != nil {
		t.Fatal(err)
	}
	if got, err := storage.ReadAll(ctx, s, "d/empty"); err != nil || len(got) != 0 {
		t.Errorf("ReadAll of an empty object: %q, %v", got, err)
	}
	if err := s.Delete(ctx, "d/empty"); err != nil {
		t.Fatal(err)
	}

	listed, err := s.List(ctx, "d/")
	if err != nil {
		t.Fatal(err)
	}
	reqs.Reset()
	for _, o := range listed {
		r, err := storage.OpenListed(ctx, s, o)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, r.Size())
		if _, err := r.ReadAt(b, 0); err != nil || !bytes.Equal(b, want) {
			t.Fatalf("%s: %q, %v", o.Name, b, err)
		}
		r.Close()
	}
	if n := reqs.Reset(); n["GET"] != int64(len(listed)) || len(n) != 1 {
		t.Errorf("opening and reading %d listed files sent %v, want one GET each", len(listed), n)
	}

	// A delete is one request, of an absent object too.
	reqs.Reset()
	for _, n := range []string{"d/c", "d/c", "d/absent"} {
		if err := s.Delete(ctx, n); err != nil {
			t.Fatalf("delete %s: %v", n, err)
		}
	}
	if n := reqs.Reset(); n["DELETE"] != 3 || len(n) != 1 {
		t.Errorf("three deletes sent %v, want three DELETEs", n)
	}
	if _, err := s.Stat(ctx, "d/c"); !errors.Is(err, storage.ErrNotExist) {
		t.Errorf("d/c after its delete: %v", err)
	}

	// Changed since it was listed: a ReadAt and a Read say so.
	if err := s.Put(ctx, "d/b", []byte("longer than it was listed\n")); err != nil {
		t.Fatal(err)
	}
	r, err := storage.OpenListed(ctx, s, listed[1])
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.ReadAt(make([]byte, 4), 0); err == nil || !strings.Contains(err.Error(), "d/b") || !strings.Contains(err.Error(), "changed since it was listed") {
		t.Errorf("ReadAt of a changed object: %v", err)
	}
	if _, err := io.ReadAll(r); err == nil || !strings.Contains(err.Error(), "changed since it was listed") {
		t.Errorf("Read of a changed object: %v", err)
	}
}
