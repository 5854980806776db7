package azure

import (
	"context"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/provider"
)

// Ops are a step's long-running operations in flight (provider.Ops).
type Ops = provider.Ops

// opsOf reads the operations recorded under infra key.
func opsOf(j *job.Job, key string) Ops { return provider.OpsOf(j, key) }

// State is what a GET says of a resource: whether it is there and its provisioningState.
type State struct {
	Found bool
	// Provisioning is properties.provisioningState ("Succeeded", "Creating", "Failed").
	Provisioning string
}

func (s State) settled() bool {
	switch strings.ToLower(s.Provisioning) {
	case "", "succeeded":
		return true
	}
	return false
}

func (s State) failed() bool {
	switch strings.ToLower(s.Provisioning) {
	case "failed", "canceled":
		return true
	}
	return false
}

// Begin starts (resume == "") or resumes an operation as the SDK's poller.
type Begin[T any] func(ctx context.Context, resume string) (*runtime.Poller[T], error)

// converge moves one resource towards existing, one call at a time: it polls the operation
// recorded in ops under key if there is one, else reads the resource and starts a PUT when
// it is missing (or failed). It reports whether the resource is there and settled. want,
// when set, says whether an existing resource already matches the request; a PUT is sent
// again when it does not (Azure's PUT is the update).
func converge[T any](ctx context.Context, c *Client, ops Ops, key string, get func(ctx context.Context) (State, error), want func() bool, begin Begin[T]) (bool, error) {
	if tok := ops[key]; tok != "" {
		return poll(ctx, c, ops, key, tok, begin)
	}
	st, err := get(ctx)
	if err != nil {
		return false, c.Classify(err)
	}
	if st.Found && !st.settled() && !st.failed() {
		// An operation this job started and lost the token of (a crash before the
		// checkpoint), or one Azure runs by itself: watch it rather than race it.
		return false, nil
	}
	if st.Found && st.settled() && (want == nil || want()) {
		return true, nil
	}
	p, err := begin(ctx, "")
	if err != nil {
		return false, c.Classify(err)
	}
	return settle(ctx, c, ops, key, p)
}

// startOrPoll polls the operation recorded in ops under key, or starts one: for a change
// whose caller has already decided, from a GET, that it must be sent. It reports whether the
// operation is done.
func startOrPoll[T any](ctx context.Context, c *Client, ops Ops, key string, begin Begin[T]) (bool, error) {
	if tok := ops[key]; tok != "" {
		return poll(ctx, c, ops, key, tok, begin)
	}
	p, err := begin(ctx, "")
	if err != nil {
		return false, c.Classify(err)
	}
	return settle(ctx, c, ops, key, p)
}

// remove deletes one resource, one call at a time; it reports whether it is gone.
func remove[T any](ctx context.Context, c *Client, ops Ops, key string, get func(ctx context.Context) (State, error), begin Begin[T]) (bool, error) {
	if tok := ops[key]; tok != "" {
		return poll(ctx, c, ops, key, tok, begin)
	}
	st, err := get(ctx)
	if err != nil {
		return false, c.Classify(err)
	}
	if !st.Found {
		return true, nil
	}
	if strings.EqualFold(st.Provisioning, "deleting") {
		return false, nil
	}
	p, err := begin(ctx, "")
	if err != nil {
		if notFound(err) {
			return true, nil
		}
		return false, c.Classify(err)
	}
	return settle(ctx, c, ops, key, p)
}

func poll[T any](ctx context.Context, c *Client, ops Ops, key, tok string, begin Begin[T]) (bool, error) {
	p, err := begin(ctx, tok)
	if err != nil {
		delete(ops, key) // a token this SDK cannot read: start over from a GET next time
		return false, c.Classify(err)
	}
	if _, err := p.Poll(ctx); err != nil {
		if notFound(err) {
			delete(ops, key)
			return false, nil
		}
		return false, c.Classify(err)
	}
	return settle(ctx, c, ops, key, p)
}

// settle records a running operation's token, or finishes a done one.
func settle[T any](ctx context.Context, c *Client, ops Ops, key string, p *runtime.Poller[T]) (bool, error) {
	if !p.Done() {
		tok, err := p.ResumeToken()
		if err != nil {
			return false, c.Classify(err)
		}
		ops[key] = tok
		return false, nil
	}
	delete(ops, key)
	if _, err := p.Result(ctx); err != nil {
		return false, c.Classify(err)
	}
	return true, nil
}

// awaitFor bounds how long one driver call waits on an operation: below the two-minute lease
// of the families whose step makes its thing in a single call (registry, dns_zone).
const awaitFor = 90 * time.Second

// await runs step (converge or remove of one resource, sharing one Ops) until it reports
// done, for the families whose pipeline step has no wait: their driver call returns the
// finished thing or an error. An operation that outlasts awaitFor is a transient error; the
// engine calls again later and that call's GET finds the operation under way and watches it.
func (c *Client) await(ctx context.Context, what string, step func() (bool, error)) error {
	deadline := time.Now().Add(awaitFor)
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
			return fault.Transientf("%s is still under way in Azure", what)
		}
		select {
		case <-ctx.Done():
			return fault.Transient(ctx.Err())
		case <-time.After(every):
		}
	}
}
