package api

import (
	"context"
	"sync"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/store"
)

// jobReader is what the change feed reads.
type jobReader interface {
	GetJob(ctx context.Context, p *store.GetJobParams) (*job.Job, error)
}

// Hub fans committed job changes out to the event streams watching them in this process. It
// holds the process's one change feed: changes committed here arrive by Publish, and once per
// Poll the feed reads each watched job once (however many streams watch it), so that changes
// committed by other replicas arrive too. Streams never query the store themselves.
type Hub struct {
	mu       sync.Mutex
	watches  map[string]*watch // by job id
	reader   jobReader
	feedRuns bool
	// open counts the event streams each holder (a token) has open; MaxStreams caps it.
	open       map[string]int
	MaxStreams int
	// Keepalive is how often a stream writes a comment and checks its token again
	// (streamKeepalive when 0); Poll is the feed's period (streamPoll when 0).
	Keepalive time.Duration
	Poll      time.Duration
}

type watch struct {
	orgID   string
	version int64
	subs    map[chan *job.Job]struct{}
}

// NewHub returns an empty hub that allows maxStreamsPerUser streams per token.
func NewHub() *Hub {
	return &Hub{watches: map[string]*watch{}, open: map[string]int{}, MaxStreams: maxStreamsPerUser}
}

// useStore gives the feed its reader (the server's store), unless it has one.
func (h *Hub) useStore(r jobReader) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.reader == nil && r != nil {
		h.reader = r
	}
}

func (h *Hub) streamCap() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.MaxStreams
}

// openStream counts one more stream for holder, or refuses when it has its cap open.
func (h *Hub) openStream(holder string) (release func(), ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.MaxStreams > 0 && h.open[holder] >= h.MaxStreams {
		return nil, false
	}
	h.open[holder]++
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.open[holder]--; h.open[holder] <= 0 {
			delete(h.open, holder)
		}
	}, true
}

// Publish delivers j to its watchers without blocking: a slow watcher skips a change and
// gets the next one (each event carries the whole job, so nothing is lost but a step).
func (h *Hub) Publish(j *job.Job) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.watches[j.ID]
	if w == nil || j.Version <= w.version {
		return
	}
	w.version = j.Version
	for ch := range w.subs {
		select {
		case ch <- j:
		default:
		}
	}
}

// subscribe watches job id (of orgID) from version on, starting the feed if it is not running.
func (h *Hub) subscribe(orgID, id string, version int64) (<-chan *job.Job, func()) {
	ch := make(chan *job.Job, 16)
	h.mu.Lock()
	w := h.watches[id]
	if w == nil {
		w = &watch{orgID: orgID, version: version, subs: map[chan *job.Job]struct{}{}}
		h.watches[id] = w
	}
	w.subs[ch] = struct{}{}
	if !h.feedRuns && h.reader != nil {
		h.feedRuns = true
		go h.feed()
	}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(w.subs, ch)
		if len(w.subs) == 0 && h.watches[id] == w {
			delete(h.watches, id)
		}
		h.mu.Unlock()
	}
}

// feed reads every watched job once per period and publishes what changed. It stops when
// nothing is watched, and subscribe starts it again.
func (h *Hub) feed() {
	every := h.Poll
	if every <= 0 {
		every = streamPoll
	}
	t := time.NewTicker(every)
	defer t.Stop()
	type target struct{ org, id string }
	for range t.C {
		h.mu.Lock()
		if len(h.watches) == 0 {
			h.feedRuns = false
			h.mu.Unlock()
			return
		}
		targets := make([]target, 0, len(h.watches))
		for id, w := range h.watches {
			targets = append(targets, target{w.orgID, id})
		}
		reader := h.reader
		h.mu.Unlock()
		for _, tg := range targets {
			ctx, cancel := context.WithTimeout(context.Background(), every)
			j, err := reader.GetJob(ctx, &store.GetJobParams{OrgID: tg.org, ID: tg.id})
			cancel()
			if err == nil {
				h.Publish(j)
			}
		}
	}
}
