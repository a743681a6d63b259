package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // azblob://
	_ "gocloud.dev/blob/gcsblob"   // gs://
	_ "gocloud.dev/blob/s3blob"    // s3://
	"gocloud.dev/gcerrors"
)

// PartSize is the chunk a bucket Writer buffers and uploads as one part of
// a multipart upload (S3's minimum): an object of unknown length is
// streamed in parts of it, the SDK's transfer manager holding two or three
// parts per open writer (it buffers two before it starts the upload), and
// an object may grow to 10,000 parts, 48 GiB.
const PartSize = 5 << 20

// Bucket is a data directory on a bucket prefix (gocloud.dev/blob). An object
// is visible whole or not at all: a single PUT or a completed multipart
// upload; Abort cancels the upload.
type Bucket struct {
	b      *blob.Bucket
	name   string // scheme://bucket/prefix, never a secret
	bucket string // the bucket (container) alone
	prefix string // "" or "p/q/"
}

func (s *Bucket) String() string { return s.name }

func (s *Bucket) Close() error { return s.b.Close() }

// As exposes the driver's client (e.g. **s3.Client), see blob.Bucket.As.
func (s *Bucket) As(i any) bool { return s.b.As(i) }

func (s *Bucket) wrap(op, name string, err error) error {
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		err = fmt.Errorf("%w (%v)", ErrNotExist, err)
	case gcerrors.FailedPrecondition:
		err = fmt.Errorf("%w (%v)", ErrExist, err)
	}
	return fmt.Errorf("%s %s/%s: %w", op, s.name, name, err)
}

type bucketWriter struct {
	s         *Bucket
	name      string
	exclusive bool
	ctx       context.Context
	cancel    context.CancelFunc
	// buf holds an object's first PartSize bytes: an object that fits is
	// written by one PUT on Commit (retried like Put's), a larger one
	// streams through w, opened when buf would overflow.
	buf  []byte
	w    *blob.Writer
	done bool
}

func (s *Bucket) create(ctx context.Context, name string, exclusive bool) (Writer, error) {
	if err := checkName(name); err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	return &bucketWriter{s: s, name: name, exclusive: exclusive, ctx: ctx, cancel: cancel}, nil
}

func (s *Bucket) Create(ctx context.Context, name string) (Writer, error) {
	return s.create(ctx, name, false)
}

func (s *Bucket) CreateExclusive(ctx context.Context, name string) (Writer, error) {
	return s.create(ctx, name, true)
}

func (w *bucketWriter) Write(p []byte) (int, error) {
	if w.done {
		return 0, fmt.Errorf("write %s/%s: writer closed", w.s.name, w.name)
	}
	if w.w == nil {
		if len(w.buf)+len(p) <= PartSize {
			w.buf = append(w.buf, p...)
			return len(p), nil
		}
		bw, err := w.s.b.NewWriter(w.ctx, w.name, &blob.WriterOptions{BufferSize: PartSize, MaxConcurrency: 1, IfNotExist: w.exclusive})
		if err != nil {
			return 0, w.s.wrap("create", w.name, err)
		}
		w.w = bw
		if _, err := bw.Write(w.buf); err != nil {
			return 0, w.s.wrap("write", w.name, err)
		}
		w.buf = nil
	}
	n, err := w.w.Write(p)
	if err != nil {
		return n, w.s.wrap("write", w.name, err)
	}
	return n, nil
}

func (w *bucketWriter) Commit() error {
	if w.done {
		return fmt.Errorf("commit %s/%s: writer closed", w.s.name, w.name)
	}
	w.done = true
	defer w.cancel()
	if w.w == nil {
		err := w.s.put(w.ctx, w.name, w.buf, &blob.WriterOptions{IfNotExist: w.exclusive})
		w.buf = nil
		return err
	}
	if err := w.w.Close(); err != nil {
		return w.s.wrap("write", w.name, err)
	}
	return nil
}

