package engine

import (
	"container/heap"
	"sync"
	"time"
)

// timers remembers when the jobs this replica released to wait fall due, so that the claim
// loop wakes when the first one does instead of at the next poll: a poll interval would add up
// to its whole length to every wait. Jobs released by other replicas are still found by the
// poll (or their wake-ups). Only the earliest time matters, and times are never removed
// early: a wake-up for a job that was cancelled meanwhile costs one claim query that finds
// nothing.
type timers struct {
	mu      sync.Mutex
	h       timeHeap
	changed chan struct{} // told when a new earliest time arrives
}

func newTimers() *timers { return &timers{changed: make(chan struct{}, 1)} }

// maxTimers bounds the remembered times; past it the poll covers the rest.
const maxTimers = 1 << 20

func (t *timers) add(at time.Time) {
	t.mu.Lock()
	if len(t.h) >= maxTimers {
		t.mu.Unlock()
		return
	}
	earliest := len(t.h) == 0 || at.Before(t.h[0])
	heap.Push(&t.h, at)
	t.mu.Unlock()
	if earliest {
		select {
		case t.changed <- struct{}{}:
		default:
		}
	}
}

// next drops the times that have passed by now and returns the earliest one left (zero if
// none).
func (t *timers) next(now time.Time) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.h) > 0 && !t.h[0].After(now) {
		heap.Pop(&t.h)
	}
	if len(t.h) == 0 {
		return time.Time{}
	}
	return t.h[0]
}

type timeHeap []time.Time

func (h timeHeap) Len() int           { return len(h) }
func (h timeHeap) Less(i, k int) bool { return h[i].Before(h[k]) }
func (h timeHeap) Swap(i, k int)      { h[i], h[k] = h[k], h[i] }
func (h *timeHeap) Push(x any)        { *h = append(*h, x.(time.Time)) }
func (h *timeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
