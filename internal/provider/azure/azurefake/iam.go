package azurefake

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	authfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	msifake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi/fake"
)

// Tenant is the directory the subscription's identities belong to.
const Tenant = "00000000-0000-0000-0000-0000000074e1"

// Caller is the principal (object id) of the clients that reach the fake: the Azure module's
// test-target credential names it in its token. Role assignments may name it.
const Caller = "00000000-0000-0000-0000-00000000ca11"

const (
	typeIdentity   = "Microsoft.ManagedIdentity/userAssignedIdentities"
	typeAssignment = "Microsoft.Authorization/roleAssignments"
)

var guidPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// newGUID is a random (version 4) UUID, as Azure gives identities' principal and client ids.
func newGUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Raw is the stored JSON of the resource at id, as a GET would answer it.
func (c *Cloud) Raw(id string) (json.RawMessage, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	raw, ok := c.objs[strings.ToLower(id)]
	return raw, ok
}

// iamServers keep user-assigned managed identities and role assignments. An identity keeps
// its principal and client ids across PUTs; a role assignment is made once (Azure does not
// update one) at a scope that exists, for a principal that exists.
func (c *Cloud) iamServers() []route {
	msi := &msifake.ServerFactory{UserAssignedIdentitiesServer: msifake.UserAssignedIdentitiesServer{
		CreateOrUpdate: func(_ context.Context, rg, name string, p armmsi.Identity, _ *armmsi.UserAssignedIdentitiesClientCreateOrUpdateOptions) (resp azfake.Responder[armmsi.UserAssignedIdentitiesClientCreateOrUpdateResponse], errResp azfake.ErrorResponder) {
			id := armID(rg, typeIdentity, name)
			status := http.StatusCreated
			if _, ok := c.Raw(id); ok {
				status = http.StatusOK
			}
			v, r := store[armmsi.UserAssignedIdentitiesClientCreateOrUpdateResponse](c, rg, id, typeIdentity, p, func(props map[string]any) {
				// An identity has no provisioningState; its ids are Azure's, made once.
				delete(props, "provisioningState")
				var prev struct {
					Properties map[string]any `json:"properties"`
				}
				_ = json.Unmarshal(c.objs[strings.ToLower(id)], &prev) // store holds c.mu
				for _, k := range []string{"principalId", "clientId"} {
					if v, ok := prev.Properties[k]; ok {
						props[k] = v
					} else {
						props[k] = newGUID()
					}
				}
				props["tenantId"] = Tenant
			})
			if r != nil {
				r.into(&errResp)
				return
			}
			resp.SetResponse(status, v, nil)
			return
		},
		Get: func(_ context.Context, rg, name string, _ *armmsi.UserAssignedIdentitiesClientGetOptions) (azfake.Responder[armmsi.UserAssignedIdentitiesClientGetResponse], azfake.ErrorResponder) {
			return getter[armmsi.UserAssignedIdentitiesClientGetResponse](c, armID(rg, typeIdentity, name))
		},
		Delete: func(_ context.Context, rg, name string, _ *armmsi.UserAssignedIdentitiesClientDeleteOptions) (resp azfake.Responder[armmsi.UserAssignedIdentitiesClientDeleteResponse], errResp azfake.ErrorResponder) {
			found, r := c.remove(armID(rg, typeIdentity, name), "")
			if r != nil {
				r.into(&errResp)
				return
			}
			if !found {
				resp.SetResponse(http.StatusNoContent, armmsi.UserAssignedIdentitiesClientDeleteResponse{}, nil)
				return
			}
			resp.SetResponse(http.StatusOK, armmsi.UserAssignedIdentitiesClientDeleteResponse{}, nil)
			return
		},
	}}
	auth := &authfake.ServerFactory{RoleAssignmentsServer: authfake.RoleAssignmentsServer{
		Create: func(_ context.Context, scope, name string, p armauthorization.RoleAssignmentCreateParameters, _ *armauthorization.RoleAssignmentsClientCreateOptions) (resp azfake.Responder[armauthorization.RoleAssignmentsClientCreateResponse], errResp azfake.ErrorResponder) {
			scope = "/" + strings.Trim(scope, "/")
			id := scope + "/providers/" + typeAssignment + "/" + name
			if !guidPattern.MatchString(name) {
				errResp.SetResponseError(http.StatusBadRequest, "InvalidRoleAssignmentId")
				return
			}
			if p.Properties == nil || p.Properties.PrincipalID == nil || p.Properties.RoleDefinitionID == nil {
				errResp.SetResponseError(http.StatusBadRequest, "InvalidCreateRoleAssignmentRequest")
				return
			}
			if !c.scopeExists(scope) {
				errResp.SetResponseError(http.StatusNotFound, "ResourceNotFound")
				return
			}
			if !c.principalExists(*p.Properties.PrincipalID) {
				errResp.SetResponseError(http.StatusBadRequest, "PrincipalNotFound")
				return
			}
			if code := c.assignmentConflict(id, scope, *p.Properties.PrincipalID, *p.Properties.RoleDefinitionID); code != "" {
				errResp.SetResponseError(http.StatusConflict, code)
				return
			}
			v, r := store[armauthorization.RoleAssignmentsClientCreateResponse](c, "", id, typeAssignment, p, func(props map[string]any) {
				delete(props, "provisioningState") // a role assignment has none
				props["scope"] = scope
				props["createdOn"] = time.Now().UTC().Format(time.RFC3339)
			})
			if r != nil {
				r.into(&errResp)
				return
			}
			resp.SetResponse(http.StatusCreated, v, nil)
			return
		},
		Get: func(_ context.Context, scope, name string, _ *armauthorization.RoleAssignmentsClientGetOptions) (resp azfake.Responder[armauthorization.RoleAssignmentsClientGetResponse], errResp azfake.ErrorResponder) {
			id := "/" + strings.Trim(scope, "/") + "/providers/" + typeAssignment + "/" + name
			v, ok := stored[armauthorization.RoleAssignmentsClientGetResponse](c, id)
			if !ok {
				errResp.SetResponseError(http.StatusNotFound, "RoleAssignmentNotFound")
				return
			}
			resp.SetResponse(http.StatusOK, v, nil)
			return
		},
		Delete: func(_ context.Context, scope, name string, _ *armauthorization.RoleAssignmentsClientDeleteOptions) (resp azfake.Responder[armauthorization.RoleAssignmentsClientDeleteResponse], errResp azfake.ErrorResponder) {
			id := "/" + strings.Trim(scope, "/") + "/providers/" + typeAssignment + "/" + name
			v, ok := stored[armauthorization.RoleAssignmentsClientDeleteResponse](c, id)
			if !ok {
				resp.SetResponse(http.StatusNoContent, armauthorization.RoleAssignmentsClientDeleteResponse{}, nil)
				return
			}
			c.remove(id, "")
			resp.SetResponse(http.StatusOK, v, nil)
			return
		},
	}}
	return []route{
		{prefix: "UserAssignedIdentitiesClient", tr: msifake.NewServerFactoryTransport(msi)},
		{prefix: "RoleAssignmentsClient", tr: authfake.NewServerFactoryTransport(auth)},
	}
}

