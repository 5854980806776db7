package gcp

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"google.golang.org/api/googleapi"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/provider"
)

// Ops are a step's long-running operations in flight (provider.Ops).
type Ops = provider.Ops

// opsOf reads the operations recorded under infra key.
func opsOf(j *job.Job, key string) Ops { return provider.OpsOf(j, key) }

// State is what a read says of a resource.
type State struct {
	Found bool
	// Ours says the resource carries the job's labels (or description): a resource of the
	// job's name that is not the job's is neither adopted nor deleted.
	Ours bool
	// Ready says it is usable (status RUNNING, READY, ACTIVE, or an API without a status).
	Ready bool
}

// Resource is one Google resource as a step converges or removes it, in the terms of its API.
type Resource struct {
	// Get reads it; a 404 is State{} and no error.
	Get func(ctx context.Context) (State, error)
	// Create starts making it and returns the operation to poll ("" when the API made it
	// before answering).
	Create func(ctx context.Context) (op string, err error)
	// Delete starts removing it, likewise.
	Delete func(ctx context.Context) (op string, err error)
	// Poll reads an operation once: done, and the operation's own error (failed) apart
	// from an error reading it (err).
	Poll func(ctx context.Context, op string) (done bool, failed, err error)
}

// converge moves one resource towards existing, one call at a time: it polls the operation
// recorded in ops under key if there is one, else reads the resource and starts a create when
// it is missing. It reports whether the resource is there and ready.
func (c *Client) converge(ctx context.Context, ops Ops, key string, r Resource) (bool, error) {
	if done, err := c.pollRecorded(ctx, ops, key, r); err != nil || !done {
		return false, err
	}
	st, err := r.Get(ctx)
	if err != nil {
		return false, c.Classify(err)
	}
	if st.Found && !st.Ours {
		return false, fault.UserAction(errNotOurs, "NameTaken",
			"A resource with this job's name exists without the job's groundwork-job label; delete or rename it, then retry.", "")
	}
	if st.Found {
		// Not ready: an operation this job started and lost the name of (a crash before
		// the checkpoint), or one Google runs by itself. Watch it rather than race it.
		return st.Ready, nil
	}
	op, err := r.Create(ctx)
	if conflict(err) {
		// Another create of the same name is under way (its operation was lost): the
		// resource shows up once it is done.
		return false, nil
	}
	if err != nil {
		return false, c.Classify(err)
	}
	if op == "" {
		return true, nil
	}
	ops[key] = op
	return false, nil
}

// remove deletes one resource, one call at a time; it reports whether it is gone. A resource
// of the job's name that is not the job's is nothing of the job's to delete.
func (c *Client) remove(ctx context.Context, ops Ops, key string, r Resource) (bool, error) {
	if done, err := c.pollRecorded(ctx, ops, key, r); err != nil || !done {
		return false, err
	}
	st, err := r.Get(ctx)
	if err != nil {
		return false, c.Classify(err)
	}
	if !st.Found || !st.Ours {
		return true, nil
	}
	op, err := r.Delete(ctx)
	if notFound(err) {
		return true, nil
	}
	if err != nil {
		return false, c.Classify(err)
	}
	if op == "" {
		return true, nil
	}
	ops[key] = op
	return false, nil
}

// pollRecorded polls the operation recorded under key, if any; done means there is none
// (left) to wait for.
func (c *Client) pollRecorded(ctx context.Context, ops Ops, key string, r Resource) (bool, error) {
	op := ops[key]
	if op == "" {
		return true, nil
	}
	done, failed, err := r.Poll(ctx, op)
	switch {
	case notFound(err):
		// An operation Google no longer keeps: read the resource instead.
		delete(ops, key)
		return true, nil
	case err != nil:
		return false, c.Classify(err)
	case !done:
		return false, nil
	}
	delete(ops, key)
	if failed != nil {
		return false, c.Classify(failed)
	}
	return true, nil
}

// rpcHTTP maps google.rpc.Code to the HTTP status Google's REST front end answers it with,
// so that an operation's error classifies as the same call's synchronous error would.
var rpcHTTP = map[int]int{
	3: http.StatusBadRequest, 5: http.StatusNotFound, 6: http.StatusConflict, 7: http.StatusForbidden,
	8: http.StatusTooManyRequests, 9: http.StatusBadRequest, 10: http.StatusConflict, 14: http.StatusServiceUnavailable,
	16: http.StatusUnauthorized, 13: http.StatusInternalServerError, 4: http.StatusGatewayTimeout,
}

// statusError is a long-running operation's google.rpc.Status as the error a call would
// have answered.
func statusError(code int64, message string, details []googleapi.RawMessage) error {
	e := &googleapi.Error{Code: rpcHTTP[int(code)], Message: message}
	if e.Code == 0 {
		e.Code = http.StatusInternalServerError
	}
	for _, d := range details {
		var v any
		if json.Unmarshal(d, &v) == nil {
			e.Details = append(e.Details, v)
		}
	}
	return e
}

// awaitFor bounds how long one driver call waits on an operation: below the two-minute lease
// of the families whose step makes its thing in a single call (registry, dns_zone).
const awaitFor = 90 * time.Second

// await runs step (converge or remove of one resource, sharing one Ops) until it reports
// done, for the families whose pipeline step has no wait: their driver call returns the
// finished thing or an error. An operation that outlasts awaitFor is a transient error; the
// engine calls again later and that call's read finds the resource under way and watches it.
func (c *Client) await(ctx context.Context, what string, step func() (bool, error)) error {
	return c.awaitWithin(ctx, what, awaitFor, step)
}

// awaitWithin is await with its own bound, for a step whose wait is longer than awaitFor
// (see createWait).
func (c *Client) awaitWithin(ctx context.Context, what string, bound time.Duration, step func() (bool, error)) error {
	deadline := time.Now().Add(bound)
	every := c.Poll
	if every <= 0 {
		every = 2 * time.Second
	}
	for {
		done, err := step()
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return fault.Transientf("%s is still under way in Google Cloud", what)
		}
		select {
		case <-ctx.Done():
			return fault.Transient(ctx.Err())
		case <-time.After(every):
		}
	}
}