// Abort cancels the writer's context: gocloud then aborts the multipart
// upload (or never sends the single PUT), so no object appears.
func (w *bucketWriter) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	w.buf = nil
	w.cancel()
	if w.w != nil {
		w.w.Close() // returns the cancellation; nothing was written
	}
	return nil
}

func (s *Bucket) Put(ctx context.Context, name string, data []byte) error {
	if err := checkName(name); err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	return s.put(ctx, name, data, nil)
}

// put writes data to name in one PUT. A PUT refused because its folder was
// removed at that moment (folderRace) is sent again, up to putRetries
// times, waiting 5, 10, 20… ms in between.
func (s *Bucket) put(ctx context.Context, name string, data []byte, opts *blob.WriterOptions) error {
	for i := 0; ; i++ {
		err := s.b.WriteAll(ctx, name, data, opts)
		if err == nil {
			return nil
		}
		if i == putRetries || !folderRace(err) {
			return s.wrap("write", name, err)
		}
		select {
		case <-ctx.Done():
			return s.wrap("write", name, err)
		case <-time.After(5 * time.Millisecond << i):
		}
	}
}

// putRetries bounds put's retries of a folderRace (155 ms in all).
const putRetries = 5

// folderRace reports whether err is a POSIX-backed S3 server's refusal of a
// PUT whose folder another request removed at that moment: versitygw
// removes a folder when its last object is deleted, and a PUT into it
// between its mkdir and its link fails with 409 ExistingObjectIsDirectory.
// Compaction publishes several tables' days at once, each writing and then
// deleting its journal in .compact/journal/, which is that race. The PUT
// changed nothing, so it is safe to send again (also with IfNotExist).
func folderRace(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "ExistingObjectIsDirectory"
}

type bucketReader struct {
	ctx    context.Context
	s      *Bucket
	name   string
	size   int64
	off    int64        // for Read
	stream *blob.Reader // for Read, opened on the first call
	// listed: size is a listing's (OpenListed), checked by each read
	// against the object's size the GET reports.
	listed bool
}

// check returns an error when the object read is no longer the size
// OpenListed was given: it changed since it was listed.
func (r *bucketReader) check(rr *blob.Reader) error {
	if r.listed && rr.Size() != r.size {
		return r.s.wrap("read", r.name, fmt.Errorf("the object is %d bytes, listed as %d: it changed since it was listed", rr.Size(), r.size))
	}
	return nil
}

func (r *bucketReader) Size() int64 { return r.size }

func (r *bucketReader) Close() error {
	if r.stream != nil {
		return r.stream.Close()
	}
	return nil
}

// ReadAt is one ranged GET.
func (r *bucketReader) ReadAt(p []byte, off int64) (int, error) {
	if off >= r.size {
		return 0, io.EOF
	}
	n := int64(len(p))
	if off+n > r.size {
		n = r.size - off
	}
	rr, err := r.s.b.NewRangeReader(r.ctx, r.name, off, n, quietReads())
	if err != nil {
		return 0, r.s.wrap("read", r.name, err)
	}
	defer rr.Close()
	if err := r.check(rr); err != nil {
		return 0, err
	}
	got, err := io.ReadFull(rr, p[:n])
	if err != nil {
		return got, r.s.wrap("read", r.name, err)
	}
	if got < len(p) {
		return got, io.EOF
	}
	return got, nil
}

// Read streams the object from the start with one GET (opened on the
// first Read), not one ranged GET per call.
func (r *bucketReader) Read(p []byte) (int, error) {
	if r.off >= r.size {
		return 0, io.EOF
	}
	if r.stream == nil {
		rr, err := r.s.b.NewRangeReader(r.ctx, r.name, r.off, -1, quietReads())
		if err != nil {
			return 0, r.s.wrap("read", r.name, err)
		}
		if err := r.check(rr); err != nil {
			rr.Close()
			return 0, err
		}
		r.stream = rr
	}
	n, err := r.stream.Read(p)
	r.off += int64(n)
	if err != nil && !errors.Is(err, io.EOF) {
		return n, r.s.wrap("read", r.name, err)
	}
	if errors.Is(err, io.EOF) && r.off < r.size {
		return n, r.s.wrap("read", r.name, io.ErrUnexpectedEOF)
	}
	return n, err
}