// scopeExists reports whether a role assignment's scope is there: the subscription, or a
// resource it holds (a subnet is held inside its virtual network).
func (c *Cloud) scopeExists(scope string) bool {
	s := strings.ToLower(scope)
	if s == "/subscriptions/"+Subscription {
		return true
	}
	if vnet, subnet, ok := strings.Cut(s, "/subnets/"); ok {
		v, found := stored[struct {
			Properties struct {
				Subnets []struct{ Name string } `json:"subnets"`
			} `json:"properties"`
		}](c, vnet)
		if !found {
			return false
		}
		for _, sn := range v.Properties.Subnets {
			if strings.EqualFold(sn.Name, subnet) {
				return true
			}
		}
		return false
	}
	_, ok := c.Raw(s)
	return ok
}

// principalExists reports whether a principal id is the caller's or one of the subscription's
// identities'.
func (c *Cloud) principalExists(principal string) bool {
	if strings.EqualFold(principal, Caller) {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, raw := range c.objs {
		var v struct {
			Type       string
			Properties struct {
				PrincipalID string `json:"principalId"`
			} `json:"properties"`
		}
		if json.Unmarshal(raw, &v) == nil && strings.EqualFold(v.Type, typeIdentity) && strings.EqualFold(v.Properties.PrincipalID, principal) {
			return true
		}
	}
	return false
}

// assignmentConflict is Azure's refusal of a role assignment: the same principal, role and
// scope under any name (RoleAssignmentExists, also for a repeat of the same request), or the
// name taken by a different assignment (which Azure does not update).
func (c *Cloud) assignmentConflict(id, scope, principal, role string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, raw := range c.objs {
		var v struct {
			Type       string
			Properties struct {
				Scope            string `json:"scope"`
				PrincipalID      string `json:"principalId"`
				RoleDefinitionID string `json:"roleDefinitionId"`
			} `json:"properties"`
		}
		if json.Unmarshal(raw, &v) != nil || !strings.EqualFold(v.Type, typeAssignment) {
			continue
		}
		same := strings.EqualFold(v.Properties.Scope, scope) && strings.EqualFold(v.Properties.PrincipalID, principal) &&
			strings.EqualFold(v.Properties.RoleDefinitionID, role)
		switch {
		case same:
			return "RoleAssignmentExists"
		case k == strings.ToLower(id):
			return "RoleAssignmentUpdateNotPermitted"
		}
	}
	return ""
}
