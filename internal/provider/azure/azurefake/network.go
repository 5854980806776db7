package azurefake

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v7"
	netfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v7/fake"
)

const (
	typeVNet    = "Microsoft.Network/virtualNetworks"
	typePeering = "Microsoft.Network/virtualNetworks/virtualNetworkPeerings"
	typeNAT     = "Microsoft.Network/natGateways"
	typePIP     = "Microsoft.Network/publicIPAddresses"
	typeNSG     = "Microsoft.Network/networkSecurityGroups"
)

// networkServers keep virtual networks (with their subnets inline, as a PUT of the network
// gives them; listed across the subscription, ListPageSize to a page), peerings, NAT gateways,
// public IPs and network security groups. A NAT gateway, public IP or NSG that something still
// refers to cannot be deleted, as on Azure.
func (c *Cloud) networkServers() []route {
	var pips int
	f := &netfake.ServerFactory{
		VirtualNetworksServer: netfake.VirtualNetworksServer{
			BeginCreateOrUpdate: func(_ context.Context, rg, name string, p armnetwork.VirtualNetwork, _ *armnetwork.VirtualNetworksClientBeginCreateOrUpdateOptions) (azfake.PollerResponder[armnetwork.VirtualNetworksClientCreateOrUpdateResponse], azfake.ErrorResponder) {
				id := armID(rg, typeVNet, name)
				return putter[armnetwork.VirtualNetworksClientCreateOrUpdateResponse](c, rg, id, typeVNet, p, func(props map[string]any) {
					subnets, _ := props["subnets"].([]any)
					for _, s := range subnets {
						if m, ok := s.(map[string]any); ok {
							m["id"] = id + "/subnets/" + fmt.Sprint(m["name"])
							m["type"] = typeVNet + "/subnets"
							if sp, ok := m["properties"].(map[string]any); ok {
								sp["provisioningState"] = "Succeeded"
							}
						}
					}
				})
			},
			Get: func(_ context.Context, rg, name string, _ *armnetwork.VirtualNetworksClientGetOptions) (azfake.Responder[armnetwork.VirtualNetworksClientGetResponse], azfake.ErrorResponder) {
				return getter[armnetwork.VirtualNetworksClientGetResponse](c, armID(rg, typeVNet, name))
			},
			BeginDelete: func(_ context.Context, rg, name string, _ *armnetwork.VirtualNetworksClientBeginDeleteOptions) (azfake.PollerResponder[armnetwork.VirtualNetworksClientDeleteResponse], azfake.ErrorResponder) {
				return deleter[armnetwork.VirtualNetworksClientDeleteResponse](c, armID(rg, typeVNet, name), "")
			},
			NewListAllPager: func(*armnetwork.VirtualNetworksClientListAllOptions) azfake.PagerResponder[armnetwork.VirtualNetworksClientListAllResponse] {
				return paged(ofType[*armnetwork.VirtualNetwork](c, typeVNet), func(vs []*armnetwork.VirtualNetwork) armnetwork.VirtualNetworksClientListAllResponse {
					return armnetwork.VirtualNetworksClientListAllResponse{VirtualNetworkListResult: armnetwork.VirtualNetworkListResult{Value: vs}}
				})
			},
		},
		VirtualNetworkPeeringsServer: netfake.VirtualNetworkPeeringsServer{
			BeginCreateOrUpdate: func(_ context.Context, rg, vnet, name string, p armnetwork.VirtualNetworkPeering, _ *armnetwork.VirtualNetworkPeeringsClientBeginCreateOrUpdateOptions) (resp azfake.PollerResponder[armnetwork.VirtualNetworkPeeringsClientCreateOrUpdateResponse], errResp azfake.ErrorResponder) {
				if _, ok := stored[armnetwork.VirtualNetwork](c, armID(rg, typeVNet, vnet)); !ok {
					errResp.SetResponseError(http.StatusNotFound, "ResourceNotFound")
					return
				}
				// A remote network in this subscription must exist; one in another
				// subscription cannot be checked here, as Azure checks it with that
				// subscription's permission.
				if p.Properties != nil && p.Properties.RemoteVirtualNetwork != nil && p.Properties.RemoteVirtualNetwork.ID != nil {
					remote := *p.Properties.RemoteVirtualNetwork.ID
					if strings.Contains(strings.ToLower(remote), "/subscriptions/"+Subscription+"/") {
						if _, ok := stored[armnetwork.VirtualNetwork](c, remote); !ok {
							errResp.SetResponseError(http.StatusBadRequest, "ReferencedResourceNotFound")
							return
						}
					}
				}
				if cur, ok := stored[armnetwork.VirtualNetworkPeering](c, armID(rg, typePeering, vnet, name)); ok && cur.Properties != nil &&
					cur.Properties.RemoteVirtualNetwork != nil && p.Properties != nil && p.Properties.RemoteVirtualNetwork != nil &&
					!strings.EqualFold(str(cur.Properties.RemoteVirtualNetwork.ID), str(p.Properties.RemoteVirtualNetwork.ID)) {
					// Azure keeps a peering's remote network: moving it is a new peering.
					errResp.SetResponseError(http.StatusBadRequest, "RemoteVirtualNetworkCannotChange")
					return
				}
				return putter[armnetwork.VirtualNetworkPeeringsClientCreateOrUpdateResponse](c, rg, armID(rg, typePeering, vnet, name), typePeering, p, func(props map[string]any) {
					props["peeringState"] = "Connected"
				})
			},
			Get: func(_ context.Context, rg, vnet, name string, _ *armnetwork.VirtualNetworkPeeringsClientGetOptions) (azfake.Responder[armnetwork.VirtualNetworkPeeringsClientGetResponse], azfake.ErrorResponder) {
				return getter[armnetwork.VirtualNetworkPeeringsClientGetResponse](c, armID(rg, typePeering, vnet, name))
			},
			BeginDelete: func(_ context.Context, rg, vnet, name string, _ *armnetwork.VirtualNetworkPeeringsClientBeginDeleteOptions) (azfake.PollerResponder[armnetwork.VirtualNetworkPeeringsClientDeleteResponse], azfake.ErrorResponder) {
				return deleter[armnetwork.VirtualNetworkPeeringsClientDeleteResponse](c, armID(rg, typePeering, vnet, name), "")
			},
		},
		NatGatewaysServer: netfake.NatGatewaysServer{
			BeginCreateOrUpdate: func(_ context.Context, rg, name string, p armnetwork.NatGateway, _ *armnetwork.NatGatewaysClientBeginCreateOrUpdateOptions) (azfake.PollerResponder[armnetwork.NatGatewaysClientCreateOrUpdateResponse], azfake.ErrorResponder) {
				return putter[armnetwork.NatGatewaysClientCreateOrUpdateResponse](c, rg, armID(rg, typeNAT, name), typeNAT, p, nil)
			},
			Get: func(_ context.Context, rg, name string, _ *armnetwork.NatGatewaysClientGetOptions) (azfake.Responder[armnetwork.NatGatewaysClientGetResponse], azfake.ErrorResponder) {
				return getter[armnetwork.NatGatewaysClientGetResponse](c, armID(rg, typeNAT, name))
			},
			BeginDelete: func(_ context.Context, rg, name string, _ *armnetwork.NatGatewaysClientBeginDeleteOptions) (azfake.PollerResponder[armnetwork.NatGatewaysClientDeleteResponse], azfake.ErrorResponder) {
				return deleter[armnetwork.NatGatewaysClientDeleteResponse](c, armID(rg, typeNAT, name), "InUseNatGatewayCannotBeDeleted")
			},
		},
		PublicIPAddressesServer: netfake.PublicIPAddressesServer{
			BeginCreateOrUpdate: func(_ context.Context, rg, name string, p armnetwork.PublicIPAddress, _ *armnetwork.PublicIPAddressesClientBeginCreateOrUpdateOptions) (azfake.PollerResponder[armnetwork.PublicIPAddressesClientCreateOrUpdateResponse], azfake.ErrorResponder) {
				return putter[armnetwork.PublicIPAddressesClientCreateOrUpdateResponse](c, rg, armID(rg, typePIP, name), typePIP, p, func(props map[string]any) {
					if props["ipAddress"] == nil { // store holds c.mu while it calls this
						pips++
						props["ipAddress"] = fmt.Sprintf("20.%d.%d.%d", 50+pips/65536, pips/256%256, pips%256)
					}
				})
			},
			Get: func(_ context.Context, rg, name string, _ *armnetwork.PublicIPAddressesClientGetOptions) (azfake.Responder[armnetwork.PublicIPAddressesClientGetResponse], azfake.ErrorResponder) {
				return getter[armnetwork.PublicIPAddressesClientGetResponse](c, armID(rg, typePIP, name))
			},
			BeginDelete: func(_ context.Context, rg, name string, _ *armnetwork.PublicIPAddressesClientBeginDeleteOptions) (azfake.PollerResponder[armnetwork.PublicIPAddressesClientDeleteResponse], azfake.ErrorResponder) {
				return deleter[armnetwork.PublicIPAddressesClientDeleteResponse](c, armID(rg, typePIP, name), "PublicIPAddressInUse")
			},
		},
		SecurityGroupsServer: netfake.SecurityGroupsServer{
			BeginCreateOrUpdate: func(_ context.Context, rg, name string, p armnetwork.SecurityGroup, _ *armnetwork.SecurityGroupsClientBeginCreateOrUpdateOptions) (azfake.PollerResponder[armnetwork.SecurityGroupsClientCreateOrUpdateResponse], azfake.ErrorResponder) {
				return putter[armnetwork.SecurityGroupsClientCreateOrUpdateResponse](c, rg, armID(rg, typeNSG, name), typeNSG, p, nil)
			},
			Get: func(_ context.Context, rg, name string, _ *armnetwork.SecurityGroupsClientGetOptions) (azfake.Responder[armnetwork.SecurityGroupsClientGetResponse], azfake.ErrorResponder) {
				return getter[armnetwork.SecurityGroupsClientGetResponse](c, armID(rg, typeNSG, name))
			},
			BeginDelete: func(_ context.Context, rg, name string, _ *armnetwork.SecurityGroupsClientBeginDeleteOptions) (azfake.PollerResponder[armnetwork.SecurityGroupsClientDeleteResponse], azfake.ErrorResponder) {
				return deleter[armnetwork.SecurityGroupsClientDeleteResponse](c, armID(rg, typeNSG, name), "InUseNetworkSecurityGroupCannotBeDeleted")
			},
		},
	}
	tr := netfake.NewServerFactoryTransport(f)
	var rs []route
	for _, client := range []string{"VirtualNetworksClient", "VirtualNetworkPeeringsClient", "NatGatewaysClient", "PublicIPAddressesClient", "SecurityGroupsClient"} {
		rs = append(rs, route{prefix: client, tr: tr})
	}
	return rs
}