func (s *Bucket) Open(ctx context.Context, name string) (Reader, error) {
	info, err := s.Stat(ctx, name)
	if err != nil {
		return nil, err
	}
	return &bucketReader{ctx: ctx, s: s, name: name, size: info.Size}, nil
}

// OpenListed implements ListedOpener: no HEAD, the listing gave the size.
// A read finds out when the object is no longer the one listed (absent,
// or of another size).
func (s *Bucket) OpenListed(ctx context.Context, o Info) (Reader, error) {
	if err := checkName(o.Name); err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	return &bucketReader{ctx: ctx, s: s, name: o.Name, size: o.Size, listed: true}, nil
}

// ReadAll implements allReader: one GET, no HEAD before it.
func (s *Bucket) ReadAll(ctx context.Context, name string) ([]byte, error) {
	if err := checkName(name); err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	r, err := s.b.NewReader(ctx, name, quietReads())
	if err != nil {
		return nil, s.wrap("read", name, err)
	}
	defer r.Close()
	b := make([]byte, 0, r.Size())
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, s.wrap("read", name, err)
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
	if int64(len(b)) != r.Size() {
		return nil, s.wrap("read", name, io.ErrUnexpectedEOF)
	}
	return b, nil
}

func (s *Bucket) Stat(ctx context.Context, name string) (Info, error) {
	if err := checkName(name); err != nil {
		return Info{}, fmt.Errorf("%s: %w", s.name, err)
	}
	a, err := s.b.Attributes(ctx, name)
	if err != nil {
		return Info{}, s.wrap("stat", name, err)
	}
	return Info{Name: name, Size: a.Size, ModTime: a.ModTime}, nil
}

func (s *Bucket) List(ctx context.Context, prefix string) ([]Info, error) {
	var out []Info
	it := s.b.List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, s.wrap("list", prefix, err)
		}
		if o.IsDir {
			continue
		}
		base := o.Key[strings.LastIndexByte(o.Key, '/')+1:]
		if IsTemp(base) {
			continue
		}
		out = append(out, Info{Name: o.Key, Size: o.Size, ModTime: o.ModTime})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (s *Bucket) ListDir(ctx context.Context, dir string) ([]Info, error) {
	if err := checkDir(dir); err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	var out []Info
	it := s.b.List(&blob.ListOptions{Prefix: dir, Delimiter: "/"})
	for {
		o, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, s.wrap("list", dir, err)
		}
		if o.IsDir {
			out = append(out, Info{Name: o.Key})
			continue
		}
		if IsTemp(o.Key[strings.LastIndexByte(o.Key, '/')+1:]) {
			continue
		}
		out = append(out, Info{Name: o.Key, Size: o.Size, ModTime: o.ModTime})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (s *Bucket) Delete(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	if c := s.s3Client(); c != nil && !strings.ContainsFunc(name, func(r rune) bool { return r < ' ' }) {
		// One DeleteObject, which succeeds for an absent key: gocloud's
		// Delete sends a HEAD first to report one, a request per object
		// (compaction deletes a day's 288 files). Names with control
		// characters, which gocloud escapes, take its path.
		if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: aws.String(s.prefix + name)}); err != nil {
			return s.wrap("delete", name, err)
		}
		return nil
	}
	if err := s.b.Delete(ctx, name); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return s.wrap("delete", name, err)
	}
	return nil
}

// secretParams are query parameters that would carry a credential: refused,
// credentials come only from each cloud's standard chain.
var secretParams = []string{"secret", "key", "token", "password", "credential", "sig", "signature", "sas", "access"}

