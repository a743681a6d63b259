package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"time"

	"github.com/optlake/optlake/pipeline/extract"
	"github.com/optlake/optlake/pipeline/extract/envelope"
	"github.com/optlake/optlake/pipeline/extract/paginate"
	"github.com/optlake/optlake/pipeline/fieldmap"
	"github.com/optlake/optlake/schema"
)

// pagedRequest fetches the pages of one request of an enveloped endpoint
// (records at a path, pagination, error bodies) and decodes them as one
// stream while they arrive: each page's records are appended to a JSON
// array the decoder reads through a pipe, so the sinks see one body of
// every page's rows (row_index numbered across pages) and commit once,
// after the last page. A page that fails fails the whole request before
// anything is committed: a snapshot is all of its pages or nothing.
//
// Each page is received whole (into the raw archive and a scratch file)
// before its records are handed on, so a page cut off or answered with a
// retryable venue error is fetched again without a row of it decoded.
//
// A walk of offsets or page numbers that came out short of the venue's
// total, or received an instrument twice (the listing shifted under it),
// is walked again from the first page, up to Config.MaxWalks walks in all;
// each walk's bodies are archived with attempts after the previous walk's,
// and replay and catch-up read the last walk.
func (r *Runner) pagedRequest(ctx context.Context, c call) error {
	if c.rq.archived != nil || c.ep.Pagination == nil {
		_, err := r.pagedWalk(ctx, c)
		return err
	}
	walks := r.cfg.MaxWalks
	if walks <= 0 {
		walks = DefaultMaxWalks
	}
	for c.walk = 1; ; c.walk++ {
		attempts, err := r.pagedWalk(ctx, c)
		if err == nil || !shifted(err) || ctx.Err() != nil {
			return err
		}
		if c.walk >= walks {
			return &WalksError{Walks: c.walk, Err: err}
		}
		c.log.Warn("walking the pages again", "endpoint", c.ep.Name, "request", c.rq.index, "walk", c.walk, "err", err)
		c.attempts = attempts
		if c.rq.of <= 1 {
			c.ev.restart()
		}
	}
}

// pagedWalk fetches and decodes the pages of a request once (one walk)
// and returns the highest attempt number it archived.
func (r *Runner) pagedWalk(ctx context.Context, c call) (int, error) {
	pr, pw := io.Pipe()
	stream := envelope.NewStream(pw, c.ep.Kind == KindInstruments)
	c.staged = c.ep.Pagination != nil && c.rq.archived == nil || len(c.rq.archived) > 0 && c.rq.archived[0].Page > 0
	type decoded struct {
		outs map[string]SinkResult
		err  error
	}
	done := make(chan decoded, 1)
	go func() {
		outs, err := r.load(ctx, c, pr)
		pr.CloseWithError(errDecoderDone)
		done <- decoded{outs, err}
	}()
	st, ferr := r.fetchPages(ctx, c, stream)
	if ferr == nil {
		ferr = stream.Close()
	}
	if ferr != nil {
		pw.CloseWithError(ferr)
	} else {
		pw.Close()
	}
	d := <-done
	c.res.Raw = append(c.res.Raw, st.raw...)
	c.res.Bytes += st.bytes
	c.res.stage(StageArchive, time.Now().Add(-st.archive))
	switch {
	case ferr != nil && !errors.Is(ferr, io.ErrClosedPipe) && !errors.Is(ferr, errDecoderDone):
		return st.attempts, ferr
	case d.err != nil:
		return st.attempts, d.err
	case ferr != nil:
		return st.attempts, ferr
	}
	c.res.merge(d.outs)
	return st.attempts, nil
}

// errDecoderDone is what a page's writer sees once the decoder stopped
// reading (it failed; its error is the one reported).
var errDecoderDone = errors.New("decoder stopped")

// pageStats is what fetchPages did, merged into the endpoint's result
// after the decoder finished (they run on two goroutines).
type pageStats struct {
	raw     []string
	bytes   int64
	archive time.Duration
	// records are the rows the pages held; attempts the highest attempt
	// number archived.
	records, attempts int
}

// PageLimitError is an endpoint that has more pages than max_pages.
type PageLimitError struct{ Max int }

func (e *PageLimitError) Error() string {
	return fmt.Sprintf("more than max_pages (%d) pages: not loading a truncated snapshot", e.Max)
}

// fetchPages fetches the call's pages in order, writing their records to
// stream: live, as the paginator says; in a replay, the archived pages.
func (r *Runner) fetchPages(ctx context.Context, c call, stream *envelope.Stream) (pageStats, error) {
	w := &pageWalk{c: c, stream: stream}
	st, spec := &w.st, &w.spec
	*spec = envelope.Spec{Records: c.ep.Records, Instruments: c.ep.Kind == KindInstruments, Errors: c.ep.Errors, Shape: c.ep.Shape}
	fields := c.ep.Fields
	if c.rq.archived != nil {
		spec.Records, spec.Errors, spec.Shape, fields = c.rq.archived[0].Records, nil, envelope.Shape{}, c.rq.archived[0].Fields
		if s := c.rq.archived[0].Shape; s != nil {
			spec.Shape = *s
		}
	}
	if len(fields) > 0 {
		mp, err := fieldmap.New(fields, schema.Instruments)
		if err != nil {
			return *st, fmt.Errorf("fields: %w", err)
		}
		spec.Rewrite = mp.Apply
	}
	if c.rq.archived != nil {
		paged := c.rq.archived[0].Page > 0
		for i, m := range c.rq.archived {
			if paged && m.Page != i+1 {
				return *st, fmt.Errorf("%w: %w: page %d is not archived (the run failed there)", errArchive, errNeverLoaded, i+1)
			}
			req := c.extractRequest(c.rq.params)
			req.Page = m.Page
			if _, err := r.fetchPage(ctx, w, req); err != nil {
				return *st, err
			}
		}
		if last := c.rq.archived[len(c.rq.archived)-1]; paged && !last.LastPage {
			return *st, fmt.Errorf("%w: %w: pages after page %d are not archived (the run failed there)", errArchive, errNeverLoaded, last.Page)
		}
		return *st, nil
	}
	next := &paginate.Request{Params: c.rq.params}
	limit := 1
	if c.ep.Pagination != nil {
		w.pag = paginate.New(*c.ep.Pagination, c.rq.params)
		first := w.pag.First()
		next, limit = &first, w.pag.MaxPages()
		spec.Capture = w.pag.Paths()
		spec.Last = w.pag.RecordPaths()
	}
	for page := 1; next != nil; page++ {
		if page > limit {
			return *st, &PageLimitError{Max: limit}
		}
		req := c.extractRequest(next.Params)
		req.URL = next.URL
		if w.pag != nil {
			req.Page = page
		}
		var err error
		if next, err = r.fetchPage(ctx, w, req); err != nil {
			return *st, err
		}
	}
	return *st, nil
}

