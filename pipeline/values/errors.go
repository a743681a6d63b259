package values

import (
	"errors"
	"fmt"

	"github.com/optlake/optlake/internal/jsontok"
)

// ErrBadInput is the sentinel of every error that is the body's fault (not
// JSON, or valid JSON of a shape that cannot be made into rows) rather than
// a read, store or contract failure: errors.Is(err, ErrBadInput).
var ErrBadInput = errors.New("bad input")

// ShapeError is a body that is valid JSON but not of a shape the decoder can
// make into rows. Its message is "[Pkg: ][table Table: ]Msg".
type ShapeError struct {
	Pkg   string // the decoder's package, "" to leave it out
	Table string // the table being decoded, "" when not known
	Msg   string
}

func (e *ShapeError) Error() string {
	s := e.Msg
	if e.Table != "" {
		s = fmt.Sprintf("table %s: %s", e.Table, s)
	}
	if e.Pkg != "" {
		s = e.Pkg + ": " + s
	}
	return s
}

// Is makes a ShapeError an ErrBadInput.
func (e *ShapeError) Is(target error) bool { return target == ErrBadInput }

// BadInput marks err as the body's fault when it is a JSON syntax error
// (*jsontok.SyntaxError); other errors are returned as they are. The
// message does not change.
func BadInput(err error) error {
	var syn *jsontok.SyntaxError
	if errors.As(err, &syn) && !errors.Is(err, ErrBadInput) {
		return badInput{err}
	}
	return err
}

type badInput struct{ error }

func (e badInput) Unwrap() error        { return e.error }
func (e badInput) Is(target error) bool { return target == ErrBadInput }
