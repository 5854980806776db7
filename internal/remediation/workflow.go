package remediation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
)

// Family is the ledger family of remediation jobs.
const Family job.Family = "remediation"

// Resource names the cloud object a workflow acts on.
type Resource struct {
	Type string
	ID   string
}

// State is what an executor observed. Status is normalised: running, stopped, starting,
// stopping, or the cloud's own word for anything else. Capacity is an ASG's desired capacity.
type State struct {
	Status   string
	Capacity int32
}

// Executor carries out Start, Stop and capacity changes on one cloud. Every call must be safe
// to repeat: the engine re-runs a step whose result was not recorded.
type Executor interface {
	Observe(ctx context.Context, r Resource) (State, error)
	Stop(ctx context.Context, r Resource) error
	Start(ctx context.Context, r Resource) error
	SetCapacity(ctx context.Context, r Resource, desired int32) error
}

// Decision is a person's answer at an approval gate.
type Decision struct {
	Approved bool      `json:"approved"`
	Actor    string    `json:"actor"`
	Reason   string    `json:"reason,omitempty"`
	At       time.Time `json:"at"`
}

// Config is a remediation job's config document.
type Config struct {
	RecommendationID string `json:"recommendationID"`
	Action           string `json:"action"`
	ResourceType     string `json:"resourceType"`
	ResourceID       string `json:"resourceID"`
	// Capacity is the desired capacity scale_back restores.
	Capacity *int32 `json:"capacity,omitempty"`
	Template string `json:"template"`
	Revision int    `json:"revision"`
	// Decisions are the approval gates' answers, by step ID.
	Decisions map[string]Decision `json:"decisions,omitempty"`
}

// ConfigOf decodes j's config.
func ConfigOf(j *job.Job) (Config, error) {
	var c Config
	if err := json.Unmarshal(j.Config, &c); err != nil {
		return c, fmt.Errorf("decode remediation config: %w", err)
	}
	return c, nil
}

// Message kinds.
const (
	NotifyApprovalRequired = "remediation.approval_required"
	NotifySucceeded        = "remediation.succeeded"
	NotifyFailed           = "remediation.failed"
)

// Message is one notification.
type Message struct {
	Kind             string    `json:"kind"`
	OrgID            string    `json:"orgID"`
	JobID            string    `json:"jobID"`
	StepID           string    `json:"stepID,omitempty"`
	StepName         string    `json:"stepName,omitempty"`
	RecommendationID string    `json:"recommendationID,omitempty"`
	Action           string    `json:"action"`
	ResourceType     string    `json:"resourceType"`
	ResourceID       string    `json:"resourceID"`
	Recipients       []string  `json:"recipients"`
	Text             string    `json:"text"`
	At               time.Time `json:"at"`
}

// Notifier delivers messages on one channel. It reports how many attempts it made.
type Notifier interface {
	Channel() string
	Notify(ctx context.Context, m Message) (attempts int, err error)
}

// Options configure the workflow pipeline.
type Options struct {
	// Executor returns the executor for j's cloud (from its space).
	Executor func(ctx context.Context, j *job.Job) (Executor, error)
	Timeline Timeline
	// Notifiers receive approval-required messages, and terminal ones when NotifyTerminal.
	Notifiers      []Notifier
	NotifyTerminal bool
	// Admins lists the emails of the organisation's admins, the recipients of notifications.
	Admins func(ctx context.Context, orgID string) ([]string, error)
	// Poll is how long a step waits for the cloud before it looks again (default 5s).
	Poll time.Duration
	// LeaseTTL bounds one step (default 2 minutes).
	LeaseTTL time.Duration
	Now      func() time.Time
	Logger   *slog.Logger
	// AfterDo, if set, runs after each step's Do returns, before the engine records it (crash
	// tests kill the process there).
	AfterDo func(ctx context.Context, j *job.Job, step string)
}

// Pipeline runs remediation jobs.
type Pipeline struct{ o Options }

