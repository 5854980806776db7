package azure

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
)

// RoleNetworkContributor is Azure's built-in Network Contributor role: what an AKS control
// plane needs on its nodes' subnet to join load balancers and NICs to it.
const RoleNetworkContributor = "4d97b98b-1d4f-4787-a291-c67834d212e7"

// AssignmentDescriptionPrefix starts the description of every role assignment a job makes;
// the job's id follows. A role assignment has no tags, so this is how it names its job.
const AssignmentDescriptionPrefix = "groundwork job "

// assignmentName is the name of j's role assignment in role. Azure requires a GUID; one
// derived from the job keeps a re-sent PUT the same assignment. It has the form of a
// name-based UUID (version 5: SHA-1 there, SHA-256 truncated here, which Azure does not check).
func assignmentName(j *job.Job, role string) string {
	s := sha256.Sum256([]byte("groundwork/" + j.ID + "/" + role))
	b := s[:16]
	b[6] = b[6]&0x0f | 0x50
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// roleScope is the scope of the control plane's Network Contributor assignment: the job's
// own private subnet, or for an adopted network the first subnet the config names (the
// cluster's), or the adopted virtual network as a whole when it names none.
func (d KubernetesDriver) roleScope(j *job.Job) (string, error) {
	cfg, err := kubernetes.DecodeConfig(j.Config)
	if err != nil {
		return "", fault.UserAction(err, "InvalidConfig", err.Error(), "")
	}
	switch {
	case cfg.VPCID == "":
		return d.C.vnetID(j) + "/subnets/" + SubnetPrivate, nil
	case len(cfg.SubnetIDs) > 0:
		return cfg.SubnetIDs[0], nil
	}
	return cfg.VPCID, nil
}

func (c *Client) vnetID(j *job.Job) string {
	return "/subscriptions/" + c.SubscriptionID + "/resourceGroups/" + c.ResourceGroup + "/providers/Microsoft.Network/virtualNetworks/" + name(j, "vnet")
}

func (c *Client) roleDefinitionID(role string) string {
	return "/subscriptions/" + c.SubscriptionID + "/providers/Microsoft.Authorization/roleDefinitions/" + role
}

// EnsureRoles implements kubernetes.Driver: the control plane's user-assigned managed
// identity, and its Network Contributor assignment on the cluster's subnet. Both are
// synchronous calls on Azure, so one call makes them. ClusterRole is the identity's resource
// id; NodeRole is empty, as AKS makes the kubelet identity itself.
func (d KubernetesDriver) EnsureRoles(ctx context.Context, j *job.Job) (kubernetes.Roles, error) {
	scope, err := d.roleScope(j)
	if err != nil {
		return kubernetes.Roles{}, err
	}
	if err := d.C.EnsureGroup(ctx, j.SpaceID); err != nil {
		return kubernetes.Roles{}, err
	}
	ids, err := armmsi.NewUserAssignedIdentitiesClient(d.C.SubscriptionID, d.C.cred, d.C.opts)
	if err != nil {
		return kubernetes.Roles{}, fault.System(err)
	}
	rg, idName := d.C.ResourceGroup, name(j, "identity")
	got, err := ids.Get(ctx, rg, idName, nil)
	st, err := stateOf(err, got.Tags, got.Properties, j)
	if err != nil {
		return kubernetes.Roles{}, d.C.Classify(err)
	}
	identity := got.Identity
	if !st.Found {
		made, err := ids.CreateOrUpdate(ctx, rg, idName, armmsi.Identity{Location: to.Ptr(d.C.Location), Tags: tags(j, "identity")}, nil)
		if err != nil {
			return kubernetes.Roles{}, d.C.Classify(fmt.Errorf("create managed identity %s: %w", idName, err))
		}
		identity = made.Identity
	}
	if identity.ID == nil || identity.Properties == nil || identity.Properties.PrincipalID == nil {
		return kubernetes.Roles{}, fault.Transientf("managed identity %s has no principal yet", idName)
	}
	principal := *identity.Properties.PrincipalID
	if err := d.ensureAssignment(ctx, j, scope, principal); err != nil {
		return kubernetes.Roles{}, err
	}
	return kubernetes.Roles{ClusterRole: *identity.ID}, nil
}

// ensureAssignment gives principal Network Contributor at scope, under the job's assignment
// name. An assignment of that name for another principal is refused as not the job's.
func (d KubernetesDriver) ensureAssignment(ctx context.Context, j *job.Job, scope, principal string) error {
	ras, err := armauthorization.NewRoleAssignmentsClient(d.C.SubscriptionID, d.C.cred, d.C.opts)
	if err != nil {
		return fault.System(err)
	}
	scopeArg, raName := strings.TrimPrefix(scope, "/"), assignmentName(j, "network-contributor")
	got, err := ras.Get(ctx, scopeArg, raName, nil)
	switch {
	case err == nil:
		if p := got.Properties; p == nil || p.PrincipalID == nil || !strings.EqualFold(*p.PrincipalID, principal) {
			return fault.UserAction(errNotOurs, "NameTaken",
				"A role assignment with this job's name exists for another principal at "+scope+"; delete it, then retry.", d.C.PortalURL(scope))
		}
		return nil
	case !notFound(err):
		return d.C.Classify(fmt.Errorf("read role assignment %s: %w", raName, err))
	}
	_, err = ras.Create(ctx, scopeArg, raName, armauthorization.RoleAssignmentCreateParameters{Properties: &armauthorization.RoleAssignmentProperties{
		PrincipalID:      to.Ptr(principal),
		RoleDefinitionID: to.Ptr(d.C.roleDefinitionID(RoleNetworkContributor)),
		// Naming the principal's type lets Azure accept a principal that Entra ID has not
		// replicated yet, which a managed identity made a moment ago often is.
		PrincipalType: to.Ptr(armauthorization.PrincipalTypeServicePrincipal),
		Description:   to.Ptr(AssignmentDescriptionPrefix + j.ID),
	}}, nil)
	var re *azcore.ResponseError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &re) && re.ErrorCode == "RoleAssignmentExists":
		// The principal already holds the role there (the job's own assignment, made by a
		// call whose answer was lost and now read under way): what is needed is in place.
		return nil
	case errors.As(err, &re) && re.StatusCode == http.StatusBadRequest && re.ErrorCode == "PrincipalNotFound":
		return fault.Transient(fmt.Errorf("the managed identity is not in the directory yet: %w", err))
	}
	return d.C.Classify(fmt.Errorf("assign Network Contributor at %s: %w", scope, err))
}

