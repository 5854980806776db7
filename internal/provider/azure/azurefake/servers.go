package azurefake

import (
	"context"
	"net/http"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources"
	resfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/fake"
)

// servers are the modules' fake servers, by the SDK client whose requests each serves.
func (c *Cloud) servers() []route {
	var rs []route
	for _, add := range []func() []route{c.resourceServers, c.networkServers, c.registryServers, c.dnsServers,
		c.datastoreServers, c.redisServers, c.kubernetesServers, c.iamServers} {
		rs = append(rs, add()...)
	}
	return rs
}

func (c *Cloud) resourceServers() []route {
	f := &resfake.ServerFactory{ResourceGroupsServer: resfake.ResourceGroupsServer{
		CreateOrUpdate: func(_ context.Context, rg string, p armresources.ResourceGroup, _ *armresources.ResourceGroupsClientCreateOrUpdateOptions) (resp azfake.Responder[armresources.ResourceGroupsClientCreateOrUpdateResponse], errResp azfake.ErrorResponder) {
			v, r := store[armresources.ResourceGroupsClientCreateOrUpdateResponse](c, "", groupID(rg), "Microsoft.Resources/resourceGroups", p, nil)
			if r != nil {
				r.into(&errResp)
				return
			}
			resp.SetResponse(http.StatusCreated, v, nil)
			return
		},
		Get: func(_ context.Context, rg string, _ *armresources.ResourceGroupsClientGetOptions) (azfake.Responder[armresources.ResourceGroupsClientGetResponse], azfake.ErrorResponder) {
			resp, errResp := getter[armresources.ResourceGroupsClientGetResponse](c, groupID(rg))
			if !c.hasGroup(rg) {
				errResp.SetResponseError(http.StatusNotFound, "ResourceGroupNotFound")
			}
			return resp, errResp
		},
		BeginDelete: func(_ context.Context, rg string, _ *armresources.ResourceGroupsClientBeginDeleteOptions) (azfake.PollerResponder[armresources.ResourceGroupsClientDeleteResponse], azfake.ErrorResponder) {
			return deleter[armresources.ResourceGroupsClientDeleteResponse](c, groupID(rg), "")
		},
	}}
	return []route{{prefix: "ResourceGroupsClient", tr: resfake.NewServerFactoryTransport(f)}}
}