// New checks o.
func New(o Options) (*Pipeline, error) {
	if o.Executor == nil || o.Timeline == nil {
		return nil, errors.New("remediation: Executor and Timeline are required")
	}
	if o.Poll <= 0 {
		o.Poll = 5 * time.Second
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 2 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Pipeline{o: o}, nil
}

func (p *Pipeline) Family() job.Family      { return Family }
func (p *Pipeline) LeaseTTL() time.Duration { return p.o.LeaseTTL }

// Validate refuses anything but a remediation job with a known template: the provisioning
// routes must not start one.
func (p *Pipeline) Validate(_ context.Context, j *job.Job) error {
	if j.Kind != job.KindRemediation {
		return errors.New("remediation workflows are started through /api/remediation-jobs")
	}
	c, err := ConfigOf(j)
	if err != nil {
		return err
	}
	if _, ok := templateNamed(c.Template, c.Revision); !ok {
		return fmt.Errorf("no template %s revision %d", c.Template, c.Revision)
	}
	return nil
}

// Steps lays out j's template. A config that names no template yields no steps, which the
// engine reports as a system failure.
func (p *Pipeline) Steps(j *job.Job) []pipeline.Step {
	c, err := ConfigOf(j)
	if err != nil {
		return nil
	}
	t, ok := templateNamed(c.Template, c.Revision)
	if !ok {
		return nil
	}
	out := make([]pipeline.Step, len(t.Steps))
	for i, d := range t.Steps {
		out[i] = p.step(d)
	}
	return out
}

// StepsOf returns the template steps of j, in order.
func StepsOf(j *job.Job) ([]StepDef, error) {
	c, err := ConfigOf(j)
	if err != nil {
		return nil, err
	}
	t, ok := templateNamed(c.Template, c.Revision)
	if !ok {
		return nil, fmt.Errorf("no template %s revision %d", c.Template, c.Revision)
	}
	return t.Steps, nil
}

// step wraps one kind's work: the timeline gets completed or failed, and a final failure its
// terminal notification.
func (p *Pipeline) step(d StepDef) pipeline.Step {
	var do func(context.Context, *pipeline.Run, Config) (pipeline.Result, error)
	switch d.Kind {
	case KindPrecondition:
		do = p.precondition
	case KindApproval:
		do = func(ctx context.Context, r *pipeline.Run, c Config) (pipeline.Result, error) {
			return p.approval(ctx, r, c, d)
		}
	case KindExecute:
		do = p.execute
	case KindPauseService:
		do = p.pauseService
	case KindValidate:
		do = p.validate
	}
	s := pipeline.Step{Name: d.Name, Do: func(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
		c, err := ConfigOf(r.Job)
		if err != nil {
			return pipeline.Result{}, fault.System(err)
		}
		res, err := do(ctx, r, c)
		if p.o.AfterDo != nil {
			p.o.AfterDo(ctx, r.Job, d.Name)
		}
		if err != nil {
			if fault.ClassOf(err) != job.ClassTransient {
				if werr := p.event(ctx, r.Job, d, EventFailed, ActorSystem, err.Error(), p.o.Now()); werr != nil {
					return pipeline.Result{}, werr
				}
				p.notify(ctx, r, c, d, NotifyFailed, fmt.Sprintf("Remediation %s failed at %s: %v", r.Job.ID, d.Name, err), true)
			}
			return res, err
		}
		if d.Kind != KindApproval && (res.Outcome == pipeline.OutcomeDone || res.Outcome == pipeline.OutcomeSkip) {
			if werr := p.event(ctx, r.Job, d, EventCompleted, ActorSystem, "", p.o.Now()); werr != nil {
				return pipeline.Result{}, werr
			}
		}
		return res, nil
	}}
	if d.Kind == KindApproval {
		s.Undo = func(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
			c, err := ConfigOf(r.Job)
			if err != nil {
				return pipeline.Result{}, fault.System(err)
			}
			if dec, ok := c.Decisions[d.ID]; ok && !dec.Approved {
				if err := p.event(ctx, r.Job, d, EventRejected, dec.Actor, dec.Reason, dec.At); err != nil {
					return pipeline.Result{}, err
				}
				return pipeline.Done(nil), nil
			}
			return pipeline.Skip("cancelled before a decision"), nil
		}
	}
	return s
}

func (p *Pipeline) event(ctx context.Context, j *job.Job, d StepDef, typ, actor, reason string, at time.Time) error {
	_, err := p.o.Timeline.AppendEvent(ctx, Event{OrgID: j.OrgID, JobID: j.ID, StepID: d.ID, StepName: d.Name,
		EventType: typ, Actor: actor, Reason: reason, CreatedAt: at})
	if err != nil {
		return fault.Transient(err)
	}
	return nil
}

func resourceOf(c Config) Resource { return Resource{Type: c.ResourceType, ID: c.ResourceID} }

func (p *Pipeline) executor(ctx context.Context, j *job.Job) (Executor, error) {
	ex, err := p.o.Executor(ctx, j)
	if err != nil {
		return nil, err
	}
	return ex, nil
}

// precondition checks the resource is where the action starts from, and records it.
func (p *Pipeline) precondition(ctx context.Context, r *pipeline.Run, c Config) (pipeline.Result, error) {
	if c.Action == ActionPause {
		// pause_service decides what may be paused; there is no state to compare yet.
		return pipeline.Done(nil), nil
	}
	ex, err := p.executor(ctx, r.Job)
	if err != nil {
		return pipeline.Result{}, err
	}
	st, err := ex.Observe(ctx, resourceOf(c))
	if err != nil {
		return pipeline.Result{}, err
	}
	want := map[string]bool{}
	switch c.Action {
	case ActionStop:
		want["running"] = true
	case ActionStart:
		want["stopped"] = true
	case ActionScaleToZero:
		if st.Capacity > 0 {
			return pipeline.Done(map[string]any{"before": st}), nil
		}
		return pipeline.Result{}, unexpected(c, "a desired capacity of 0 already")
	case ActionScaleBack:
		return pipeline.Done(map[string]any{"before": st}), nil
	}
	if !want[st.Status] {
		return pipeline.Result{}, unexpected(c, st.Status)
	}
	return pipeline.Done(map[string]any{"before": st}), nil
}

func unexpected(c Config, found string) error {
	return fault.UserAction(fmt.Errorf("%s %s is %s, which %s does not start from", c.ResourceType, c.ResourceID, found, c.Action),
		"UnexpectedState", "The resource changed since the recommendation was made; refresh the recommendation and remediate again.", "")
}

// approval parks the job until a decision is recorded for the step, and notifies the admins
// once per gate.
func (p *Pipeline) approval(ctx context.Context, r *pipeline.Run, c Config, d StepDef) (pipeline.Result, error) {
	if dec, ok := c.Decisions[d.ID]; ok {
		if !dec.Approved {
			// A rejection cancels the job; the engine's teardown records it (see Undo).
			return pipeline.AwaitUser("rejected; cancelling", nil), nil
		}
		if err := p.event(ctx, r.Job, d, EventApproved, dec.Actor, dec.Reason, dec.At); err != nil {
			return pipeline.Result{}, err
		}
		return pipeline.Done(nil), nil
	}
	if err := p.event(ctx, r.Job, d, EventCreated, ActorSystem, "", p.o.Now()); err != nil {
		return pipeline.Result{}, err
	}
	p.notify(ctx, r, c, d, NotifyApprovalRequired, fmt.Sprintf("Remediation %s (%s %s %s) awaits approval of step %s (id %s).",
		r.Job.ID, c.Action, c.ResourceType, c.ResourceID, d.Name, d.ID), false)
	return pipeline.AwaitUser("awaiting approval of step "+d.Name, nil), nil
}

// target is where an action ends, and the status the cloud shows on the way.
func target(c Config) (status, moving string) {
	switch c.Action {
	case ActionStop:
		return "stopped", "stopping"
	case ActionStart:
		return "running", "starting"
	}
	return "", ""
}

func wantCapacity(c Config) int32 {
	if c.Action == ActionScaleBack && c.Capacity != nil {
		return *c.Capacity
	}
	return 0
}

// reached reports whether st is the action's end state, and whether the cloud is on its way.
func reached(c Config, st State) (done, moving bool) {
	switch c.Action {
	case ActionScaleToZero, ActionScaleBack:
		return st.Capacity == wantCapacity(c), false
	}
	end, way := target(c)
	return st.Status == end, st.Status == way
}

// execute asks the executor for the change once: a re-run (after a crash, or a poll) first
// looks, and calls again only if the resource is still where the action started.
func (p *Pipeline) execute(ctx context.Context, r *pipeline.Run, c Config) (pipeline.Result, error) {
	ex, err := p.executor(ctx, r.Job)
	if err != nil {
		return pipeline.Result{}, err
	}
	res := resourceOf(c)
	st, err := ex.Observe(ctx, res)
	if err != nil {
		return pipeline.Result{}, err
	}
	if done, moving := reached(c, st); done {
		return pipeline.Done(map[string]any{"after": st}), nil
	} else if moving {
		return pipeline.Wait(p.o.Poll, "the resource is "+st.Status, nil), nil
	}
	switch c.Action {
	case ActionStop:
		err = ex.Stop(ctx, res)
	case ActionStart:
		err = ex.Start(ctx, res)
	case ActionScaleToZero, ActionScaleBack:
		err = ex.SetCapacity(ctx, res, wantCapacity(c))
	default:
		err = fault.System(fmt.Errorf("execute has no action %q", c.Action))
	}
	if err != nil {
		return pipeline.Result{}, err
	}
	return pipeline.Wait(p.o.Poll, "asked the cloud to "+c.Action, map[string]any{"requested": c.Action}), nil
}

// pauseService is the workflow's own pause for resources without a stop primitive. It never
// pauses a datastore: those stop only through their own API.
func (p *Pipeline) pauseService(_ context.Context, _ *pipeline.Run, c Config) (pipeline.Result, error) {
	if IsDatastore(c.ResourceType) {
		return pipeline.Result{}, fault.UserAction(
			fmt.Errorf("%s %s is a datastore; pause_service never pauses a customer database", c.ResourceType, c.ResourceID),
			"DatastorePauseRefused",
			"Stop the database through its own stop action instead (action stop on an rds-instance, which asks for approval).",
			"https://console.aws.amazon.com/rds/home#databases:")
	}
	return pipeline.Result{}, fault.UserAction(fmt.Errorf("resource type %q has no pause on this cloud", c.ResourceType),
		"PauseUnsupported", "Use the stop action, or scale the resource to zero, where the resource supports it.", "")
}

// validate checks the end state and sends the success notification.
func (p *Pipeline) validate(ctx context.Context, r *pipeline.Run, c Config) (pipeline.Result, error) {
	ex, err := p.executor(ctx, r.Job)
	if err != nil {
		return pipeline.Result{}, err
	}
	st, err := ex.Observe(ctx, resourceOf(c))
	if err != nil {
		return pipeline.Result{}, err
	}
	done, moving := reached(c, st)
	if moving {
		return pipeline.Wait(p.o.Poll, "the resource is "+st.Status, nil), nil
	}
	if !done {
		return pipeline.Result{}, fault.UserAction(fmt.Errorf("%s %s is %s (capacity %d) after %s", c.ResourceType, c.ResourceID,
			st.Status, st.Capacity, c.Action), "ValidationFailed",
			"Something changed the resource after the action; look at it in the cloud console, then remediate again.", "")
	}
	d := StepDef{}
	if steps, err := StepsOf(r.Job); err == nil {
		d = steps[len(steps)-1]
	}
	p.notify(ctx, r, c, d, NotifySucceeded, fmt.Sprintf("Remediation %s (%s %s %s) completed.", r.Job.ID, c.Action, c.ResourceType, c.ResourceID), true)
	return pipeline.Done(map[string]any{"validated": st}), nil
}

// notify sends m on every channel that has not had it yet. A notification that cannot be
// delivered is recorded as failed and does not hold the workflow up.
func (p *Pipeline) notify(ctx context.Context, r *pipeline.Run, c Config, d StepDef, kind, text string, terminal bool) {
	if terminal && !p.o.NotifyTerminal {
		return
	}
	if len(p.o.Notifiers) == 0 {
		return
	}
	var recipients []string
	if p.o.Admins != nil {
		var err error
		if recipients, err = p.o.Admins(ctx, r.Job.OrgID); err != nil {
			r.Logger.Warn("could not list the organisation's admins for a notification", "error", err)
		}
	}
	m := Message{Kind: kind, OrgID: r.Job.OrgID, JobID: r.Job.ID, StepID: d.ID, StepName: d.Name, RecommendationID: c.RecommendationID,
		Action: c.Action, ResourceType: c.ResourceType, ResourceID: c.ResourceID, Recipients: recipients, Text: text, At: p.o.Now()}
	for _, n := range p.o.Notifiers {
		done, err := p.o.Timeline.Delivered(ctx, r.Job.ID, d.ID, kind, n.Channel())
		if err != nil {
			r.Logger.Warn("could not read a notification's delivery record", "error", err)
		}
		if done {
			continue
		}
		attempts, err := n.Notify(ctx, m)
		rec := Delivery{JobID: r.Job.ID, OrgID: r.Job.OrgID, StepID: d.ID, Kind: kind, Channel: n.Channel(),
			Status: "delivered", Attempts: attempts, UpdatedAt: p.o.Now()}
		if err != nil {
			rec.Status, rec.LastError = "failed", err.Error()
			r.Logger.Warn("notification not delivered", "kind", kind, "channel", n.Channel(), "attempts", attempts, "error", err)
		}
		if err := p.o.Timeline.RecordDelivery(ctx, rec); err != nil {
			r.Logger.Warn("could not record a notification's delivery", "error", err)
		}
	}
}
