package datastore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// Modifier is what a provider's Servers also offers when it changes a running server's
// settings in place (AWS: ModifyDBInstance). A provider without it takes no sizing updates.
type Modifier interface {
	// Modifiable names the settings (their config names) the provider changes in place for
	// engine.
	Modifiable(engine ds.Engine) []string
	// Modify brings the job's server to p.Settings; settings already as asked are left alone,
	// so a re-run after a crash sends nothing twice.
	Modify(ctx context.Context, p ModifyParams) (ModifyResult, error)
}

// ImmediateOnly is what a Modifier also offers when its cloud cannot hold a change for the
// server's maintenance window (Azure's flexible servers take a new size when asked): an
// update of one of those settings with applyImmediately false is refused, rather than
// carried out now against the request.
type ImmediateOnly interface {
	AppliedAtOnce(engine ds.Engine) []string
}

// Explainer is what a Modifier also offers to say why it does not change a setting in place
// for an engine: the refusal (rule provider) carries its words instead of the general ones.
type Explainer interface {
	// WhyNotModifiable is why field is not changed in place for engine; "" for no reason
	// of its own.
	WhyNotModifiable(engine ds.Engine, field string) string
}

// ModifyParams asks for one job's server to take new settings.
type ModifyParams struct {
	JobID    string
	Engine   ds.Engine
	Settings map[string]any
	// ApplyImmediately false leaves a disruptive change (the instance class) to the server's
	// next maintenance window.
	ApplyImmediately bool
	// Data is what the previous call returned in ModifyResult.Data while the change was under
	// way (nil on the first call): a cloud whose change is a long-running operation finds it
	// there and polls it instead of starting another.
	Data map[string]any
}

// ModifyResult says what Modify sent.
type ModifyResult struct {
	// Changed names the settings Modify asked the cloud to change (none: already as asked).
	Changed []string
	// Pending names those the cloud holds for the maintenance window.
	Pending []string
	// Wait says the cloud is still applying the change: the step waits (releasing its worker)
	// and calls Modify again with Data, which the job records meanwhile under
	// InfraServerUpdate, so a restarted server resumes the same operation.
	Wait bool
	// Data is the driver's record of the change in flight (an operation's resume token).
	Data map[string]any
}

// InfraServerUpdate is where create_server records a server change in flight (the driver's
// ModifyResult.Data); it is removed once the change is done.
const InfraServerUpdate = "serverUpdate"

// fieldRule is how an update treats one config field.
type fieldRule struct {
	field string // config name
	// fixed: refused with this message when changed.
	fixed string
	// get reads the field's value from a config.
	get func(c Config) any
}

// updateFields are the datastore config's fields in the order a diff lists them.
var updateFields = []fieldRule{
	{field: "engine", fixed: "cannot change in place; make a new datastore and migrate", get: func(c Config) any { return string(c.Engine) }},
	{field: "version", fixed: "cannot change in place; an engine version upgrade is not a config update: make a new datastore and migrate", get: func(c Config) any { return c.Version }},
	{field: "name", fixed: "cannot change: the server was created under it", get: func(c Config) any { return c.Name }},
	{field: "instanceClass", get: func(c Config) any { return c.InstanceClass }},
	{field: "allocatedStorageGB", get: func(c Config) any { return c.AllocatedStorageGB }},
	{field: "multiAZ", get: func(c Config) any { return c.MultiAZ }},
	{field: "backupRetentionDays", get: func(c Config) any { return c.BackupRetentionDays }},
}

// ConfigState implements the config updates' state keys: a credential rotation recorded in the
// config lays out the rotation's steps, so an update keeps it as the job has it.
func (p *Pipeline) ConfigState() []string { return []string{configRotation} }

var _ interface {
	PlanUpdate(ctx context.Context, j *job.Job, req pipeline.UpdateRequest) (*pipeline.UpdatePlan, error)
} = (*Pipeline)(nil)

