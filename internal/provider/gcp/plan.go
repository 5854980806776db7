package gcp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/dnszone"
	"github.com/groundworkhq/groundwork/internal/pipeline/registry"
	"github.com/groundworkhq/groundwork/internal/plan"
)

// The permissions below are what each step's Do and Undo call, as gcpfake notes them in
// TestPlanListsEveryPermissionAPipelineCalls (which fails when a step calls one not listed
// here). Reads of long-running operations that Google authorises by the caller alone are
// not listed.

// crud is get, create and delete of each collection ("dns.managedZones").
func crud(collections ...string) []string {
	var out []string
	for _, c := range collections {
		out = append(out, c+".get", c+".create", c+".delete")
	}
	return out
}

// StepPlan is what step of j does in the project: the resources it creates or adopts and
// the IAM permissions its Do and Undo call. A step this module does not know calls nothing.
func StepPlan(j *job.Job, step string) plan.Step {
	var res []plan.Resource
	var ops []string
	create := func(typ, n string, count int) {
		res = append(res, plan.Resource{Type: typ, Action: plan.ActionCreate, Name: n, Count: count})
	}
	switch j.Family {
	case job.FamilyRegistry:
		if step == registry.StepRepository {
			create("google_artifact_registry_repository", name(j, "images"), 1)
			ops = append(ops, crud("artifactregistry.repositories")...)
		}
	case job.FamilyDNSZone:
		var c dnszone.Config
		_ = json.Unmarshal(j.Config, &c)
		switch step {
		case dnszone.StepZone:
			create("google_dns_managed_zone", name(j, "zone"), 1)
			// The teardown empties the zone of its record sets before deleting it.
			ops = append(ops, crud("dns.managedZones")...)
			ops = append(ops, "dns.resourceRecordSets.list", "dns.resourceRecordSets.delete")
		case dnszone.StepRecords:
			if len(c.Records) > 0 {
				create("google_dns_record_set", name(j, "zone"), len(c.Records))
				ops = append(ops, crud("dns.resourceRecordSets")...)
				ops = append(ops, "dns.resourceRecordSets.update")
			}
		}
	}
	return plan.NewStep(step, res, ops)
}

// PlanSource plans the jobs of GCP spaces (plan.Source).
type PlanSource struct{}

var _ plan.Source = PlanSource{}

// PlanSource implements provider.PlanSources.
func (m *Module) PlanSource() plan.Source { return PlanSource{} }

// planned are the families with a table in StepPlan.
var planned = []job.Family{job.FamilyRegistry, job.FamilyDNSZone}

// Knows implements plan.Source.
func (PlanSource) Knows(j *job.Job) bool { return slices.Contains(planned, j.Family) }

// Steps implements plan.Source.
func (PlanSource) Steps(_ context.Context, j *job.Job, names []string) ([]plan.Step, error) {
	out := make([]plan.Step, len(names))
	for i, n := range names {
		out[i] = StepPlan(j, n)
	}
	return out, nil
}

// CustomRole is a GCP custom role, as gcloud iam roles create --file takes it.
type CustomRole struct {
	Title               string   `json:"title"`
	Description         string   `json:"description"`
	Stage               string   `json:"stage"`
	IncludedPermissions []string `json:"includedPermissions"`
}

// Policy implements plan.Source: a custom role holding exactly the job's permissions, to
// grant the account's principal on the space's project.
func (PlanSource) Policy(j *job.Job, operations []string) (plan.Policy, error) {
	role := CustomRole{Title: fmt.Sprintf("Groundwork %s %s", j.Family, j.ID), Stage: "GA",
		Description:         fmt.Sprintf("What Groundwork's %s job %s calls to create and tear down its resources. Grant it on the space's project.", j.Family, j.ID),
		IncludedPermissions: []string{}}
	for _, op := range plan.SortedUnique(operations) {
		if strings.Count(op, ".") < 2 || strings.ContainsAny(op, "/ ") {
			return plan.Policy{}, fmt.Errorf("operation %q is not a GCP permission", op)
		}
		role.IncludedPermissions = append(role.IncludedPermissions, op)
	}
	doc, err := json.MarshalIndent(role, "", "  ")
	if err != nil {
		return plan.Policy{}, err
	}
	return plan.Policy{Format: plan.FormatGCP, Document: doc}, nil
}
