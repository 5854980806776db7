package azure

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/provider/azure/azurefake"
	"github.com/groundworkhq/groundwork/internal/provider/drivertest"
	"github.com/groundworkhq/groundwork/internal/secrets/secretstest"
)

// updater is a family pipeline that plans config updates.
type updater interface {
	pipeline.Pipeline
	PlanUpdate(ctx context.Context, j *job.Job, req pipeline.UpdateRequest) (*pipeline.UpdatePlan, error)
}

// TestPlanListsTheActionsOfAnUpdate makes each job, then carries out a config update of it
// as the engine does (the re-opened steps run again), noting the RBAC action of every request
// of the update: each must be in the plan of the job's steps, so the role a job was planned
// with also lets its updates through.
func TestPlanListsTheActionsOfAnUpdate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name         string
		family       job.Family
		config, next string
		build        func(c *Client, j *job.Job) updater
	}{
		{"datastore postgres", job.FamilyDatastore,
			`{"engine":"postgres","name":"orders","instanceClass":"Standard_D2ds_v5","allocatedStorageGB":32}`,
			`{"engine":"postgres","name":"orders","instanceClass":"Standard_D4ds_v5","allocatedStorageGB":64,"backupRetentionDays":14,"multiAZ":true}`,
			func(c *Client, j *job.Job) updater {
				kv, err := c.Secrets(j)
				if err != nil {
					t.Fatal(err)
				}
				return dspipe.New(dspipe.Options{Drivers: map[string]dspipe.Driver{Name: datastoreOn(c)}, Secrets: secretstest.Vault(kv), Poll: time.Millisecond})
			}},
		{"kubernetes", job.FamilyKubernetes,
			`{"name":"plat","version":"1.30","nodeGroups":[{"name":"system","instanceType":"Standard_D2s_v5","min":1,"max":3},{"name":"old","instanceType":"Standard_D4s_v5","min":1,"max":1}]}`,
			`{"name":"plat","version":"1.31","nodeGroups":[{"name":"system","instanceType":"Standard_D2s_v5","min":1,"max":5},{"name":"new","instanceType":"Standard_D4s_v5","min":0,"max":2}]}`,
			func(c *Client, _ *job.Job) updater {
				return kubernetes.New(func(context.Context, *job.Job) (kubernetes.Driver, error) { return KubernetesDriver{C: c}, nil }, nil, time.Millisecond).WithUpdates(Name)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			cloud := azurefake.New(t)
			c, err := Open(Account{AuthMethod: AuthNone, SubscriptionID: azurefake.Subscription, Location: "westeurope", ResourceGroup: "rg-plan",
				Endpoint: cloud.URL, Transport: azurefake.Transport(cloud.URL), KeyVaultURL: testVault, Poll: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			j := &job.Job{ID: "job_upd" + string(tc.family)[:4], OrgID: "org_plan", SpaceID: "spc_plan", Kind: job.KindProvisioning, Family: tc.family, Provider: Name,
				Mode: job.ModeCreate, Config: json.RawMessage(tc.config), Infra: json.RawMessage(`{}`)}
			pl := tc.build(c, j)
			if err := pl.Validate(ctx, j); err != nil {
				t.Fatal(err)
			}
			steps := pl.Steps(j)
			for _, s := range steps {
				drivertest.RunStep(ctx, t, j, s, false, nil)
			}
			j.Status, j.Steps = job.StatusCompleted, nil
			for _, s := range steps {
				j.Steps = append(j.Steps, job.StepRecord{Name: s.Name, Status: job.StepDone})
			}
			up, err := pl.PlanUpdate(ctx, j, pipeline.UpdateRequest{Config: json.RawMessage(tc.next)})
			if err != nil {
				t.Fatal(err)
			}
			if len(up.Rerun) == 0 {
				t.Fatalf("the update re-runs nothing: %+v", up)
			}
			j.Config, j.Steps = up.Config, up.Steps
			src := (&Module{}).PlanSource()
			names := make([]string, 0, len(steps))
			for _, s := range pl.Steps(j) {
				names = append(names, s.Name)
			}
			planned, err := src.Steps(ctx, j, names)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range pl.Steps(j) {
				if !slices.Contains(up.Rerun, s.Name) {
					continue
				}
				mark := cloud.Mark()
				drivertest.RunStep(ctx, t, j, s, false, nil)
				i := slices.Index(names, s.Name)
				for _, a := range cloud.ActionsSince(mark) {
					if !slices.Contains(planned[i].Operations, a) {
						t.Errorf("%s: the update called %s, which the plan does not list", s.Name, a)
					}
				}
			}
		})
	}
}
