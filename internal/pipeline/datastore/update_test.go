package datastore_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// modServers is a provider whose servers change in place: it keeps the settings Modify was
// last given.
type modServers struct {
	dspipe.Servers
	modifiable []string
	got        *dspipe.ModifyParams
}

func (m *modServers) Modifiable(ds.Engine) []string { return m.modifiable }

func (m *modServers) Modify(_ context.Context, p dspipe.ModifyParams) (dspipe.ModifyResult, error) {
	m.got = &p
	return dspipe.ModifyResult{Changed: []string{"allocatedStorageGB"}}, nil
}

// liveJob is a completed datastore job on provider "cloud" with its server on record.
func liveJob(cfg string) *job.Job {
	steps := []job.StepRecord{}
	for _, n := range []string{"validate", "network", "credentials", "create_server", "wait_ready", "register", "finalize"} {
		steps = append(steps, job.StepRecord{Name: n, Status: job.StepDone})
	}
	return &job.Job{ID: "job_live", OrgID: testOrg, Family: job.FamilyDatastore, Provider: "cloud", Mode: job.ModeCreate,
		Config: json.RawMessage(cfg), Infra: json.RawMessage(`{"server":{"id":"gw-db-1","host":"h","port":5432,"engine":"postgres"}}`),
		Status: job.StatusCompleted, Phase: job.PhaseApply, Steps: steps}
}

