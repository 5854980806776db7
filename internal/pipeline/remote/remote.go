// Package remote runs a job whose (category, type) pair is held by a remote provisioner: the
// steps call it over the provisioner protocol (plan, apply, poll the operation, inspect), and
// the engine gives them what every job gets: leases, retries of transient failures, failure
// classes. Nothing here sleeps: a step waiting on the remote returns pipeline.Wait.
package remote

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/netguard"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/protocol"
)

// Holders finds the provisioner holding a pair; *protocol.Registry satisfies it.
type Holders interface {
	Lookup(ctx context.Context, orgID string, pair catalog.Pair) (protocol.Provisioner, error)
}

// Options configure the remote pipelines.
type Options struct {
	Holders Holders
	// Catalog, when set, validates job configs against the pair's settings schema.
	Catalog *catalog.Catalog
	// PollInterval is how long a step waits before asking about an operation again (5s).
	PollInterval time.Duration
	// CallTimeout bounds one protocol call (30s).
	CallTimeout time.Duration
	// LeaseTTL exceeds one step: one protocol call (2m).
	LeaseTTL time.Duration
	// Outbound is the address policy every call to a provisioner dials through.
	Outbound *netguard.Policy
}

func (o Options) withDefaults() Options {
	if o.PollInterval <= 0 {
		o.PollInterval = 5 * time.Second
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 30 * time.Second
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 2 * time.Minute
	}
	return o
}

// Pipeline is the pipeline of one remotely held pair. Its family is the pair spelled
// "category/type", the family a job for that pair is submitted with.
type Pipeline struct {
	pair catalog.Pair
	opts Options
}

var _ pipeline.Pipeline = (*Pipeline)(nil)

// New returns the pipeline for pair.
func New(pair catalog.Pair, opts Options) *Pipeline {
	return &Pipeline{pair: pair, opts: opts.withDefaults()}
}

// For returns the remote pipeline for a job family naming a pair ("category/type"), or false.
// The engine asks it for families its static pipeline registry does not hold.
func For(family job.Family, opts Options) (*Pipeline, bool) {
	if !strings.Contains(string(family), "/") {
		return nil, false
	}
	p, err := catalog.ParsePair(string(family))
	if err != nil {
		return nil, false
	}
	return New(p, opts), true
}

func (p *Pipeline) Family() job.Family      { return job.Family(p.pair.String()) }
func (p *Pipeline) LeaseTTL() time.Duration { return p.opts.LeaseTTL }

// Validate checks the config against the catalog and that a remote provisioner holds the pair.
func (p *Pipeline) Validate(ctx context.Context, j *job.Job) error {
	if p.opts.Catalog != nil {
		if _, err := p.opts.Catalog.Validate(p.pair, j.Config); err != nil {
			return err
		}
	}
	_, err := p.holder(ctx, j.OrgID)
	return err
}

// Infra keys written by the steps.
const (
	KeyProvisioner     = "remoteProvisioner"     // {id, name, url} of the holder at plan time
	KeyPlan            = "remotePlan"            // the plan's changes
	KeyOperation       = "remoteOperation"       // the apply's operation id, while there is one
	KeyOutputs         = "remoteOutputs"         // what the provisioner reported
	KeyResources       = "remoteResources"       // the resources as inspected at the end
	KeyDrift           = "remoteDrift"           // drift seen at the end (normally empty)
	KeyDeleteOperation = "remoteDeleteOperation" // the teardown's operation id
)

// Steps are plan → apply → await → finalize. Only apply has an Undo: an apply with ensure
// absent, waited on until final.
func (p *Pipeline) Steps(*job.Job) []pipeline.Step {
	return []pipeline.Step{
		{Name: "plan", Do: p.plan},
		{Name: "apply", Do: p.apply, Undo: p.remove},
		{Name: "await", Do: p.await},
		{Name: "finalize", Do: p.finalize},
	}
}

// holder is the provisioner of the job's own organisation that holds the pair: another
// organisation's registration never receives this job's settings.
func (p *Pipeline) holder(ctx context.Context, orgID string) (protocol.Provisioner, error) {
	if p.opts.Holders == nil {
		return protocol.Provisioner{}, fault.System(errors.New("remote pipeline has no provisioner registry"))
	}
	h, err := p.opts.Holders.Lookup(ctx, orgID, p.pair)
	if errors.Is(err, protocol.ErrProvisionerNotFound) {
		return protocol.Provisioner{}, fault.UserAction(fmt.Errorf("no provisioner holds %s", p.pair),
			"NoProvisioner", fmt.Sprintf("register a provisioner for %s (groundwork provisioners register)", p.pair), "")
	}
	if err != nil {
		return protocol.Provisioner{}, fault.Transient(err)
	}
	if h.BuiltIn || h.URL == "" {
		return protocol.Provisioner{}, fault.System(fmt.Errorf("%s is held by the built-in provisioner, not a remote one", p.pair))
	}
	return h, nil
}

func (p *Pipeline) client(ctx context.Context, j *job.Job) (*protocol.Client, protocol.Provisioner, error) {
	h, err := p.holder(ctx, j.OrgID)
	if err != nil {
		return nil, h, err
	}
	c, err := protocol.NewClient(h.URL, protocol.ClientOptions{Timeout: p.opts.CallTimeout, Outbound: p.opts.Outbound})
	if err != nil {
		return nil, h, fault.System(err)
	}
	return c, h, nil
}

