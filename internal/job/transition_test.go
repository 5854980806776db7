package job

import (
	"errors"
	"testing"
)

func TestTransitionTable(t *testing.T) {
	t.Parallel()
	allowed := map[[2]Status]bool{
		{StatusDraft, StatusQueued}:           true,
		{StatusDraft, StatusCancelled}:        true,
		{StatusQueued, StatusRunning}:         true,
		{StatusQueued, StatusCancelled}:       true,
		{StatusRunning, StatusCompleted}:      true,
		{StatusRunning, StatusFailed}:         true,
		{StatusRunning, StatusQueued}:         true,
		{StatusRunning, StatusAwaitingUser}:   true,
		{StatusRunning, StatusCancelled}:      true,
		{StatusRunning, StatusDeleted}:        true,
		{StatusFailed, StatusQueued}:          true,
		{StatusFailed, StatusCancelled}:       true,
		{StatusAwaitingUser, StatusQueued}:    true,
		{StatusAwaitingUser, StatusCancelled}: true,
		{StatusCompleted, StatusQueued}:       true,
	}
	// Every ordered pair of statuses, allowed or not, is checked.
	for _, from := range Statuses {
		for _, to := range Statuses {
			from, to := from, to
			want := allowed[[2]Status{from, to}]
			t.Run(string(from)+"->"+string(to), func(t *testing.T) {
				t.Parallel()
				if got := CanTransition(from, to); got != want {
					t.Fatalf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
				}
				err := CheckTransition(from, to)
				var te *TransitionError
				if want && err != nil {
					t.Fatalf("CheckTransition(%s, %s) = %v, want nil", from, to, err)
				}
				if !want && !errors.As(err, &te) {
					t.Fatalf("CheckTransition(%s, %s) = %v, want *TransitionError", from, to, err)
				}
			})
		}
	}
}

func TestTerminalStatusesHaveNoExit(t *testing.T) {
	t.Parallel()
	for _, s := range Statuses {
		if !s.Terminal() {
			continue
		}
		for _, to := range Statuses {
			if CanTransition(s, to) {
				t.Errorf("terminal status %s may move to %s", s, to)
			}
		}
	}
	if !StatusCancelled.Terminal() || !StatusDeleted.Terminal() || StatusFailed.Terminal() {
		t.Fatal("terminal set is wrong")
	}
}
