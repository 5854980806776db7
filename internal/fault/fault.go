// Package fault classifies errors once, where they are understood (a provider driver knows that
// AccessDenied needs the user and Throttling needs patience), so that the engine only reads the
// class and never guesses from strings.
package fault

import (
	"context"
	"errors"
	"fmt"

	"github.com/groundworkhq/groundwork/internal/job"
)

// Error is a classified error. Its Class steers the engine: transient is retried with backoff,
// user_action and system fail the job at once.
type Error struct {
	Class      job.FailureClass
	Code       string // a short machine-readable code, e.g. "AccessDenied"
	FixHint    string // what the user should do, for user_action
	ConsoleURL string // a deep link where the user can do it
	Err        error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return string(e.Class)
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Transient marks err as worth retrying.
func Transient(err error) error {
	return &Error{Class: job.ClassTransient, Err: err}
}

// Transientf is Transient(fmt.Errorf(...)).
func Transientf(format string, args ...any) error {
	return Transient(fmt.Errorf(format, args...))
}

// UserAction marks err as needing the user; code, hint and console link say what to do.
func UserAction(err error, code, fixHint, consoleURL string) error {
	return &Error{Class: job.ClassUserAction, Code: code, FixHint: fixHint, ConsoleURL: consoleURL, Err: err}
}

// System marks err as our fault or an unsupported API.
func System(err error) error {
	return &Error{Class: job.ClassSystem, Err: err}
}

// WithCode sets a code on a classified error and returns it (for chaining).
func (e *Error) WithCode(code string) *Error { e.Code = code; return e }

// As returns the classification of err. An unclassified error is system: if nobody understood
// it, retrying blindly could repeat damage. A cancelled or expired context is transient: the work
// was interrupted, not refused.
func As(err error) *Error {
	if err == nil {
		return nil
	}
	var fe *Error
	if errors.As(err, &fe) {
		return fe
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return &Error{Class: job.ClassTransient, Code: "Interrupted", Err: err}
	}
	return &Error{Class: job.ClassSystem, Err: err}
}

// ClassOf returns only the class of err.
func ClassOf(err error) job.FailureClass { return As(err).Class }
