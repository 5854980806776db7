package azure

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
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

// RoleAKSClusterAdmin is Azure's built-in Azure Kubernetes Service RBAC Cluster Admin role:
// what the account's principal holds on a cluster it made, so that its tokens (ClusterToken)
// may install the cluster's components, as EKS gives a cluster's creator.
const RoleAKSClusterAdmin = "b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b"

// Keys of a job's role assignments, from which their names derive.
const (
	keyNetworkContributor = "network-contributor"
	keyClusterAdmin       = "cluster-admin"
)

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
	if err := d.ensureAssignment(ctx, j, grant{key: keyNetworkContributor, role: RoleNetworkContributor, scope: scope, principal: principal,
		principalType: to.Ptr(armauthorization.PrincipalTypeServicePrincipal)}); err != nil {
		return kubernetes.Roles{}, err
	}
	return kubernetes.Roles{ClusterRole: *identity.ID}, nil
}

// grant is a role assignment a job makes: role (a built-in role's id) for a principal at
// scope, under the job's assignment name for key.
type grant struct {
	key, role, scope, principal string
	// principalType, when set, lets Azure accept a principal that Entra ID has not
	// replicated yet, which a managed identity made a moment ago often is.
	principalType *armauthorization.PrincipalType
}

// ensureAssignment makes g. An assignment of its name for another principal is refused as
// not the job's.
func (d KubernetesDriver) ensureAssignment(ctx context.Context, j *job.Job, g grant) error {
	ras, err := armauthorization.NewRoleAssignmentsClient(d.C.SubscriptionID, d.C.cred, d.C.opts)
	if err != nil {
		return fault.System(err)
	}
	scopeArg, raName := strings.TrimPrefix(g.scope, "/"), assignmentName(j, g.key)
	got, err := ras.Get(ctx, scopeArg, raName, nil)
	switch {
	case err == nil:
		if p := got.Properties; p == nil || p.PrincipalID == nil || !strings.EqualFold(*p.PrincipalID, g.principal) {
			return fault.UserAction(errNotOurs, "NameTaken",
				"A role assignment with this job's name exists for another principal at "+g.scope+"; delete it, then retry.", d.C.PortalURL(g.scope))
		}
		return nil
	case !notFound(err):
		return d.assignErr(fmt.Errorf("read role assignment %s: %w", raName, err))
	}
	_, err = ras.Create(ctx, scopeArg, raName, armauthorization.RoleAssignmentCreateParameters{Properties: &armauthorization.RoleAssignmentProperties{
		PrincipalID:      to.Ptr(g.principal),
		RoleDefinitionID: to.Ptr(d.C.roleDefinitionID(g.role)),
		PrincipalType:    g.principalType,
		Description:      to.Ptr(AssignmentDescriptionPrefix + j.ID),
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
		return fault.Transient(fmt.Errorf("the principal %s is not in the directory yet: %w", g.principal, err))
	}
	return d.assignErr(fmt.Errorf("assign role %s at %s: %w", g.role, g.scope, err))
}

// deleteAssignment removes the job's assignment for key at scope; one that is gone, or that
// is not the job's, is left.
func (d KubernetesDriver) deleteAssignment(ctx context.Context, j *job.Job, key, scope string) error {
	ras, err := armauthorization.NewRoleAssignmentsClient(d.C.SubscriptionID, d.C.cred, d.C.opts)
	if err != nil {
		return fault.System(err)
	}
	scopeArg, raName := strings.TrimPrefix(scope, "/"), assignmentName(j, key)
	got, err := ras.Get(ctx, scopeArg, raName, nil)
	switch {
	case notFound(err):
		return nil
	case err != nil:
		return d.assignErr(fmt.Errorf("read role assignment %s: %w", raName, err))
	}
	if p := got.Properties; p == nil || p.Description == nil || *p.Description != AssignmentDescriptionPrefix+j.ID {
		return nil
	}
	if _, err := ras.Delete(ctx, scopeArg, raName, nil); err != nil && !notFound(err) {
		return d.assignErr(fmt.Errorf("delete role assignment %s: %w", raName, err))
	}
	return nil
}

// assignErr classifies a role assignment call's error. Refused is the common case: Contributor,
// the role the account otherwise needs, may not assign roles.
func (d KubernetesDriver) assignErr(err error) error {
	var re *azcore.ResponseError
	if errors.As(err, &re) && (re.StatusCode == http.StatusForbidden || deniedCodes[re.ErrorCode]) {
		return fault.UserAction(err, orCode(re.ErrorCode, "AuthorizationFailed"),
			"The account's principal may not assign roles, which a cluster needs (its identity on the nodes' subnet, the account on the cluster); give it Role Based Access Control Administrator (or User Access Administrator) on the resource group "+d.C.ResourceGroup+", then retry the job.",
			d.C.PortalURL("/subscriptions/"+d.C.SubscriptionID+"/resourceGroups/"+d.C.ResourceGroup)+"/users")
	}
	return d.C.Classify(err)
}

// DeleteRoles implements kubernetes.Driver: the role assignment, then the identity. Either
// being gone already is success; what is not the job's is left alone.
func (d KubernetesDriver) DeleteRoles(ctx context.Context, j *job.Job) error {
	scope, err := d.roleScope(j)
	if err != nil {
		return err
	}
	if err := d.deleteAssignment(ctx, j, keyNetworkContributor, scope); err != nil {
		return err
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

// callerObjectID is the object id of the account's principal, as Entra ID names it in the
// account's tokens (the oid claim): the principal that role assignments for the account
// itself are for.
func (c *Client) callerObjectID(ctx context.Context) (string, error) {
	aud := c.opts.Cloud.Services[cloud.ResourceManager].Audience
	if aud == "" {
		aud = cloud.AzurePublic.Services[cloud.ResourceManager].Audience
	}
	tok, err := c.cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{strings.TrimSuffix(aud, "/") + "/.default"}})
	if err != nil {
		return "", c.Classify(fmt.Errorf("token of the account: %w", err))
	}
	parts := strings.Split(tok.Token, ".")
	if len(parts) != 3 {
		return "", fault.System(errors.New("the account's token is not a JWT; its principal cannot be told"))
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return "", fault.System(fmt.Errorf("the account's token: %w", err))
	}
	var claims struct {
		OID string `json:"oid"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.OID == "" {
		return "", fault.System(fmt.Errorf("the account's token names no principal (oid): %v", err))
	}
	return claims.OID, nil
}
