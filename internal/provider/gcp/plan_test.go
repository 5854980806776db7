package gcp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/dnszone"
	"github.com/groundworkhq/groundwork/internal/pipeline/registry"
	"github.com/groundworkhq/groundwork/internal/plan"
	"github.com/groundworkhq/groundwork/internal/provider/gcp/gcpfake"
)

// runMarked runs every step's Do, then every Undo in reverse, each until it is done, and
// returns the permissions each step's calls needed, as gcpfake notes them.
func runMarked(ctx context.Context, t *testing.T, cloud *gcpfake.Cloud, j *job.Job, steps []pipeline.Step) map[string][]string {
	t.Helper()
	seen := map[string][]string{}
	for _, undo := range []bool{false, true} {
		for i := range steps {
			s := steps[i]
			if undo {
				s = steps[len(steps)-1-i]
			}
			fn := s.Do
			if undo {
				fn = s.Undo
			}
			if fn == nil {
				continue
			}
			mark := cloud.Mark()
			for attempt := 1; ; attempt++ {
				res, err := fn(ctx, &pipeline.Run{Job: j, Step: s.Name, Attempt: attempt})
				if err != nil && fault.ClassOf(err) != job.ClassTransient {
					t.Fatalf("step %s (undo=%v): %v", s.Name, undo, err)
				}
				if err == nil {
					if j.Infra, err = pipeline.MergeInfra(j.Infra, res.Infra); err != nil {
						t.Fatal(err)
					}
					if res.Outcome != pipeline.OutcomeWait {
						break
					}
				}
				select {
				case <-ctx.Done():
					t.Fatalf("step %s (undo=%v) not done before the deadline (last error %v)", s.Name, undo, err)
				case <-time.After(time.Millisecond):
				}
			}
			seen[s.Name] = append(seen[s.Name], cloud.PermissionsSince(mark)...)
		}
	}
	return seen
}

// Every permission a pipeline's steps were seen to need is in the plan of that step, and the
// custom role grants them all and nothing else.
func TestPlanListsEveryPermissionAPipelineCalls(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		family job.Family
		config string
		build  func(c *Client) pipeline.Pipeline
	}{
		{"registry", job.FamilyRegistry, `{"name":"team/api"}`, func(c *Client) pipeline.Pipeline {
			return registry.New(func(context.Context, *job.Job) (registry.Driver, error) { return RegistryDriver{C: c}, nil })
		}},
		{"dns_zone", job.FamilyDNSZone, `{"domain":"svc.example.org","records":[{"name":"api.svc.example.org","type":"A","values":["10.0.0.5"]},{"name":"www.svc.example.org","type":"CNAME","values":["api.svc.example.org"]}]}`,
			func(c *Client) pipeline.Pipeline {
				return dnszone.New(func(context.Context, *job.Job) (dnszone.Driver, error) { return DNSZoneDriver{C: c}, nil })
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c, cloud := testClient(t)
			j := &job.Job{ID: "job_" + strings.NewReplacer(" ", "", "_", "").Replace(tc.name), OrgID: "org_plan", SpaceID: "spc_plan",
				Kind: job.KindProvisioning, Family: tc.family, Provider: Name, Mode: job.ModeCreate, Config: json.RawMessage(tc.config), Infra: json.RawMessage(`{}`)}
			pl := tc.build(c)
			if err := pl.Validate(ctx, j); err != nil {
				t.Fatal(err)
			}
			steps := pl.Steps(j)
			seen := runMarked(ctx, t, cloud, j, steps)
			if len(cloud.PermissionsSince(0)) == 0 {
				t.Fatal("the cloud noted no permission: it is not wired")
			}
			src := (&Module{}).PlanSource()
			if !src.Knows(j) {
				t.Fatalf("the plan source does not know %s jobs", j.Family)
			}
			names := make([]string, len(steps))
			for i, s := range steps {
				names[i] = s.Name
			}
			planned, err := src.Steps(ctx, j, names)
			if err != nil {
				t.Fatal(err)
			}
			var missing []string
			for i, s := range steps {
				for _, pm := range seen[s.Name] {
					if !slices.Contains(planned[i].Operations, pm) {
						missing = append(missing, fmt.Sprintf("%s: %s", s.Name, pm))
					}
				}
			}
			sort.Strings(missing)
			if len(missing) > 0 {
				t.Fatalf("permissions needed but not in the plan:\n%s", strings.Join(slices.Compact(missing), "\n"))
			}
			all := (&plan.Plan{Steps: planned}).Operations()
			pol, err := src.Policy(j, all)
			if err != nil {
				t.Fatal(err)
			}
			var role CustomRole
			if err := json.Unmarshal(pol.Document, &role); err != nil || pol.Format != plan.FormatGCP {
				t.Fatalf("policy %s %s: %v", pol.Format, pol.Document, err)
			}
			for _, pm := range cloud.PermissionsSince(0) {
				if !slices.Contains(role.IncludedPermissions, pm) {
					t.Errorf("the custom role does not include %s", pm)
				}
			}
			if !slices.Equal(role.IncludedPermissions, plan.SortedUnique(all)) {
				t.Errorf("the custom role holds %v, the plan %v", role.IncludedPermissions, all)
			}
		})
	}
}

func TestPolicyRefusesWhatIsNotAPermission(t *testing.T) {
	t.Parallel()
	j := &job.Job{ID: "job_pol", Family: job.FamilyRegistry, Provider: Name}
	if _, err := (PlanSource{}).Policy(j, []string{"artifactregistry.repositories.create", "Microsoft.Cache/redis/write"}); err == nil {
		t.Fatal("an Azure action made it into a GCP custom role")
	}
}
