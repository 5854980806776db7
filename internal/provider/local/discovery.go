package local

import (
	"context"
	"fmt"
	"net"

	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/discovery"
)

// Discoverer lists what a local space has (discovery.Lister): the machine's loopback network,
// which the servers listen on, and the versions of the database servers installed here. A
// local space has no subnets, DNS zones, clusters or instance types.
type Discoverer struct{ P *Provider }

// Discover implements discovery.Lister.
func (d Discoverer) Discover(ctx context.Context, kind string) ([]discovery.Item, error) {
	out := []discovery.Item{}
	switch kind {
	case discovery.KindNetworks:
		ifs, err := net.Interfaces()
		if err != nil {
			return nil, fmt.Errorf("list interfaces: %w", err)
		}
		for _, i := range ifs {
			if i.Flags&net.FlagLoopback == 0 || i.Flags&net.FlagUp == 0 {
				continue
			}
			addrs, _ := i.Addrs()
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
					_, cidr, _ := net.ParseCIDR(n.String())
					out = append(out, discovery.Item{ID: i.Name, Name: i.Name + " (loopback)", CIDR: cidr.String(), Tags: map[string]string{}})
				}
			}
		}
	case discovery.KindVersions:
		for _, e := range []datastore.Engine{datastore.EnginePostgres, datastore.EngineMySQL, datastore.EngineRedis} {
			v, err := d.P.Installed(ctx, e)
			if err != nil {
				continue // not installed here: nothing to offer
			}
			out = append(out, discovery.Item{ID: string(e) + "-" + v, Name: fmt.Sprintf("%s %s (installed)", e, v), Engine: string(e), Version: v,
				Tags: map[string]string{}})
		}
	case discovery.KindSubnets, discovery.KindDNSZones, discovery.KindClusters, discovery.KindInstanceTypes:
	default:
		return nil, fmt.Errorf("%w %q", discovery.ErrUnknownKind, kind)
	}
	return out, nil
}
