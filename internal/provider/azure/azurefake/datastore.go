package azurefake

import (
	"context"
	"net/http"
	"regexp"
	"strings"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/mysql/armmysqlflexibleservers"
	mysqlfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/mysql/armmysqlflexibleservers/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/postgresql/armpostgresqlflexibleservers/v4"
	pgfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/postgresql/armpostgresqlflexibleservers/v4/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/privatedns/armprivatedns"
	pdnsfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/privatedns/armprivatedns/fake"
)

const (
	typePostgres    = "Microsoft.DBforPostgreSQL/flexibleServers"
	typeMySQL       = "Microsoft.DBforMySQL/flexibleServers"
	typePrivateZone = "Microsoft.Network/privateDnsZones"
	typeZoneLink    = "Microsoft.Network/privateDnsZones/virtualNetworkLinks"
)

// serverName is the rule of a flexible server's name, a DNS label under the service's domain.
var serverName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$`)

// datastoreServers keep PostgreSQL and MySQL flexible servers, and the private DNS zones and
// their virtual network links that a server in a delegated subnet resolves through. A server
// is Ready once made, reports its fully qualified domain name and never returns its
// administrator password; one whose delegated subnet is not a subnet of a stored virtual
// network delegated to the service is refused, as Azure refuses it.
func (c *Cloud) datastoreServers() []route {
	pg := &pgfake.ServerFactory{ServersServer: pgfake.ServersServer{
		BeginCreate: func(_ context.Context, rg, name string, p armpostgresqlflexibleservers.Server, _ *armpostgresqlflexibleservers.ServersClientBeginCreateOptions) (resp azfake.PollerResponder[armpostgresqlflexibleservers.ServersClientCreateResponse], errResp azfake.ErrorResponder) {
			var subnet *string
			if p.Properties != nil && p.Properties.Network != nil {
				subnet = p.Properties.Network.DelegatedSubnetResourceID
			}
			if r := c.checkServer(name, subnet, "Microsoft.DBforPostgreSQL/flexibleServers"); r != nil {
				r.into(&errResp)
				return
			}
			return putter[armpostgresqlflexibleservers.ServersClientCreateResponse](c, rg, armID(rg, typePostgres, name), typePostgres, p, serverFix(name, ".postgres.database.azure.com"))
		},
		Get: func(_ context.Context, rg, name string, _ *armpostgresqlflexibleservers.ServersClientGetOptions) (azfake.Responder[armpostgresqlflexibleservers.ServersClientGetResponse], azfake.ErrorResponder) {
			return getter[armpostgresqlflexibleservers.ServersClientGetResponse](c, armID(rg, typePostgres, name))
		},
		BeginUpdate: func(_ context.Context, rg, name string, p armpostgresqlflexibleservers.ServerForUpdate, _ *armpostgresqlflexibleservers.ServersClientBeginUpdateOptions) (resp azfake.PollerResponder[armpostgresqlflexibleservers.ServersClientUpdateResponse], errResp azfake.ErrorResponder) {
			if r := c.checkServerUpdate(armID(rg, typePostgres, name), p.Properties != nil && p.Properties.Storage != nil && p.Properties.Storage.StorageSizeGB != nil, storageOf(p.Properties)); r != nil {
				r.into(&errResp)
				return
			}
			return patcher[armpostgresqlflexibleservers.ServersClientUpdateResponse](c, armID(rg, typePostgres, name), p, serverFix(name, ".postgres.database.azure.com"))
		},
		BeginDelete: func(_ context.Context, rg, name string, _ *armpostgresqlflexibleservers.ServersClientBeginDeleteOptions) (azfake.PollerResponder[armpostgresqlflexibleservers.ServersClientDeleteResponse], azfake.ErrorResponder) {
			return deleter[armpostgresqlflexibleservers.ServersClientDeleteResponse](c, armID(rg, typePostgres, name), "")
		},
	}}
	my := &mysqlfake.ServerFactory{ServersServer: mysqlfake.ServersServer{
		BeginCreate: func(_ context.Context, rg, name string, p armmysqlflexibleservers.Server, _ *armmysqlflexibleservers.ServersClientBeginCreateOptions) (resp azfake.PollerResponder[armmysqlflexibleservers.ServersClientCreateResponse], errResp azfake.ErrorResponder) {
			var subnet *string
			if p.Properties != nil && p.Properties.Network != nil {
				subnet = p.Properties.Network.DelegatedSubnetResourceID
			}
			if r := c.checkServer(name, subnet, "Microsoft.DBforMySQL/flexibleServers"); r != nil {
				r.into(&errResp)
				return
			}
			return putter[armmysqlflexibleservers.ServersClientCreateResponse](c, rg, armID(rg, typeMySQL, name), typeMySQL, p, serverFix(name, ".mysql.database.azure.com"))
		},
		Get: func(_ context.Context, rg, name string, _ *armmysqlflexibleservers.ServersClientGetOptions) (azfake.Responder[armmysqlflexibleservers.ServersClientGetResponse], azfake.ErrorResponder) {
			return getter[armmysqlflexibleservers.ServersClientGetResponse](c, armID(rg, typeMySQL, name))
		},
		BeginUpdate: func(_ context.Context, rg, name string, p armmysqlflexibleservers.ServerForUpdate, _ *armmysqlflexibleservers.ServersClientBeginUpdateOptions) (resp azfake.PollerResponder[armmysqlflexibleservers.ServersClientUpdateResponse], errResp azfake.ErrorResponder) {
			var size *int32
			if p.Properties != nil && p.Properties.Storage != nil {
				size = p.Properties.Storage.StorageSizeGB
			}
			if r := c.checkServerUpdate(armID(rg, typeMySQL, name), size != nil, size); r != nil {
				r.into(&errResp)
				return
			}
			return patcher[armmysqlflexibleservers.ServersClientUpdateResponse](c, armID(rg, typeMySQL, name), p, serverFix(name, ".mysql.database.azure.com"))
		},
		BeginDelete: func(_ context.Context, rg, name string, _ *armmysqlflexibleservers.ServersClientBeginDeleteOptions) (azfake.PollerResponder[armmysqlflexibleservers.ServersClientDeleteResponse], azfake.ErrorResponder) {
			return deleter[armmysqlflexibleservers.ServersClientDeleteResponse](c, armID(rg, typeMySQL, name), "")
		},
	}}
	dns := &pdnsfake.ServerFactory{
		PrivateZonesServer: pdnsfake.PrivateZonesServer{
			BeginCreateOrUpdate: func(_ context.Context, rg, name string, p armprivatedns.PrivateZone, _ *armprivatedns.PrivateZonesClientBeginCreateOrUpdateOptions) (azfake.PollerResponder[armprivatedns.PrivateZonesClientCreateOrUpdateResponse], azfake.ErrorResponder) {
				return putter[armprivatedns.PrivateZonesClientCreateOrUpdateResponse](c, rg, armID(rg, typePrivateZone, strings.ToLower(name)), typePrivateZone, p, func(props map[string]any) {
					props["maxNumberOfRecordSets"] = 25000
					props["maxNumberOfVirtualNetworkLinks"] = 1000
				})
			},
			Get: func(_ context.Context, rg, name string, _ *armprivatedns.PrivateZonesClientGetOptions) (azfake.Responder[armprivatedns.PrivateZonesClientGetResponse], azfake.ErrorResponder) {
				return getter[armprivatedns.PrivateZonesClientGetResponse](c, armID(rg, typePrivateZone, strings.ToLower(name)))
			},
			BeginDelete: func(_ context.Context, rg, name string, _ *armprivatedns.PrivateZonesClientBeginDeleteOptions) (azfake.PollerResponder[armprivatedns.PrivateZonesClientDeleteResponse], azfake.ErrorResponder) {
				return deleter[armprivatedns.PrivateZonesClientDeleteResponse](c, armID(rg, typePrivateZone, strings.ToLower(name)), "")
			},
		},
		VirtualNetworkLinksServer: pdnsfake.VirtualNetworkLinksServer{
			BeginCreateOrUpdate: func(_ context.Context, rg, zone, name string, p armprivatedns.VirtualNetworkLink, _ *armprivatedns.VirtualNetworkLinksClientBeginCreateOrUpdateOptions) (resp azfake.PollerResponder[armprivatedns.VirtualNetworkLinksClientCreateOrUpdateResponse], errResp azfake.ErrorResponder) {
				if _, ok := stored[armprivatedns.PrivateZone](c, armID(rg, typePrivateZone, strings.ToLower(zone))); !ok {
					errResp.SetResponseError(http.StatusNotFound, "ParentResourceNotFound")
					return
				}
				if p.Properties == nil || p.Properties.VirtualNetwork == nil || p.Properties.VirtualNetwork.ID == nil {
					errResp.SetResponseError(http.StatusBadRequest, "InvalidRequestContent")
					return
				}
				if _, ok := stored[map[string]any](c, *p.Properties.VirtualNetwork.ID); !ok {
					errResp.SetResponseError(http.StatusBadRequest, "ReferencedResourceNotFound")
					return
				}
				return putter[armprivatedns.VirtualNetworkLinksClientCreateOrUpdateResponse](c, rg, armID(rg, typeZoneLink, strings.ToLower(zone), name), typeZoneLink, p, func(props map[string]any) {
					props["virtualNetworkLinkState"] = "Completed"
				})
			},
			Get: func(_ context.Context, rg, zone, name string, _ *armprivatedns.VirtualNetworkLinksClientGetOptions) (azfake.Responder[armprivatedns.VirtualNetworkLinksClientGetResponse], azfake.ErrorResponder) {
				return getter[armprivatedns.VirtualNetworkLinksClientGetResponse](c, armID(rg, typeZoneLink, strings.ToLower(zone), name))
			},
			BeginDelete: func(_ context.Context, rg, zone, name string, _ *armprivatedns.VirtualNetworkLinksClientBeginDeleteOptions) (azfake.PollerResponder[armprivatedns.VirtualNetworkLinksClientDeleteResponse], azfake.ErrorResponder) {
				return deleter[armprivatedns.VirtualNetworkLinksClientDeleteResponse](c, armID(rg, typeZoneLink, strings.ToLower(zone), name), "")
			},
		},
	}
	pdns := pdnsfake.NewServerFactoryTransport(dns)
	return []route{
		{prefix: "ServersClient", tr: pgfake.NewServerFactoryTransport(pg), namespace: "Microsoft.DBforPostgreSQL"},
		{prefix: "ServersClient", tr: mysqlfake.NewServerFactoryTransport(my), namespace: "Microsoft.DBforMySQL"},
		{prefix: "PrivateZonesClient", tr: pdns},
		{prefix: "VirtualNetworkLinksClient", tr: pdns},
	}
}

// checkServer refuses a flexible server whose name is not a DNS label, or whose delegated
// subnet is not a subnet of a stored network delegated to service.
func (c *Cloud) checkServer(name string, subnet *string, service string) *refusal {
	if !serverName.MatchString(name) {
		return &refusal{http.StatusBadRequest, "InvalidServerName"}
	}
	if subnet == nil {
		return nil
	}
	vnetID, sub, ok := strings.Cut(strings.ToLower(*subnet), "/subnets/")
	if !ok {
		return &refusal{http.StatusBadRequest, "InvalidSubnetId"}
	}
	vnet, found := stored[struct {
		Properties struct {
			Subnets []struct {
				Name       string
				Properties struct {
					Delegations []struct {
						Properties struct{ ServiceName string }
					}
				}
			}
		}
	}](c, vnetID)
	if !found {
		return &refusal{http.StatusNotFound, "SubnetNotFound"}
	}
	for _, s := range vnet.Properties.Subnets {
		if !strings.EqualFold(s.Name, sub) {
			continue
		}
		for _, d := range s.Properties.Delegations {
			if strings.EqualFold(d.Properties.ServiceName, service) {
				return nil
			}
		}
		return &refusal{http.StatusBadRequest, "SubnetNotDelegated"}
	}
	return &refusal{http.StatusNotFound, "SubnetNotFound"}
}

func storageOf(p *armpostgresqlflexibleservers.ServerPropertiesForUpdate) *int32 {
	if p == nil || p.Storage == nil {
		return nil
	}
	return p.Storage.StorageSizeGB
}

// checkServerUpdate refuses a flexible server's PATCH as Azure does: the server must be
// there and Ready (not mid-operation), and its storage never shrinks.
func (c *Cloud) checkServerUpdate(id string, hasSize bool, size *int32) *refusal {
	cur, ok := stored[struct {
		Properties struct {
			Storage struct{ StorageSizeGB int32 }
		}
	}](c, id)
	if !ok {
		return &refusal{http.StatusNotFound, "ResourceNotFound"}
	}
	c.mu.Lock()
	op := c.inflight[strings.ToLower(id)]
	busy := op != nil && op.pollsLeft > 0
	c.mu.Unlock()
	if busy {
		return &refusal{http.StatusConflict, "AnotherOperationInProgress"}
	}
	if hasSize && size != nil && *size < cur.Properties.Storage.StorageSizeGB {
		return &refusal{http.StatusBadRequest, "StorageSizeCannotDecrease"}
	}
	return nil
}

// serverFix stamps what Azure adds to a flexible server, and drops the password, which
// Azure keeps but never returns.
func serverFix(name, domain string) func(props map[string]any) {
	return func(props map[string]any) {
		delete(props, "administratorLoginPassword")
		props["fullyQualifiedDomainName"] = name + domain
		props["state"] = "Ready"
		if props["availabilityZone"] == nil {
			props["availabilityZone"] = "1"
		}
		if ha, ok := props["highAvailability"].(map[string]any); ok {
			if ha["mode"] == "ZoneRedundant" {
				ha["state"] = "Healthy"
				ha["standbyAvailabilityZone"] = "2"
			} else {
				ha["state"] = "NotEnabled"
			}
		}
		// A flexible server has no provisioningState; its life is in state.
		delete(props, "provisioningState")
	}
}
