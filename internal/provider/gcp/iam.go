package gcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	crm "google.golang.org/api/cloudresourcemanager/v3"
	"google.golang.org/api/googleapi"
	iam "google.golang.org/api/iam/v1"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
)

// roleNodes is the label role (and name role) of a cluster's nodes' service account.
const roleNodes = "nodes"

// NodeRoles are the predefined roles a cluster's nodes' service account holds on the
// project, and nothing more: what GKE's own guidance gives a node account (logs, metrics,
// the resource metadata the agents write) in one role, and the pulling of images from the
// project's Artifact Registry repositories. A node account with Editor, as the Compute
// Engine default account has, would give every pod on the node the project.
var NodeRoles = []string{"roles/container.defaultNodeServiceAccount", "roles/artifactregistry.reader"}

// policyTries bounds the read-modify-write of the project's IAM policy when another change
// races it (409 ABORTED on a stale etag) within one call.
const policyTries = 4

// account is a service account a job makes, and the project roles it holds.
type account struct {
	role  string
	roles []string
}

// accounts are the service accounts of a cluster job. GKE's control plane runs as Google's
// own service agent (service-<project number>@container-engine-robot.iam.gserviceaccount.com),
// which the Kubernetes Engine API gets when it is enabled; a cluster job makes only its
// nodes' account.
var accounts = []account{{role: roleNodes, roles: NodeRoles}}

// saEmail is the email of j's service account in role. Its account id, name(j, role), is
// 6 to 30 characters as IAM requires: "gw-", at most 12 of the job's id, "-", the role.
func (c *Client) saEmail(j *job.Job, role string) string {
	return name(j, role) + "@" + c.ProjectID + ".iam.gserviceaccount.com"
}

func (c *Client) iamService(ctx context.Context) (*iam.Service, error) {
	s, err := iam.NewService(ctx, c.Options(ServiceIAM)...)
	if err != nil {
		return nil, fault.System(err)
	}
	return s, nil
}

func (c *Client) crmService(ctx context.Context) (*crm.Service, error) {
	s, err := crm.NewService(ctx, c.Options(ServiceResourceManager)...)
	if err != nil {
		return nil, fault.System(err)
	}
	return s, nil
}

// EnsureRoles implements kubernetes.Driver: the nodes' service account, and its roles in the
// project's IAM policy. IAM answers both at once, so one call makes them. NodeRole is the
// account's email; ClusterRole is empty, as GKE's control plane acts as Google's service
// agent and needs nothing of the job.
func (d KubernetesDriver) EnsureRoles(ctx context.Context, j *job.Job) (kubernetes.Roles, error) {
	s, err := d.C.iamService(ctx)
	if err != nil {
		return kubernetes.Roles{}, err
	}
	var out kubernetes.Roles
	for _, a := range accounts {
		email, err := d.C.ensureAccount(ctx, s, j, a.role)
		if err != nil {
			return kubernetes.Roles{}, err
		}
		if err := d.C.editPolicy(ctx, func(p *crm.Policy) bool { return grantAll(p, a.roles, "serviceAccount:"+email) }); err != nil {
			return kubernetes.Roles{}, err
		}
		if a.role == roleNodes {
			out.NodeRole = email
		}
	}
	return out, nil
}

// ensureAccount makes j's service account in role, or finds it. One of its name without the
// job's description is someone else's, and refused.
func (c *Client) ensureAccount(ctx context.Context, s *iam.Service, j *job.Job, role string) (string, error) {
	email := c.saEmail(j, role)
	full := "projects/" + c.ProjectID + "/serviceAccounts/" + email
	sa, err := s.Projects.ServiceAccounts.Get(full).Context(ctx).Do()
	if notFound(err) {
		display := "Groundwork " + role + " of job " + j.ID
		if len(display) > 100 {
			display = display[:100]
		}
		sa, err = s.Projects.ServiceAccounts.Create("projects/"+c.ProjectID, &iam.CreateServiceAccountRequest{
			AccountId:      name(j, role),
			ServiceAccount: &iam.ServiceAccount{DisplayName: display, Description: description(j, string(j.Family)+"-"+role)},
		}).Context(ctx).Do()
		if conflict(err) {
			// Made meanwhile (a create whose answer was lost): read it as it is. IAM may
			// not answer reads of a new account for a few seconds.
			sa, err = s.Projects.ServiceAccounts.Get(full).Context(ctx).Do()
			if notFound(err) {
				return "", fault.Transient(fmt.Errorf("service account %s is not readable yet: %w", email, err))
			}
		}
	}
	if err != nil {
		return "", c.iamErr(fmt.Errorf("service account %s: %w", email, err))
	}
	if !ownsDescription(j, sa.Description) {
		return "", fault.UserAction(errNotOurs, "NameTaken",
			"A service account "+email+" exists without this job's description; delete it, then retry the job.",
			c.ConsoleURL("iam-admin/serviceaccounts"))
	}
	return sa.Email, nil
}

