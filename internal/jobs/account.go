package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/plan"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// Plan plans j (laid out, its steps recorded) in its space's region. A space that is gone is
// refused as not found.
func (s *Service) Plan(ctx context.Context, j *job.Job) (*plan.Plan, error) {
	sp, err := s.space(ctx, j)
	if err != nil {
		return nil, err
	}
	return s.planIn(ctx, j, sp)
}

func (s *Service) planIn(ctx context.Context, j *job.Job, sp *store.Space) (*plan.Plan, error) {
	names := make([]string, len(j.Steps))
	for i, st := range j.Steps {
		names[i] = st.Name
	}
	var planner Planner = &plan.Planner{}
	if s.Planner != nil {
		planner = s.Planner
	}
	return planner.Plan(ctx, j, sp.Region, names)
}

// space reads j's space; one that is gone is refused as not found.
func (s *Service) space(ctx context.Context, j *job.Job) (*store.Space, error) {
	sp, err := s.Store.GetSpace(ctx, j.OrgID, j.SpaceID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &Refusal{Reason: NotFound, Detail: "space not found", Err: err}
	}
	return sp, err
}

// checkAccount refuses j, before it is stored or started, when its space's cloud account is
// read-only and the job's plan calls operations a read-only grant does not cover; the fix
// hint lists them with the least-privilege policy that grants them. A family whose
// operations the plan cannot list is refused on a read-only account as before, with the
// provider's broad policy.
func (s *Service) checkAccount(ctx context.Context, j *job.Job, sp *store.Space) error {
	if sp.CloudAccountID == "" {
		return nil
	}
	acc, err := s.Store.GetCloudAccount(ctx, j.OrgID, sp.CloudAccountID)
	if errors.Is(err, store.ErrNotFound) {
		return nil // the job fails at its first step with the account's absence named
	}
	if err != nil {
		return err
	}
	if acc.PermissionLevel != "read_only" {
		return nil
	}
	pl, err := s.planIn(ctx, j, sp)
	if err != nil {
		return err
	}
	if !pl.OperationsKnown {
		if j.Mode == job.ModeCreate {
			return readOnlyRefusal(acc)
		}
		return nil
	}
	missing := pl.NotGranted()
	if len(missing) == 0 {
		return nil
	}
	return &Refusal{Reason: Forbidden,
		Detail: fmt.Sprintf("cloud account %s is read_only; this job calls %d operations it does not grant", acc.ID, len(missing)),
		Fields: []validation.FieldError{{Field: "spaceID", Rule: "permissionLevel",
			Message: "the space's cloud account " + acc.ID + " is read_only and does not grant " + strings.Join(missing, ", ")}},
		FixHint: fmt.Sprintf("Grant the account's principal these actions, then set its permissionLevel to read_write: %s. The least-privilege %s that covers this job: %s",
			strings.Join(missing, ", "), pl.Policy.Format, pl.Policy.Document)}
}

// RequireReadWrite refuses any job on sp when its cloud account is read-only, whatever the
// job calls: the rule for jobs no plan lists the operations of (remediation workflows). An
// account that is gone is not refused here; the job fails on its absence.
func (s *Service) RequireReadWrite(ctx context.Context, orgID string, sp *store.Space) error {
	if sp.CloudAccountID == "" {
		return nil
	}
	acc, err := s.Store.GetCloudAccount(ctx, orgID, sp.CloudAccountID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if acc.PermissionLevel == "read_only" {
		return readOnlyRefusal(acc)
	}
	return nil
}

// readOnlyRefusal is the answer to provisioning on a read-only account: the exact policy to
// grant, so the fix is one copy and paste.
func readOnlyRefusal(a *store.CloudAccount) *Refusal {
	instruction, doc := UpgradePolicy(a.Provider)
	return &Refusal{Reason: Forbidden, Detail: "cloud account " + a.ID + " is read_only; provisioning needs read_write",
		Fields:  []validation.FieldError{{Field: "spaceID", Rule: "permissionLevel", Message: "the space's cloud account " + a.ID + " is read_only"}},
		FixHint: strings.TrimSpace(instruction + " " + string(doc))}
}

// UpgradePolicy is what to grant an account's principal so that Groundwork may provision with
// it: an instruction and the exact policy document, per provider.
func UpgradePolicy(provider string) (string, json.RawMessage) {
	switch provider {
	case "aws":
		return "Attach this IAM policy to the account's principal, then set permissionLevel to read_write:",
			json.RawMessage(`{"Version":"2012-10-17","Statement":[{"Sid":"GroundworkProvision","Effect":"Allow","Action":["ec2:*","eks:*","rds:*","elasticache:*","ecr:*","elasticloadbalancing:*","autoscaling:*","route53:*","secretsmanager:*","iam:CreateRole","iam:DeleteRole","iam:GetRole","iam:PassRole","iam:AttachRolePolicy","iam:DetachRolePolicy","iam:TagRole","iam:CreateServiceLinkedRole","iam:CreateInstanceProfile","iam:DeleteInstanceProfile","iam:AddRoleToInstanceProfile","iam:RemoveRoleFromInstanceProfile"],"Resource":"*"}]}`)
	case "gcp":
		return "Grant these roles to the account's service account on the project, then set permissionLevel to read_write:",
			json.RawMessage(`{"bindings":[{"role":"roles/compute.admin"},{"role":"roles/container.admin"},{"role":"roles/cloudsql.admin"},{"role":"roles/redis.admin"},{"role":"roles/artifactregistry.admin"},{"role":"roles/dns.admin"},{"role":"roles/secretmanager.admin"},{"role":"roles/servicenetworking.networksAdmin"},{"role":"roles/iam.serviceAccountAdmin"},{"role":"roles/iam.serviceAccountUser"},{"role":"roles/resourcemanager.projectIamAdmin"}]}`)
	case "azure":
		return "Assign this role to the account's principal on the subscription, then set permissionLevel to read_write:",
			json.RawMessage(`{"roleDefinitionName":"Contributor","principalType":"ServicePrincipal","scope":"/subscriptions/<subscriptionId>"}`)
	}
	return "Set the account's permissionLevel to read_write.", nil
}
