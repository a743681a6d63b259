package pipeline

import (
	"errors"
	"fmt"

	"github.com/optlake/optlake/internal/settings"
	"github.com/optlake/optlake/pipeline/extract/paginate"
	"github.com/optlake/optlake/pipeline/transform"
)

// DefaultMaxRejectShare is Config.MaxRejectShare when it is not set: a
// listing whose rejects are more than a tenth of its rows fails.
const DefaultMaxRejectShare = settings.DefaultMaxRejectShare

// DefaultMaxWalks is Config.MaxWalks when it is not set: the walks of a
// paginated request whose listing shifted under it, the first included.
const DefaultMaxWalks = 3

// RejectsError is a listing or an account endpoint's body with too many
// rejects: every row (All), or more than the share allowed
// (Config.MaxRejectShare). Nothing of it is loaded; its bodies are
// archived.
type RejectsError struct {
	Rows, Rejects int64
	Max           float64 // the share allowed
	All           bool
	Reason        string // the reason most rejects gave
	ReasonRows    int64  // how many gave it
}

func (e *RejectsError) Error() string {
	if e.All {
		return fmt.Sprintf("every row rejected (%d), %d with: %s", e.Rejects, e.ReasonRows, e.Reason)
	}
	return fmt.Sprintf("%d of %d rows rejected (%.1f%%, more than the %g allowed by --max-reject-share), %d with: %s",
		e.Rejects, e.Rows+e.Rejects, 100*float64(e.Rejects)/float64(e.Rows+e.Rejects), e.Max, e.ReasonRows, e.Reason)
}

// ShiftedError is a walk of offsets or page numbers that received the same
// instrument twice: the listing moved under it (an instrument listed or
// delisted between two page requests), so a row may be missing as well.
type ShiftedError struct{ Duplicates int64 }

func (e *ShiftedError) Error() string {
	return fmt.Sprintf("listing shifted between page requests: %d instrument(s) received twice", e.Duplicates)
}

// WalksError is a paginated request whose every walk was incomplete or
// shifted; Err is the last walk's.
type WalksError struct {
	Walks int
	Err   error
}

func (e *WalksError) Error() string {
	return fmt.Sprintf("%v (after %d walks of the pages)", e.Err, e.Walks)
}
func (e *WalksError) Unwrap() error { return e.Err }

// incomplete reports an error that makes a snapshot's endpoint incomplete:
// fetched and archived, but not loaded (exit 3, nothing pending).
func incomplete(err error) bool {
	var inc *paginate.IncompleteError
	var sh *ShiftedError
	var rj *RejectsError
	return errors.As(err, &inc) || errors.As(err, &sh) || errors.As(err, &rj)
}

// shifted reports an error after which a walk is fetched again.
func shifted(err error) bool {
	var inc *paginate.IncompleteError
	var sh *ShiftedError
	return errors.As(err, &inc) || errors.As(err, &sh)
}

// listingCheck returns the check of a call's decoded listing, run before
// any sink commits it: a walk of offsets or page numbers that received an
// instrument twice shifted; too many rejects fail the listing.
func (r *Runner) listingCheck(c call) func(transform.Stats) error {
	kind := ""
	switch {
	case c.rq.archived != nil:
		kind = c.rq.archived[0].Pagination
	case c.ep.Pagination != nil:
		kind = c.ep.Pagination.Type
	}
	walked := kind != "" && !paginate.New(paginate.Spec{Type: kind}, nil).Exact()
	return func(st transform.Stats) error {
		if walked && st.Duplicates > st.Repeated { // within the walk
			return &ShiftedError{Duplicates: st.Duplicates - st.Repeated}
		}
		return r.rejectCheck(st.Rows, st.Rejects, st.TopReason, st.TopRejects)
	}
}

// rejectCheck fails a body (a listing, an account endpoint's) whose rows
// were all rejected, or more than Config.MaxRejectShare of them, naming
// the reason most rejects gave (reasonRows of them).
func (r *Runner) rejectCheck(rows, rejects int64, reason string, reasonRows int64) error {
	if rejects == 0 {
		return nil
	}
	maxShare := r.cfg.MaxRejectShare
	if maxShare <= 0 {
		maxShare = DefaultMaxRejectShare
	}
	e := &RejectsError{Rows: rows, Rejects: rejects, Max: maxShare, All: rows == 0, Reason: reason, ReasonRows: reasonRows}
	if e.All || float64(rejects) > maxShare*float64(rows+rejects) {
		return e
	}
	return nil
}