// editPolicy changes the project's IAM policy with edit, which reports whether it changed
// anything: a read, the edit, and a write carrying the read's etag. A write refused because
// another change came between (409 ABORTED) is tried again from the read.
func (c *Client) editPolicy(ctx context.Context, edit func(*crm.Policy) bool) error {
	s, err := c.crmService(ctx)
	if err != nil {
		return err
	}
	resource := "projects/" + c.ProjectID
	for try := 0; try < policyTries; try++ {
		p, err := s.Projects.GetIamPolicy(resource, &crm.GetIamPolicyRequest{
			Options: &crm.GetPolicyOptions{RequestedPolicyVersion: 3}}).Context(ctx).Do()
		if err != nil {
			return c.iamErr(fmt.Errorf("read the IAM policy of project %s: %w", c.ProjectID, err))
		}
		if !edit(p) {
			return nil
		}
		// Version 3 keeps the conditions of others' conditional bindings as they are.
		p.Version = 3
		_, err = s.Projects.SetIamPolicy(resource, &crm.SetIamPolicyRequest{Policy: p}).Context(ctx).Do()
		switch {
		case err == nil:
			return nil
		case conflict(err):
			continue
		case accountNotYetVisible(err):
			// IAM makes a new account visible to policies a little after it answers its
			// create; the engine tries the step again.
			return fault.Transient(fmt.Errorf("set the IAM policy of project %s: %w", c.ProjectID, err))
		}
		return c.iamErr(fmt.Errorf("set the IAM policy of project %s: %w", c.ProjectID, err))
	}
	return fault.Transientf("the IAM policy of project %s changed under each of %d writes", c.ProjectID, policyTries)
}

// accountNotYetVisible reports a policy write refused for naming a service account that
// IAM does not know (yet).
func accountNotYetVisible(err error) bool {
	var ge *googleapi.Error
	return errors.As(err, &ge) && ge.Code == http.StatusBadRequest && strings.Contains(ge.Message, "does not exist")
}

// grantAll adds member to the unconditional binding of each of roles; it reports whether it
// added any.
func grantAll(p *crm.Policy, roles []string, member string) bool {
	changed := false
	for _, role := range roles {
		var b *crm.Binding
		for _, have := range p.Bindings {
			if have.Role == role && have.Condition == nil {
				b = have
				break
			}
		}
		if b == nil {
			b = &crm.Binding{Role: role}
			p.Bindings = append(p.Bindings, b)
		}
		if !slices.Contains(b.Members, member) {
			b.Members = append(b.Members, member)
			changed = true
		}
	}
	return changed
}

// revokeAll removes the account email from the unconditional bindings of roles, under its
// own member name or the one IAM gives it once it is deleted
// ("deleted:serviceAccount:<email>?uid=<id>"), and drops the bindings it empties. Other
// members of those bindings, and other roles, stay. It reports whether it removed any.
func revokeAll(p *crm.Policy, roles []string, email string) bool {
	changed := false
	kept := p.Bindings[:0]
	for _, b := range p.Bindings {
		if slices.Contains(roles, b.Role) && b.Condition == nil {
			n := len(b.Members)
			b.Members = slices.DeleteFunc(b.Members, func(m string) bool {
				return m == "serviceAccount:"+email || strings.HasPrefix(m, "deleted:serviceAccount:"+email+"?uid=")
			})
			changed = changed || len(b.Members) != n
			if len(b.Members) == 0 {
				continue
			}
		}
		kept = append(kept, b)
	}
	p.Bindings = kept
	return changed
}

// DeleteRoles implements kubernetes.Driver: the job's bindings leave the project's policy,
// then its service accounts are deleted. An account of the job's name that is not the job's
// is left with whatever it holds.
func (d KubernetesDriver) DeleteRoles(ctx context.Context, j *job.Job) error {
	return d.C.deleteAccounts(ctx, j, accounts)
}

// deleteAccounts removes j's service accounts in accts: their roles' bindings first, then
// the accounts. An account of the job's name that is not the job's is left as it is.
func (c *Client) deleteAccounts(ctx context.Context, j *job.Job, accts []account) error {
	s, err := c.iamService(ctx)
	if err != nil {
		return err
	}
	for _, a := range accts {
		email := c.saEmail(j, a.role)
		full := "projects/" + c.ProjectID + "/serviceAccounts/" + email
		sa, err := s.Projects.ServiceAccounts.Get(full).Context(ctx).Do()
		switch {
		case notFound(err):
		case err != nil:
			return c.iamErr(fmt.Errorf("service account %s: %w", email, err))
		case !ownsDescription(j, sa.Description):
			continue
		}
		if err := c.editPolicy(ctx, func(p *crm.Policy) bool { return revokeAll(p, a.roles, email) }); err != nil {
			return err
		}
		if sa == nil {
			continue
		}
		if _, err := s.Projects.ServiceAccounts.Delete(full).Context(ctx).Do(); err != nil && !notFound(err) {
			return c.iamErr(fmt.Errorf("delete service account %s: %w", email, err))
		}
	}
	return nil
}

// iamErr classifies an IAM or policy call's error; a refusal names the roles the account's
// principal needs for a cluster's accounts.
func (c *Client) iamErr(err error) error {
	var ge *googleapi.Error
	if errors.As(err, &ge) && ge.Code == http.StatusForbidden && !reasonsOf(ge).any("SERVICE_DISABLED", "accessNotConfigured", "BILLING_DISABLED") {
		return fault.UserAction(err, "PermissionDenied",
			"The account's principal may not make service accounts or grant them roles, which a cluster's nodes need; give it Service Account Admin (roles/iam.serviceAccountAdmin) and Project IAM Admin (roles/resourcemanager.projectIamAdmin) on project "+c.ProjectID+", then retry the job.",
			c.ConsoleURL("iam-admin/iam"))
	}
	return c.Classify(err)
}