// PlanUpdate plans a completed (or update-failed) datastore job's change to req.Config: the
// server's settings change in place through the provider's Modifier, and create_server and
// wait_ready run again (create_server, finding its server on record, modifies it instead of
// creating one). Refusals are a validation.Error naming each field (config.<name>).
func (p *Pipeline) PlanUpdate(ctx context.Context, j *job.Job, req pipeline.UpdateRequest) (*pipeline.UpdatePlan, error) {
	if j.Mode == job.ModeAdopt {
		return nil, validation.New("config", "adopted", "an adopted datastore is not Groundwork's to change; adopt it again with the new details")
	}
	old, err := decodeConfig(j.Config)
	if err != nil {
		return nil, validation.New("config", "stored", "the job's stored config cannot be read: "+err.Error())
	}
	next, err := decodeConfig(req.Config)
	if err != nil {
		return nil, err
	}
	if err := validateConfig(next, j.Mode); err != nil {
		return nil, err
	}
	var (
		refused validation.Error
		changes []pipeline.FieldChange
	)
	for _, f := range updateFields {
		from, to := f.get(old), f.get(next)
		if from == to {
			continue
		}
		if f.fixed != "" {
			refused = append(refused, validation.FieldError{Field: "config." + f.field, Rule: "immutable", Message: f.fixed})
			continue
		}
		changes = append(changes, pipeline.FieldChange{Field: f.field, From: from, To: to})
	}
	rc := pipeline.ResourceChange{Resource: serverResource(j), Action: pipeline.ActionNoOp, Changes: changes, Disruption: "none"}
	if rc.Changes == nil {
		rc.Changes = []pipeline.FieldChange{}
	}
	immediately := req.ApplyImmediately == nil || *req.ApplyImmediately
	var (
		modifiable, atOnce []string
		why                func(field string) string
	)
	if m, ok := p.modifier(j.Provider); ok {
		modifiable = m.Modifiable(next.Engine)
		if io, ok := m.(ImmediateOnly); ok {
			atOnce = io.AppliedAtOnce(next.Engine)
		}
		if ex, ok := m.(Explainer); ok {
			why = func(field string) string { return ex.WhyNotModifiable(next.Engine, field) }
		}
	}
	for _, c := range changes {
		if !slices.Contains(modifiable, c.Field) {
			msg := fmt.Sprintf("provider %s cannot change it in place for %s", j.Provider, next.Engine)
			if why != nil {
				if w := why(c.Field); w != "" {
					msg = w
				}
			}
			refused = append(refused, validation.FieldError{Field: "config." + c.Field, Rule: "provider", Message: msg})
			continue
		}
		switch c.Field {
		case "allocatedStorageGB":
			if next.AllocatedStorageGB < old.AllocatedStorageGB {
				refused = append(refused, validation.FieldError{Field: "config.allocatedStorageGB", Rule: "shrink",
					Message: fmt.Sprintf("storage cannot shrink (from %d to %d GB); make a new datastore and migrate", old.AllocatedStorageGB, next.AllocatedStorageGB)})
			}
		case "backupRetentionDays":
			// A shorter retention deletes the automated backups older than it at once (0: all
			// of them).
			if next.BackupRetentionDays < old.BackupRetentionDays {
				rc.DataLoss = true
				if !req.AllowDataLoss {
					refused = append(refused, validation.FieldError{Field: "config.backupRetentionDays", Rule: "dataLoss",
						Message: fmt.Sprintf("a retention of %d days deletes the backups older than that; send allowDataLoss: true to accept", next.BackupRetentionDays)})
				}
			}
		case "instanceClass":
			rc.Disruption = "brief restart"
			if !immediately && slices.Contains(atOnce, c.Field) {
				refused = append(refused, validation.FieldError{Field: "config.instanceClass", Rule: "provider",
					Message: fmt.Sprintf("provider %s applies a new instanceClass at once (a brief restart) and cannot hold it for the maintenance window; send applyImmediately: true", j.Provider)})
			} else if !immediately {
				rc.Disruption = "brief restart in the next maintenance window"
			}
		}
	}
	if len(refused) == 0 && len(changes) > 0 {
		// The provider's own check of the settings, as the validate step runs it when a job
		// is made (that step does not run again): a combination the cloud refuses (high
		// availability on a burstable size, say) is refused now rather than failing the job.
		if d, ok := p.drivers[j.Provider]; ok && d.Servers != nil {
			if _, err := d.Servers.Check(ctx, CheckParams{Engine: next.Engine, Version: next.Version, Settings: next.settings()}); err != nil {
				fe := fault.As(err)
				if fe == nil || fe.Class != job.ClassUserAction {
					return nil, err
				}
				msg := err.Error()
				if fe.FixHint != "" {
					msg += ": " + fe.FixHint
				}
				refused = append(refused, validation.FieldError{Field: "config", Rule: "provider", Message: msg})
			}
		}
	}
	if len(refused) > 0 {
		return nil, refused
	}
	out := &pipeline.UpdatePlan{Resources: []pipeline.ResourceChange{rc}, Config: req.Config, Steps: slices.Clone(j.Steps), Rerun: []string{}}
	if len(changes) == 0 {
		return out, nil
	}
	rc.Action = pipeline.ActionInPlace
	out.Resources[0] = rc
	cfg, err := withApply(req.Config, immediately)
	if err != nil {
		return nil, err
	}
	out.Config = cfg
	if err := out.Reopen(j, StepCreateServer, StepWaitReady); err != nil {
		return nil, err
	}
	return out, nil
}