// Application names the job's resources at the provisioner: the job's name, or its id in
// lower case (provisioners may use it in resource names, which are often lower-case only).
func Application(j *job.Job) string {
	if j.Name != "" {
		return j.Name
	}
	return strings.ToLower(j.ID)
}

func (p *Pipeline) request(j *job.Job, ensure protocol.Ensure, requestID string) *protocol.Request {
	return &protocol.Request{
		Kind: p.pair.Kind, Type: p.pair.Type, Application: Application(j),
		RequestID: requestID, Ensure: ensure, Settings: j.Config,
	}
}

func (p *Pipeline) plan(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	c, h, err := p.client(ctx, r.Job)
	if err != nil {
		return pipeline.Result{}, err
	}
	ans, err := c.Plan(ctx, p.request(r.Job, protocol.EnsurePresent, ""))
	if err != nil {
		return pipeline.Result{}, err
	}
	return pipeline.Done(map[string]any{
		KeyProvisioner: map[string]string{"id": h.ID, "name": h.Name, "url": h.URL},
		KeyPlan:        ans.Changes,
	}), nil
}

// apply submits the work. The request id is derived from the job, so a re-run after a crash
// gets the same operation back instead of starting the work twice.
func (p *Pipeline) apply(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	c, _, err := p.client(ctx, r.Job)
	if err != nil {
		return pipeline.Result{}, err
	}
	ans, err := c.Apply(ctx, p.request(r.Job, protocol.EnsurePresent, r.Job.ID+"/apply"))
	if err != nil {
		return pipeline.Result{}, err
	}
	if ans.Outcome == protocol.OutcomeAccepted {
		return pipeline.Done(map[string]any{KeyOperation: ans.OperationID}), nil
	}
	return pipeline.Done(map[string]any{KeyOperation: nil, KeyOutputs: ans.Outputs}), nil
}

// await polls the apply's operation until it is final.
func (p *Pipeline) await(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	var id string
	if ok, err := r.Infra(KeyOperation, &id); err != nil {
		return pipeline.Result{}, fault.System(err)
	} else if !ok {
		return pipeline.Skip("the apply finished without an operation"), nil
	}
	c, _, err := p.client(ctx, r.Job)
	if err != nil {
		return pipeline.Result{}, err
	}
	op, err := c.Operation(ctx, id)
	switch {
	case protocol.IsUnknownOperation(err), op != nil && op.Outcome == protocol.OutcomeFailed && retrying(r, id):
		// The provisioner lost the operation, or the user retries a failed job: apply again.
		// A provisioner keeps no failed result under a request id, so this starts the work anew.
		return p.resubmit(ctx, c, r)
	case err != nil:
		return pipeline.Result{}, err
	case op.Outcome == protocol.OutcomeInProgress:
		msg := "waiting for operation " + id
		if op.Progress != "" {
			msg += ": " + op.Progress
		}
		return pipeline.Wait(p.opts.PollInterval, msg, nil), nil
	default:
		return pipeline.Done(map[string]any{KeyOutputs: op.Outputs}), nil
	}
}

// retrying reports whether this run of await follows its own failure on operation id: the
// engine keeps the step's last error on its record when a failed job is retried.
func retrying(r *pipeline.Run, id string) bool {
	i := r.Job.StepIndex(r.Step)
	return i >= 0 && strings.Contains(r.Job.Steps[i].Error, id)
}

func (p *Pipeline) resubmit(ctx context.Context, c *protocol.Client, r *pipeline.Run) (pipeline.Result, error) {
	ans, err := c.Apply(ctx, p.request(r.Job, protocol.EnsurePresent, r.Job.ID+"/apply"))
	if err != nil {
		return pipeline.Result{}, err
	}
	if ans.Outcome == protocol.OutcomeAccepted {
		return pipeline.Wait(p.opts.PollInterval, "applied again: operation "+ans.OperationID, map[string]any{KeyOperation: ans.OperationID}), nil
	}
	return pipeline.Done(map[string]any{KeyOutputs: ans.Outputs}), nil
}

// finalize records the resources as they are, and any drift already there.
func (p *Pipeline) finalize(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	c, _, err := p.client(ctx, r.Job)
	if err != nil {
		return pipeline.Result{}, err
	}
	ans, err := c.Inspect(ctx, p.request(r.Job, protocol.EnsurePresent, ""))
	if err != nil {
		return pipeline.Result{}, err
	}
	return pipeline.Done(map[string]any{KeyResources: ans.Resources, KeyDrift: ans.Drift}), nil
}

// remove is apply's Undo: ensure absent, waited on until final. Re-running it asks the same
// request again, which answers the same operation while it runs and its result once done.
func (p *Pipeline) remove(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	c, _, err := p.client(ctx, r.Job)
	if err != nil {
		return pipeline.Result{}, err
	}
	ans, err := c.Apply(ctx, p.request(r.Job, protocol.EnsureAbsent, r.Job.ID+"/delete"))
	if err != nil {
		return pipeline.Result{}, err
	}
	if ans.Outcome == protocol.OutcomeAccepted {
		return pipeline.Wait(p.opts.PollInterval, "waiting for deletion "+ans.OperationID, map[string]any{KeyDeleteOperation: ans.OperationID}), nil
	}
	return pipeline.Done(map[string]any{KeyDeleteOperation: nil, KeyOperation: nil, KeyOutputs: nil, KeyResources: nil}), nil
}