// DeleteRoles implements kubernetes.Driver: the role assignment, then the identity. Either
// being gone already is success; what is not the job's is left alone.
func (d KubernetesDriver) DeleteRoles(ctx context.Context, j *job.Job) error {
	scope, err := d.roleScope(j)
	if err != nil {
		return err
	}
	ras, err := armauthorization.NewRoleAssignmentsClient(d.C.SubscriptionID, d.C.cred, d.C.opts)
	if err != nil {
		return fault.System(err)
	}
	scopeArg, raName := strings.TrimPrefix(scope, "/"), assignmentName(j, "network-contributor")
	got, err := ras.Get(ctx, scopeArg, raName, nil)
	switch {
	case err == nil:
		if p := got.Properties; p != nil && p.Description != nil && *p.Description == AssignmentDescriptionPrefix+j.ID {
			if _, err := ras.Delete(ctx, scopeArg, raName, nil); err != nil && !notFound(err) {
				return d.C.Classify(fmt.Errorf("delete role assignment %s: %w", raName, err))
			}
		}
	case !notFound(err):
		return d.C.Classify(fmt.Errorf("read role assignment %s: %w", raName, err))
	}
	ids, err := armmsi.NewUserAssignedIdentitiesClient(d.C.SubscriptionID, d.C.cred, d.C.opts)
	if err != nil {
		return fault.System(err)
	}
	idName := name(j, "identity")
	v, err := ids.Get(ctx, d.C.ResourceGroup, idName, nil)
	st, err := stateOf(err, v.Tags, v.Properties, j)
	if err != nil || !st.Found {
		return d.C.Classify(err)
	}
	if _, err := ids.Delete(ctx, d.C.ResourceGroup, idName, nil); err != nil && !notFound(err) {
		return d.C.Classify(fmt.Errorf("delete managed identity %s: %w", idName, err))
	}
	return nil
}