// Open opens the data directory at urlOrPath: a plain path or file:///path
// (Local), or s3://BUCKET/PREFIX?endpoint=URL&region=R, gs://BUCKET/PREFIX,
// azblob://CONTAINER/PREFIX (Bucket). With an endpoint, S3 uses path-style
// addressing (and plain HTTP when the endpoint says http://).
func Open(ctx context.Context, urlOrPath string) (Store, error) {
	if !strings.Contains(urlOrPath, "://") {
		if urlOrPath == "" {
			return nil, errors.New("data directory: empty path")
		}
		return NewLocal(urlOrPath), nil
	}
	u, err := url.Parse(urlOrPath)
	if err != nil {
		// url.Error quotes the input, which may hold a secret: drop it.
		return nil, errors.New("data directory: not a valid URL")
	}
	if u.User != nil {
		return nil, fmt.Errorf("data directory %s://%s: credentials in the URL are refused; use the cloud's standard credential chain (environment, profile, workload identity)", u.Scheme, u.Host)
	}
	for k := range u.Query() {
		lk := strings.ToLower(k)
		for _, s := range secretParams {
			if strings.Contains(lk, s) {
				return nil, fmt.Errorf("data directory %s://%s: query parameter %q looks like a credential and is refused; use the cloud's standard credential chain", u.Scheme, u.Host, k)
			}
		}
	}
	if u.Scheme == "file" {
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("data directory file://%s: only local file URLs (file:///path)", u.Host)
		}
		if u.Path == "" {
			return nil, errors.New("data directory file://: empty path")
		}
		return NewLocal(u.Path), nil
	}
	if u.Host == "" {
		return nil, fmt.Errorf("data directory %s://: no bucket", u.Scheme)
	}
	prefix := strings.Trim(u.Path, "/")
	name := u.Scheme + "://" + u.Host
	if prefix != "" {
		name += "/" + prefix
	}
	q := url.Values{}
	switch u.Scheme {
	case "s3":
		for k, v := range u.Query() {
			switch k {
			case "endpoint", "region", "use_path_style", "disable_https", "fips", "dualstack":
				q[k] = v
			default:
				return nil, fmt.Errorf("data directory %s: unknown query parameter %q (known: endpoint, region)", name, k)
			}
		}
		if ep := q.Get("endpoint"); ep != "" {
			epu, err := url.Parse(ep)
			if err != nil || epu.Host == "" || epu.User != nil {
				return nil, fmt.Errorf("data directory %s: endpoint must be http(s)://host:port", name)
			}
			q.Set("use_path_style", "true")
			if epu.Scheme == "http" {
				q.Set("disable_https", "true")
			}
		}
	case "gs", "azblob":
		if len(u.Query()) > 0 {
			return nil, fmt.Errorf("data directory %s: query parameters are not supported for %s", name, u.Scheme)
		}
	default:
		return nil, fmt.Errorf("data directory %s: unknown scheme %q (s3, gs, azblob, file or a path)", name, u.Scheme)
	}
	bu := url.URL{Scheme: u.Scheme, Host: u.Host, RawQuery: q.Encode()}
	b, err := blob.OpenBucket(ctx, bu.String())
	if err != nil {
		return nil, fmt.Errorf("data directory %s: %w", name, err)
	}
	bs := &Bucket{name: name, bucket: u.Host}
	if prefix != "" {
		bs.prefix = prefix + "/"
		b = blob.PrefixedBucket(b, bs.prefix)
	}
	bs.b = b
	return bs, nil
}

// quietReads keeps the AWS SDK from logging to stderr on every read of an
// object uploaded in parts ("Skipped validation of multipart checksum": S3
// has no whole-object checksum for those; the archive checks its own
// SHA-256).
func quietReads() *blob.ReaderOptions {
	return &blob.ReaderOptions{BeforeRead: func(as func(any) bool) error {
		var opts *[]func(*s3.Options)
		if as(&opts) {
			*opts = append(*opts, func(o *s3.Options) { o.DisableLogOutputChecksumValidationSkipped = true })
		}
		return nil
	}}
}