// pageWalk is one walk of a call's pages, as fetchPage takes them.
type pageWalk struct {
	c      call
	pag    *paginate.Paginator // nil: not paginated, or read back from the archive
	spec   envelope.Spec
	stream *envelope.Stream // the decoder's input
	st     pageStats
}

// fetchPage fetches one page (retried as the client decides), archives it,
// and writes its records to stream once it was received whole and is not
// an error body. It returns the next page's request (nil: none).
func (r *Runner) fetchPage(ctx context.Context, w *pageWalk, req extract.Request) (*paginate.Request, error) {
	c, st := w.c, &w.st
	var next *paginate.Request
	err := c.sr.fetch.Do(ctx, req, r.onFailedPage(ctx, c, req.Page, st), func(_ context.Context, resp *extract.Response) error {
		m := c.meta()
		m.Attempt, m.URL, m.FetchTime, m.Page, m.Walk = c.attempts+resp.Attempt, resp.URL, time.Now().UTC(), req.Page, c.walk
		st.attempts = max(st.attempts, m.Attempt)
		m.Envelope, m.Records = true, w.spec.Records
		if w.spec.Shape.Shaped() {
			m.Shape = &w.spec.Shape
		}
		m.Fields = c.ep.Fields
		if c.rq.archived != nil {
			m.Fields = c.rq.archived[0].Fields
		}
		if c.ep.Pagination != nil {
			m.Pagination = c.ep.Pagination.Type
		}
		var entry archiveEntry = &countingEntry{}
		if c.sr.live() {
			e, err := c.sr.archive.Create(ctx, m)
			if err != nil {
				return err
			}
			entry = e
		}
		scratch, err := os.CreateTemp(r.cfg.Scratch, "optlake-page-*")
		if err != nil {
			entry.Finish(resp.Status, resp.ContentType, false, "scratch file: "+err.Error())
			return fmt.Errorf("page scratch file: %w", err)
		}
		defer os.Remove(scratch.Name())
		defer scratch.Close()
		_, rerr := io.Copy(io.MultiWriter(entry, scratch), resp.Body)
		if rerr == nil {
			_, rerr = scratch.Seek(0, io.SeekStart)
		}
		var res envelope.Result
		var serr error
		if rerr == nil {
			// The file itself (a ReadSeeker): an error body is judged
			// before any of its rows is written.
			res, serr = envelope.Splice(scratch, w.stream, w.spec)
		}
		if rerr == nil && serr == nil && w.pag != nil {
			u, _ := url.Parse(resp.URL)
			st.records += res.Records
			next, serr = w.pag.Next(paginate.Answer{Values: res.Values, Last: res.Last, Header: resp.Header, URL: u, Records: res.Records})
			if serr == nil && next == nil {
				// The last page: the walk must have the venue's total
				// (else the page is archived without last_page, and the
				// walk is never loaded).
				serr = w.pag.Done(st.records)
			}
		}
		var ve *envelope.VenueError
		isVenue := errors.As(serr, &ve)
		msg := ""
		switch {
		case rerr != nil:
			msg = r.cfg.Redactor.String(oneLine(rerr))
		case serr != nil:
			msg = r.cfg.Redactor.String(oneLine(serr))
		}
		entry.MarkPage(w.pag != nil && rerr == nil && serr == nil && next == nil, isVenue)
		finishing := time.Now()
		meta, aerr := entry.Finish(resp.Status, resp.ContentType, rerr == nil, msg)
		st.archive += time.Since(finishing)
		if aerr == nil && meta.File != "" {
			st.raw = append(st.raw, meta.File)
			r.step(StepArchived)
		}
		st.bytes += entry.Bytes()
		switch {
		case rerr != nil:
			return rerr
		case serr != nil:
			return serr
		}
		return aerr
	})
	if err != nil && req.Page > 0 {
		err = fmt.Errorf("page %d: %w", req.Page, err)
	}
	return next, err
}

// onFailedPage archives a non-2xx answer of a page.
func (r *Runner) onFailedPage(ctx context.Context, c call, page int, st *pageStats) extract.Hooks {
	// The endpoint's result belongs to the decoder's goroutine until the
	// pages are done: collect the files here.
	res := EndpointResult{}
	cc := c
	cc.res = &res
	h := r.onFailed(ctx, cc, page)
	return extract.Hooks{OnFailed: func(f extract.Failed) {
		h.OnFailed(f)
		st.attempts = max(st.attempts, c.attempts+f.Attempt)
		st.raw = append(st.raw, res.Raw...)
		res.Raw = nil
	}}
}