func TestPlanUpdate(t *testing.T) {
	t.Parallel()
	const base = `{"engine":"postgres","version":"16","instanceClass":"db.t3.micro","allocatedStorageGB":20,"backupRetentionDays":7}`
	all := []string{"instanceClass", "allocatedStorageGB", "backupRetentionDays", "multiAZ"}
	no := false
	cases := []struct {
		name          string
		modifiable    []string // nil: the provider has no Modifier
		mode          job.Mode
		config        string
		allowDataLoss bool
		immediately   *bool
		refused       map[string]string // field -> rule
		action        pipeline.Action
		changes       []string
		disruption    string
		dataLoss      bool
	}{
		{name: "storage grows", modifiable: all, config: `{"engine":"postgres","version":"16","instanceClass":"db.t3.micro","allocatedStorageGB":50,"backupRetentionDays":7}`,
			action: pipeline.ActionInPlace, changes: []string{"allocatedStorageGB"}, disruption: "none"},
		{name: "retention grows", modifiable: all, config: `{"engine":"postgres","version":"16","instanceClass":"db.t3.micro","allocatedStorageGB":20,"backupRetentionDays":14}`,
			action: pipeline.ActionInPlace, changes: []string{"backupRetentionDays"}, disruption: "none"},
		{name: "class now", modifiable: all, config: `{"engine":"postgres","version":"16","instanceClass":"db.t3.large","allocatedStorageGB":20,"backupRetentionDays":7}`,
			action: pipeline.ActionInPlace, changes: []string{"instanceClass"}, disruption: "brief restart"},
		{name: "class in the window", modifiable: all, immediately: &no, config: `{"engine":"postgres","version":"16","instanceClass":"db.t3.large","allocatedStorageGB":20,"backupRetentionDays":7}`,
			action: pipeline.ActionInPlace, changes: []string{"instanceClass"}, disruption: "brief restart in the next maintenance window"},
		{name: "nothing changes", modifiable: all, config: base, action: pipeline.ActionNoOp, changes: []string{}, disruption: "none"},
		{name: "engine", modifiable: all, config: `{"engine":"mysql","version":"16","instanceClass":"db.t3.micro","allocatedStorageGB":20,"backupRetentionDays":7}`,
			refused: map[string]string{"config.engine": "immutable"}},
		{name: "version", modifiable: all, config: `{"engine":"postgres","version":"17","instanceClass":"db.t3.micro","allocatedStorageGB":20,"backupRetentionDays":7}`,
			refused: map[string]string{"config.version": "immutable"}},
		{name: "name", modifiable: all, config: `{"engine":"postgres","name":"other","version":"16","instanceClass":"db.t3.micro","allocatedStorageGB":20,"backupRetentionDays":7}`,
			refused: map[string]string{"config.name": "immutable"}},
		{name: "storage shrinks", modifiable: all, config: `{"engine":"postgres","version":"16","instanceClass":"db.t3.micro","allocatedStorageGB":10,"backupRetentionDays":7}`,
			refused: map[string]string{"config.allocatedStorageGB": "shrink"}},
		{name: "retention shrinks", modifiable: all, config: `{"engine":"postgres","version":"16","instanceClass":"db.t3.micro","allocatedStorageGB":20,"backupRetentionDays":1}`,
			refused: map[string]string{"config.backupRetentionDays": "dataLoss"}},
		{name: "retention shrinks, loss allowed", modifiable: all, allowDataLoss: true, config: `{"engine":"postgres","version":"16","instanceClass":"db.t3.micro","allocatedStorageGB":20,"backupRetentionDays":1}`,
			action: pipeline.ActionInPlace, changes: []string{"backupRetentionDays"}, disruption: "none", dataLoss: true},
		{name: "engine and shrink together", modifiable: all, config: `{"engine":"mysql","version":"16","instanceClass":"db.t3.micro","allocatedStorageGB":10,"backupRetentionDays":7}`,
			refused: map[string]string{"config.engine": "immutable", "config.allocatedStorageGB": "shrink"}},
		{name: "provider without in-place changes", config: `{"engine":"postgres","version":"16","instanceClass":"db.t3.micro","allocatedStorageGB":50,"backupRetentionDays":7}`,
			refused: map[string]string{"config.allocatedStorageGB": "provider"}},
		{name: "setting the provider does not change", modifiable: []string{"allocatedStorageGB"}, config: `{"engine":"postgres","version":"16","instanceClass":"db.t3.micro","allocatedStorageGB":20,"backupRetentionDays":7,"multiAZ":true}`,
			refused: map[string]string{"config.multiAZ": "provider"}},
		{name: "adopted", modifiable: all, mode: job.ModeAdopt, config: base, refused: map[string]string{"config": "adopted"}},
		{name: "bad engine", modifiable: all, config: `{"engine":"oracle"}`, refused: map[string]string{"config.engine": ds.RuleEnum}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var servers dspipe.Servers = stubServers{}
			if tc.modifiable != nil {
				servers = &modServers{Servers: stubServers{}, modifiable: tc.modifiable}
			}
			p := dspipe.New(dspipe.Options{Drivers: map[string]dspipe.Driver{"cloud": {Servers: servers}}})
			j := liveJob(base)
			if tc.mode != "" {
				j.Mode = tc.mode
			}
			pl, err := p.PlanUpdate(t.Context(), j, pipeline.UpdateRequest{Config: json.RawMessage(tc.config), AllowDataLoss: tc.allowDataLoss, ApplyImmediately: tc.immediately})
			if tc.refused != nil {
				fields, ok := validation.Fields(err)
				got := map[string]string{}
				for _, f := range fields {
					got[f.Field] = f.Rule
				}
				if !ok || len(got) != len(tc.refused) {
					t.Fatalf("refusal %v, want fields %v", err, tc.refused)
				}
				for f, rule := range tc.refused {
					if got[f] != rule {
						t.Fatalf("refusal %v, want %s refused by %s", err, f, rule)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			rc := pl.Resources[0]
			var changed []string
			for _, c := range rc.Changes {
				changed = append(changed, c.Field)
			}
			if changed == nil {
				changed = []string{}
			}
			if rc.Resource != "server gw-db-1" || rc.Action != tc.action || !slices.Equal(changed, tc.changes) || rc.Disruption != tc.disruption || rc.DataLoss != tc.dataLoss {
				t.Fatalf("plan %+v", rc)
			}
			if tc.action == pipeline.ActionNoOp {
				if !slices.Equal(pl.Steps, j.Steps) || len(pl.Rerun) != 0 {
					t.Fatalf("a no-op re-opens steps %+v", pl.Steps)
				}
				return
			}
			want := []string{"create_server", "wait_ready"}
			if !slices.Equal(pl.Rerun, want) || pl.Steps[3].Status != job.StepPending || pl.Steps[4].Status != job.StepPending || pl.Steps[5].Status != job.StepDone {
				t.Fatalf("rerun %v, steps %+v", pl.Rerun, pl.Steps)
			}
			var cfg map[string]any
			if err := json.Unmarshal(pl.Config, &cfg); err != nil || cfg["applyImmediately"] != (tc.immediately == nil || *tc.immediately) {
				t.Fatalf("new config %s", pl.Config)
			}
		})
	}
}

// stubServers is a provider whose only call in these tests is the settings' check, which
// passes.
type stubServers struct{ dspipe.Servers }

func (stubServers) Check(context.Context, dspipe.CheckParams) (dspipe.CheckResult, error) {
	return dspipe.CheckResult{}, nil
}

// TestUpdateModifiesServer: create_server, re-opened by an update, asks the provider to modify
// the server on record (with the config's settings and the maintenance-window choice) and
// creates nothing.
func TestUpdateModifiesServer(t *testing.T) {
	t.Parallel()
	mod := &modServers{Servers: stubServers{}, modifiable: []string{"allocatedStorageGB"}}
	p := dspipe.New(dspipe.Options{Drivers: map[string]dspipe.Driver{"cloud": {Servers: mod}}})
	j := liveJob(`{"engine":"postgres","allocatedStorageGB":20}`)
	no := false
	pl, err := p.PlanUpdate(t.Context(), j, pipeline.UpdateRequest{Config: json.RawMessage(`{"engine":"postgres","allocatedStorageGB":40}`), ApplyImmediately: &no})
	if err != nil {
		t.Fatal(err)
	}
	j.Config, j.Steps = pl.Config, pl.Steps
	var step pipeline.Step
	for _, s := range p.Steps(j) {
		if s.Name == dspipe.StepCreateServer {
			step = s
		}
	}
	res, err := step.Do(t.Context(), &pipeline.Run{Job: j, Step: step.Name})
	if err != nil {
		t.Fatal(err)
	}
	if mod.got == nil || mod.got.JobID != j.ID || mod.got.ApplyImmediately || mod.got.Settings["allocatedStorageGB"] != 40 || res.Outcome != pipeline.OutcomeDone {
		t.Fatalf("modify %+v, result %+v", mod.got, res)
	}
}

// waitServers is a provider whose change is a long-running operation: the first Modify starts
// it and returns its token to record, the second finds the token and reports it done.
type waitServers struct {
	dspipe.Servers
	calls []dspipe.ModifyParams
}

func (w *waitServers) Modifiable(ds.Engine) []string { return []string{"allocatedStorageGB"} }

func (w *waitServers) Modify(_ context.Context, p dspipe.ModifyParams) (dspipe.ModifyResult, error) {
	w.calls = append(w.calls, p)
	if p.Data["token"] == "op-1" {
		return dspipe.ModifyResult{Changed: []string{"allocatedStorageGB"}}, nil
	}
	return dspipe.ModifyResult{Changed: []string{"allocatedStorageGB"}, Wait: true, Data: map[string]any{"token": "op-1"}}, nil
}

// TestUpdateWaitsOnTheCloud: a Modify under way makes create_server wait with the driver's
// record in infra; the next call is given that record, and the step then finishes and drops it.
func TestUpdateWaitsOnTheCloud(t *testing.T) {
	t.Parallel()
	mod := &waitServers{Servers: stubServers{}}
	p := dspipe.New(dspipe.Options{Drivers: map[string]dspipe.Driver{"cloud": {Servers: mod}}})
	j := liveJob(`{"engine":"postgres","allocatedStorageGB":20}`)
	pl, err := p.PlanUpdate(t.Context(), j, pipeline.UpdateRequest{Config: json.RawMessage(`{"engine":"postgres","allocatedStorageGB":40}`)})
	if err != nil {
		t.Fatal(err)
	}
	j.Config, j.Steps = pl.Config, pl.Steps
	var step pipeline.Step
	for _, s := range p.Steps(j) {
		if s.Name == dspipe.StepCreateServer {
			step = s
		}
	}
	res, err := step.Do(t.Context(), &pipeline.Run{Job: j, Step: step.Name})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != pipeline.OutcomeWait || res.Infra[dspipe.InfraServerUpdate] == nil {
		t.Fatalf("first call: %+v", res)
	}
	if j.Infra, err = pipeline.MergeInfra(j.Infra, res.Infra); err != nil {
		t.Fatal(err)
	}
	res, err = step.Do(t.Context(), &pipeline.Run{Job: j, Step: step.Name})
	if err != nil {
		t.Fatal(err)
	}
	if len(mod.calls) != 2 || mod.calls[0].Data != nil || mod.calls[1].Data["token"] != "op-1" {
		t.Fatalf("calls %+v", mod.calls)
	}
	if v, ok := res.Infra[dspipe.InfraServerUpdate]; res.Outcome != pipeline.OutcomeDone || !ok || v != nil {
		t.Fatalf("second call: %+v", res)
	}
}

// atOnceServers apply a new instance class when asked, whatever the maintenance window.
type atOnceServers struct{ modServers }

func (a *atOnceServers) AppliedAtOnce(ds.Engine) []string { return []string{"instanceClass"} }

// TestUpdateRefusesAWindowTheCloudCannotKeep: applyImmediately false with a setting the
// provider applies at once is refused by field; sent at once it is planned.
func TestUpdateRefusesAWindowTheCloudCannotKeep(t *testing.T) {
	t.Parallel()
	mod := &atOnceServers{modServers{Servers: stubServers{}, modifiable: []string{"instanceClass", "allocatedStorageGB"}}}
	p := dspipe.New(dspipe.Options{Drivers: map[string]dspipe.Driver{"cloud": {Servers: mod}}})
	j := liveJob(`{"engine":"postgres","instanceClass":"Standard_B1ms","allocatedStorageGB":32}`)
	no := false
	_, err := p.PlanUpdate(t.Context(), j, pipeline.UpdateRequest{Config: json.RawMessage(`{"engine":"postgres","instanceClass":"Standard_B2s","allocatedStorageGB":32}`), ApplyImmediately: &no})
	var ve validation.Error
	if !errors.As(err, &ve) || len(ve) != 1 || ve[0].Field != "config.instanceClass" || ve[0].Rule != "provider" {
		t.Fatalf("refusal = %v", err)
	}
	// Storage alone is not a restart: the window does not matter.
	if _, err := p.PlanUpdate(t.Context(), j, pipeline.UpdateRequest{Config: json.RawMessage(`{"engine":"postgres","instanceClass":"Standard_B1ms","allocatedStorageGB":64}`), ApplyImmediately: &no}); err != nil {
		t.Fatal(err)
	}
	pl, err := p.PlanUpdate(t.Context(), j, pipeline.UpdateRequest{Config: json.RawMessage(`{"engine":"postgres","instanceClass":"Standard_B2s","allocatedStorageGB":32}`)})
	if err != nil || pl.Resources[0].Disruption != "brief restart" {
		t.Fatalf("plan = %+v, %v", pl, err)
	}
}

// explainingServers say why they keep a setting.
type explainingServers struct{ modServers }

func (e *explainingServers) WhyNotModifiable(_ ds.Engine, field string) string {
	return "the cache keeps its " + field
}

// TestUpdateRefusalCarriesTheProvidersReason: a setting the provider does not change is
// refused (rule provider) in the provider's words.
func TestUpdateRefusalCarriesTheProvidersReason(t *testing.T) {
	t.Parallel()
	mod := &explainingServers{modServers{Servers: stubServers{}}}
	p := dspipe.New(dspipe.Options{Drivers: map[string]dspipe.Driver{"cloud": {Servers: mod}}})
	j := liveJob(`{"engine":"redis","instanceClass":"Standard_C1"}`)
	_, err := p.PlanUpdate(t.Context(), j, pipeline.UpdateRequest{Config: json.RawMessage(`{"engine":"redis","instanceClass":"Standard_C2"}`)})
	var ve validation.Error
	if !errors.As(err, &ve) || len(ve) != 1 || ve[0].Field != "config.instanceClass" || ve[0].Rule != "provider" || ve[0].Message != "the cache keeps its instanceClass" {
		t.Fatalf("refusal = %v", err)
	}
}

// refusingServers refuse every settings check as a cloud refuses a combination it cannot make.
type refusingServers struct{ modServers }

func (*refusingServers) Check(context.Context, dspipe.CheckParams) (dspipe.CheckResult, error) {
	return dspipe.CheckResult{}, fault.UserAction(errors.New("multiAZ on a burstable size"), "HANotOnBurstable", "Pick a general purpose size.", "")
}

// TestUpdateRunsTheProvidersCheck: the settings an update asks for go through the provider's
// check, as at creation; its refusal is a field error with the fix, not a failed job later.
func TestUpdateRunsTheProvidersCheck(t *testing.T) {
	t.Parallel()
	mod := &refusingServers{modServers{Servers: stubServers{}, modifiable: []string{"multiAZ"}}}
	p := dspipe.New(dspipe.Options{Drivers: map[string]dspipe.Driver{"cloud": {Servers: mod}}})
	j := liveJob(`{"engine":"postgres","multiAZ":false}`)
	_, err := p.PlanUpdate(t.Context(), j, pipeline.UpdateRequest{Config: json.RawMessage(`{"engine":"postgres","multiAZ":true}`)})
	var ve validation.Error
	if !errors.As(err, &ve) || len(ve) != 1 || ve[0].Field != "config" || ve[0].Rule != "provider" || !strings.Contains(ve[0].Message, "Pick a general purpose size.") {
		t.Fatalf("refusal = %v", err)
	}
	// A config that changes nothing is not checked again.
	if _, err := p.PlanUpdate(t.Context(), j, pipeline.UpdateRequest{Config: json.RawMessage(`{"engine":"postgres","multiAZ":false}`)}); err != nil {
		t.Fatal(err)
	}
}