// serverResource names the job's server as a diff shows it.
func serverResource(j *job.Job) string {
	var in struct {
		Server struct {
			ID string `json:"id"`
		} `json:"server"`
	}
	if json.Unmarshal(j.Infra, &in) == nil && in.Server.ID != "" {
		return "server " + in.Server.ID
	}
	return "server"
}

// withApply records in the config how the update is to be applied (read by create_server);
// it is how, not what, so a diff never lists it.
func withApply(raw json.RawMessage, immediately bool) (json.RawMessage, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, validation.New("config", "type", "must be an object")
	}
	m["applyImmediately"] = immediately
	return json.Marshal(m)
}

func (p *Pipeline) modifier(provider string) (Modifier, bool) {
	d, ok := p.drivers[provider]
	if !ok || d.Servers == nil {
		return nil, false
	}
	m, ok := d.Servers.(Modifier)
	return m, ok
}

// modifyServer is create_server run again by an update: the server on record takes the
// config's settings in place.
func (p *Pipeline) modifyServer(ctx context.Context, rn run, r *pipeline.Run) (pipeline.Result, error) {
	m, ok := p.modifier(r.Job.Provider)
	if !ok {
		err := fmt.Errorf("provider %q changes no datastore in place", r.Job.Provider)
		return pipeline.Result{}, fault.UserAction(err, "UnsupportedUpdate", err.Error(), "")
	}
	immediately := rn.cfg.ApplyImmediately == nil || *rn.cfg.ApplyImmediately
	var inFlight struct {
		Data map[string]any `json:"data"`
	}
	if _, err := r.Infra(InfraServerUpdate, &inFlight); err != nil {
		return pipeline.Result{}, fault.System(err)
	}
	res, err := m.Modify(ctx, ModifyParams{JobID: r.Job.ID, Engine: rn.cfg.Engine, Settings: rn.cfg.settings(), ApplyImmediately: immediately,
		Data: inFlight.Data})
	if err != nil {
		return pipeline.Result{}, err
	}
	if res.Wait {
		msg := fmt.Sprintf("the cloud is applying %v", res.Changed)
		if len(res.Changed) == 0 {
			msg = "waiting for the server to finish an operation under way"
		}
		return pipeline.Wait(p.poll, msg,
			map[string]any{InfraServerUpdate: map[string]any{"data": res.Data}}), nil
	}
	out := pipeline.Done(nil)
	if inFlight.Data != nil {
		out.Infra = map[string]any{InfraServerUpdate: nil}
	}
	switch {
	case len(res.Changed) == 0:
		out.Message = "the server already has the config's settings"
	case len(res.Pending) > 0:
		out.Message = fmt.Sprintf("modified %v; %v in the next maintenance window", res.Changed, res.Pending)
	default:
		out.Message = fmt.Sprintf("modified %v", res.Changed)
	}
	return out, nil
}
