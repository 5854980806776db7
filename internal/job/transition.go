package job

import "fmt"

// transitions is the only place that decides which status may follow which. The engine and the
// API both ask CanTransition before they write a status.
var transitions = map[Status][]Status{
	StatusDraft:  {StatusQueued, StatusCancelled},
	StatusQueued: {StatusRunning, StatusCancelled},
	// running → queued covers a wait result, a transient retry and a graceful hand-back;
	// running → cancelled and running → deleted end a teardown phase.
	StatusRunning: {StatusCompleted, StatusFailed, StatusQueued, StatusAwaitingUser, StatusCancelled, StatusDeleted},
	// failed → queued is a retry (it resumes at the failed step) or a teardown that must undo
	// the steps already done; failed → cancelled is a cancel with nothing to undo.
	StatusFailed:       {StatusQueued, StatusCancelled},
	StatusAwaitingUser: {StatusQueued, StatusCancelled},
	// completed → queued starts the teardown phase.
	StatusCompleted: {StatusQueued},
	StatusCancelled: nil,
	StatusDeleted:   nil,
}

// CanTransition reports whether a job in status from may move to status to.
func CanTransition(from, to Status) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// TransitionError says that a requested move is not allowed.
type TransitionError struct {
	From, To Status
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("a job that is %s cannot become %s", e.From, e.To)
}

// CheckTransition returns a *TransitionError when from → to is not allowed.
func CheckTransition(from, to Status) error {
	if CanTransition(from, to) {
		return nil
	}
	return &TransitionError{From: from, To: to}
}
