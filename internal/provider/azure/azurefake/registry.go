package azurefake

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerregistry/armcontainerregistry"
	acrfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerregistry/armcontainerregistry/fake"
)

const typeRegistry = "Microsoft.ContainerRegistry/registries"

// registryServers keep container registries. A registry's name is its DNS name under
// azurecr.io, so it is unique across the subscription here (across Azure there): a create of
// a name another resource group holds is refused 409 AlreadyInUse, as Azure refuses it.
func (c *Cloud) registryServers() []route {
	f := &acrfake.ServerFactory{RegistriesServer: acrfake.RegistriesServer{
		BeginCreate: func(_ context.Context, rg, name string, p armcontainerregistry.Registry, _ *armcontainerregistry.RegistriesClientBeginCreateOptions) (resp azfake.PollerResponder[armcontainerregistry.RegistriesClientCreateResponse], errResp azfake.ErrorResponder) {
			id := armID(rg, typeRegistry, name)
			if !validRegistryName(name) {
				errResp.SetResponseError(http.StatusBadRequest, "RegistryNameInvalid")
				return
			}
			for _, other := range c.named(typeRegistry, name) {
				if !strings.EqualFold(other, id) {
					errResp.SetResponseError(http.StatusConflict, "AlreadyInUse")
					return
				}
			}
			if p.SKU == nil || p.SKU.Name == nil {
				errResp.SetResponseError(http.StatusBadRequest, "InvalidRequestContent")
				return
			}
			p.SKU.Tier = to.Ptr(armcontainerregistry.SKUTier(*p.SKU.Name))
			return putter[armcontainerregistry.RegistriesClientCreateResponse](c, rg, id, typeRegistry, p, func(props map[string]any) {
				props["loginServer"] = strings.ToLower(name) + ".azurecr.io"
				if props["adminUserEnabled"] == nil {
					props["adminUserEnabled"] = false
				}
				if props["creationDate"] == nil {
					props["creationDate"] = time.Now().UTC().Format(time.RFC3339)
				}
				props["publicNetworkAccess"] = orDefaultAny(props["publicNetworkAccess"], "Enabled")
				props["zoneRedundancy"] = orDefaultAny(props["zoneRedundancy"], "Disabled")
			})
		},
		Get: func(_ context.Context, rg, name string, _ *armcontainerregistry.RegistriesClientGetOptions) (azfake.Responder[armcontainerregistry.RegistriesClientGetResponse], azfake.ErrorResponder) {
			return getter[armcontainerregistry.RegistriesClientGetResponse](c, armID(rg, typeRegistry, name))
		},
		BeginDelete: func(_ context.Context, rg, name string, _ *armcontainerregistry.RegistriesClientBeginDeleteOptions) (azfake.PollerResponder[armcontainerregistry.RegistriesClientDeleteResponse], azfake.ErrorResponder) {
			return deleter[armcontainerregistry.RegistriesClientDeleteResponse](c, armID(rg, typeRegistry, name), "")
		},
		CheckNameAvailability: func(_ context.Context, req armcontainerregistry.RegistryNameCheckRequest, _ *armcontainerregistry.RegistriesClientCheckNameAvailabilityOptions) (resp azfake.Responder[armcontainerregistry.RegistriesClientCheckNameAvailabilityResponse], errResp azfake.ErrorResponder) {
			var out armcontainerregistry.RegistryNameStatus
			name := ""
			if req.Name != nil {
				name = *req.Name
			}
			switch {
			case !validRegistryName(name):
				out = armcontainerregistry.RegistryNameStatus{NameAvailable: to.Ptr(false), Reason: to.Ptr("Invalid"),
					Message: to.Ptr("The specified resource name is invalid: 5-50 letters and digits.")}
			case len(c.named(typeRegistry, name)) > 0:
				out = armcontainerregistry.RegistryNameStatus{NameAvailable: to.Ptr(false), Reason: to.Ptr("AlreadyExists"),
					Message: to.Ptr("The registry " + name + " is already in use.")}
			default:
				out = armcontainerregistry.RegistryNameStatus{NameAvailable: to.Ptr(true)}
			}
			resp.SetResponse(http.StatusOK, armcontainerregistry.RegistriesClientCheckNameAvailabilityResponse{RegistryNameStatus: out}, nil)
			return
		},
	}}
	return []route{{prefix: "RegistriesClient", tr: acrfake.NewServerFactoryTransport(f)}}
}

// validRegistryName is ACR's rule: 5 to 50 letters and digits.
func validRegistryName(n string) bool {
	if len(n) < 5 || len(n) > 50 {
		return false
	}
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// named lists the ids of the resources of type typ named name (case-insensitive, as Azure
// compares names), in any resource group.
func (c *Cloud) named(typ, name string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, raw := range c.objs {
		var r struct{ ID, Type, Name string }
		if json.Unmarshal(raw, &r) == nil && strings.EqualFold(r.Type, typ) && strings.EqualFold(r.Name, name) {
			out = append(out, r.ID)
		}
	}
	return out
}

func orDefaultAny(v any, d string) any {
	if s, ok := v.(string); ok && s != "" {
		return s
	}
	return d
}
