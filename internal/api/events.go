package api

import (
	"sync"

	"github.com/groundworkhq/groundwork/internal/job"
)

// Hub fans committed job changes out to the event streams watching them in this process.
// Streams also poll the store, so changes made by other replicas reach them too.
type Hub struct {
	mu   sync.Mutex
	subs map[string]map[chan *job.Job]struct{}
}

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{subs: map[string]map[chan *job.Job]struct{}{}} }

// Publish delivers j to its watchers without blocking: a slow watcher skips a change and
// catches up from the store.
func (h *Hub) Publish(j *job.Job) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs[j.ID] {
		select {
		case ch <- j:
		default:
		}
	}
}

func (h *Hub) subscribe(id string) (<-chan *job.Job, func()) {
	ch := make(chan *job.Job, 16)
	h.mu.Lock()
	if h.subs[id] == nil {
		h.subs[id] = map[chan *job.Job]struct{}{}
	}
	h.subs[id][ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs[id], ch)
		if len(h.subs[id]) == 0 {
			delete(h.subs, id)
		}
		h.mu.Unlock()
	}
}
