package gcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	crm "google.golang.org/api/cloudresourcemanager/v3"
	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/googleapi"
	sn "google.golang.org/api/servicenetworking/v1"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
	"github.com/groundworkhq/groundwork/internal/provider"
)

// Roles of the resources a job's network is made of; each is named name(j, role) and
// carries description(j, role), as none of these compute types takes labels.
const (
	roleNetwork    = "vpc"
	roleSubnet     = "private"
	roleRouter     = "router"
	roleNAT        = "nat"
	roleFWInternal = "allow-internal"
	roleFWHealth   = "allow-health-checks"
	rolePSARange   = "psa"
	rolePeering    = "peering"
)

// psaService is the service private services access connects a network to (Cloud SQL,
// Memorystore), and psaPeering the peering its connection makes on the network.
const (
	psaService = "services/servicenetworking.googleapis.com"
	psaPeering = "servicenetworking-googleapis-com"
)

// psaPrefix is the size of the range reserved for private services access: a /20 holds
// the Cloud SQL and Memorystore instances of a space with room to spare and, unlike the /16
// Google suggests, leaves most of 10.0.0.0/8 to peered networks.
const psaPrefix = 20

// healthCheckRanges are where Google's load balancer health checks come from.
var healthCheckRanges = []string{"35.191.0.0/16", "130.211.0.0/22"}

// NetworkDriver makes a job's VPC network: a custom-mode network with one private subnet in
// the space's region, a Cloud Router with Cloud NAT for egress, firewall rules that admit
// the network's own traffic and Google's health checks (and nothing from the internet), and
// private services access (a reserved range and its Service Networking connection) so that
// Cloud SQL and Memorystore instances on it get private addresses.
type NetworkDriver struct{ C *Client }

var (
	_ network.Driver          = NetworkDriver{}
	_ provider.NetworkDrivers = (*Module)(nil)
)

// NetworkDriver implements provider.NetworkDrivers.
func (m *Module) NetworkDriver(ctx context.Context, j *job.Job) (network.Driver, error) {
	c, err := m.Client(ctx, j)
	if err != nil {
		return nil, err
	}
	return NetworkDriver{C: c}, nil
}

// Network is what a job's network is, recorded as the step's Data.
type Network struct {
	// NetworkID is "projects/<p>/global/networks/<n>", the network's id as the other
	// families take it (a private zone's, a cluster's or a datastore's vpcID).
	NetworkID string `json:"networkID"`
	SelfLink  string `json:"selfLink"`
	Region    string `json:"region"`
	CIDR      string `json:"cidr,omitempty"`
	// Subnets are the subnets by role ("private"), SubnetIDs the same ids as a list:
	// "projects/<p>/regions/<r>/subnetworks/<n>".
	Subnets   map[string]string `json:"subnets"`
	SubnetIDs []string          `json:"subnetIDs"`
	RouterID  string            `json:"routerID,omitempty"`
	NAT       string            `json:"nat,omitempty"`
	Firewalls []string          `json:"firewalls,omitempty"`
	// PrivateServiceRange is the global address reserved for private services access.
	PrivateServiceRange string `json:"privateServiceRange,omitempty"`
	Adopted             bool   `json:"adopted,omitempty"`
}

func (n Network) data(ops Ops) map[string]any {
	var m map[string]any
	b, _ := json.Marshal(n)
	_ = json.Unmarshal(b, &m)
	if ops != nil {
		m["ops"] = ops
	}
	return m
}

// networkRef is a network named by a vpcID or peerVPCID: a self link or
// "projects/<p>/global/networks/<n>".
type networkRef struct{ Project, Name string }

func (r networkRef) ID() string       { return "projects/" + r.Project + "/global/networks/" + r.Name }
func (r networkRef) SelfLink() string { return selfLink(r.ID()) }

func parseNetwork(id string) (networkRef, bool) {
	s := strings.TrimPrefix(id, "https://www.googleapis.com/compute/v1/")
	s = strings.TrimPrefix(s, "https://compute.googleapis.com/compute/v1/")
	parts := strings.Split(strings.TrimPrefix(s, "/"), "/")
	if len(parts) != 5 || parts[0] != "projects" || parts[2] != "global" || parts[3] != "networks" || parts[1] == "" || parts[4] == "" {
		return networkRef{}, false
	}
	return networkRef{Project: parts[1], Name: parts[4]}, true
}

// own is the job's network: the one it makes, in the space's project.
func (d NetworkDriver) own(j *job.Job) networkRef {
	return networkRef{Project: d.C.ProjectID, Name: name(j, roleNetwork)}
}

// described is a read of a compute resource that marks its owner in its description.
func described(j *job.Job, desc string, err error) (State, error) {
	if notFound(err) {
		return State{}, nil
	}
	if err != nil {
		return State{}, err
	}
	return State{Found: true, Ours: ownsDescription(j, desc), Ready: true}, nil
}

// inUse reports whether Google refused a delete because something still uses the resource.
func inUse(err error) bool {
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		return false
	}
	for _, it := range ge.Errors {
		if it.Reason == "resourceInUseByAnotherResource" || it.Reason == "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE" {
			return true
		}
	}
	return false
}

// stillInUse makes an in-use refusal transient: what uses the resource is on its way out
// (the job's own resources deleted just before) or the user's to remove, and the engine's
// next call tries again.
func stillInUse(what string, err error) error {
	if inUse(err) {
		return fault.Transient(fmt.Errorf("%s is still in use: %w", what, err))
	}
	return err
}

// computeResource is a compute resource of the job in the terms converge and remove use:
// read by get, made by insert, deleted by del, each call carrying the requestId of its
// key so that a call re-sent after a crash is answered with the first call's operation.
func (d NetworkDriver) computeResource(s *compute.Service, j *job.Job, key, what string,
	get func(ctx context.Context) (string, error),
	insert func(ctx context.Context, rid string) (*compute.Operation, error),
	del func(ctx context.Context, rid string) (*compute.Operation, error),
) Resource {
	poll := d.C.pollCompute(s)
	return Resource{
		Get: func(ctx context.Context) (State, error) {
			desc, err := get(ctx)
			return described(j, desc, err)
		},
		Create: func(ctx context.Context) (string, error) { return sendOnce(ctx, j, "create "+key, insert) },
		Delete: func(ctx context.Context) (string, error) {
			op, err := sendOnce(ctx, j, "delete "+key, del)
			return op, stillInUse(what, err)
		},
		Poll: func(ctx context.Context, op string) (bool, error, error) {
			done, failed, err := poll(ctx, op)
			return done, stillInUse(what, failed), err
		},
	}
}

// sendOnce sends a compute insert or delete (call) under the requestId of the job's key and
// returns the operation to poll. Google answers a requestId it has seen with that call's
// operation, which is what makes a call re-sent after a crash harmless. An operation DONE
// without error when answered is such an answer to a call that finished earlier (a new
// insert or delete is not done on the spot), and the caller sends only when the resource is
// not in the state that call left it in: it was made and deleted since (a job's network
// undone and made again). The call is then sent again under an id derived from that
// operation, which a crash re-derives just as it re-derives the first.
func sendOnce(ctx context.Context, j *job.Job, key string, call func(ctx context.Context, rid string) (*compute.Operation, error)) (string, error) {
	rid := requestID(j, key)
	for range 8 {
		op, err := call(ctx, rid)
		if err != nil || op.Status != "DONE" || op.Error != nil {
			return startCompute(op, err)
		}
		rid = requestID(j, key+" after "+op.Name)
	}
	return "", fault.Transientf("%s: Google keeps answering with finished operations", key)
}

// parts are the compute resources of a job's network other than the network itself, by
// their Ops key.
func (d NetworkDriver) parts(s *compute.Service, j *job.Job, pfx netip.Prefix, nat, psa bool) (keys []string, rs map[string]Resource) {
	p, region := d.C.ProjectID, d.C.Region
	link := d.own(j).SelfLink()
	rs = map[string]Resource{}
	add := func(key, what string, get func(ctx context.Context) (string, error),
		insert, del func(ctx context.Context, rid string) (*compute.Operation, error)) {
		keys = append(keys, key)
		rs[key] = d.computeResource(s, j, key, what, get, insert, del)
	}

	subnet := name(j, roleSubnet)
	add("subnet "+roleSubnet, "subnet "+subnet, func(ctx context.Context) (string, error) {
		v, err := s.Subnetworks.Get(p, region, subnet).Context(ctx).Do()
		if err != nil {
			return "", err
		}
		return v.Description, nil
	}, func(ctx context.Context, rid string) (*compute.Operation, error) {
		// GCP subnets are regional: one subnet spans every zone of the region, so azCount
		// makes no more of them. The private subnet takes the first half of the block; the
		// second half is left for secondary ranges (a GKE cluster's pods and services) and
		// proxy-only subnets.
		return s.Subnetworks.Insert(p, region, &compute.Subnetwork{Name: subnet, Description: description(j, roleSubnet),
			Network: link, IpCidrRange: half(pfx), PrivateIpGoogleAccess: true}).
			RequestId(rid).Context(ctx).Do()
	}, func(ctx context.Context, rid string) (*compute.Operation, error) {
		return s.Subnetworks.Delete(p, region, subnet).RequestId(rid).Context(ctx).Do()
	})

	if nat {
		router := name(j, roleRouter)
		add("router", "router "+router, func(ctx context.Context) (string, error) {
			v, err := s.Routers.Get(p, region, router).Context(ctx).Do()
			if err != nil {
				return "", err
			}
			return v.Description, nil
		}, func(ctx context.Context, rid string) (*compute.Operation, error) {
			return s.Routers.Insert(p, region, &compute.Router{Name: router, Description: description(j, roleRouter), Network: link,
				Nats: []*compute.RouterNat{{Name: name(j, roleNAT), NatIpAllocateOption: "AUTO_ONLY",
					SourceSubnetworkIpRangesToNat: "ALL_SUBNETWORKS_ALL_IP_RANGES"}}}).
				RequestId(rid).Context(ctx).Do()
		}, func(ctx context.Context, rid string) (*compute.Operation, error) {
			return s.Routers.Delete(p, region, router).RequestId(rid).Context(ctx).Do()
		})
	}

	for _, fw := range firewalls(j, pfx, link) {
		add("firewall "+fw.role, "firewall rule "+fw.rule.Name, func(ctx context.Context) (string, error) {
			v, err := s.Firewalls.Get(p, fw.rule.Name).Context(ctx).Do()
			if err != nil {
				return "", err
			}
			return v.Description, nil
		}, func(ctx context.Context, rid string) (*compute.Operation, error) {
			return s.Firewalls.Insert(p, fw.rule).RequestId(rid).Context(ctx).Do()
		}, func(ctx context.Context, rid string) (*compute.Operation, error) {
			return s.Firewalls.Delete(p, fw.rule.Name).RequestId(rid).Context(ctx).Do()
		})
	}

	if !psa {
		return keys, rs
	}
	rng := name(j, rolePSARange)
	add("range "+rolePSARange, "address range "+rng, func(ctx context.Context) (string, error) {
		v, err := s.GlobalAddresses.Get(p, rng).Context(ctx).Do()
		if err != nil {
			return "", err
		}
		return v.Description, nil
	}, func(ctx context.Context, rid string) (*compute.Operation, error) {
		return s.GlobalAddresses.Insert(p, &compute.Address{Name: rng, Description: description(j, rolePSARange), Network: link,
			Purpose: "VPC_PEERING", AddressType: "INTERNAL", PrefixLength: psaPrefix}).
			RequestId(rid).Context(ctx).Do()
	}, func(ctx context.Context, rid string) (*compute.Operation, error) {
		return s.GlobalAddresses.Delete(p, rng).RequestId(rid).Context(ctx).Do()
	})
	return keys, rs
}

type firewallRule struct {
	role string
	rule *compute.Firewall
}

// firewalls are the job's ingress rules: everything from inside the network's block, and
// TCP from Google's health checkers. Nothing else comes in (GCP's implied rule denies it);
// in particular nothing from 0.0.0.0/0.
func firewalls(j *job.Job, pfx netip.Prefix, link string) []firewallRule {
	return []firewallRule{
		{role: roleFWInternal, rule: &compute.Firewall{Name: name(j, roleFWInternal), Description: description(j, roleFWInternal),
			Network: link, Direction: "INGRESS", Priority: 1000, SourceRanges: []string{pfx.Masked().String()},
			Allowed: []*compute.FirewallAllowed{{IPProtocol: "all"}}}},
		{role: roleFWHealth, rule: &compute.Firewall{Name: name(j, roleFWHealth), Description: description(j, roleFWHealth),
			Network: link, Direction: "INGRESS", Priority: 1000, SourceRanges: healthCheckRanges,
			Allowed: []*compute.FirewallAllowed{{IPProtocol: "tcp"}}}},
	}
}

// half is the first half of pfx.
func half(pfx netip.Prefix) string {
	return netip.PrefixFrom(pfx.Masked().Addr(), pfx.Bits()+1).String()
}

// EnsureNetwork implements network.Driver. Each call moves every part one step (reads, starts
// what is missing, polls what is under way) and returns; Ready is false until all are done.
// The operations in flight are in Data["ops"], which the next call reads back from the job.
func (d NetworkDriver) EnsureNetwork(ctx context.Context, j *job.Job, cfg network.Config) (network.Result, error) {
	return d.ensure(ctx, j, cfg, true)
}

// ensure is EnsureNetwork, with private services access (the range and the connection that
// Cloud SQL and Memorystore take their addresses from) or without it: a VM pool's own
// network needs none, and leaving it out spares the pool's project the Service Networking
// API.
func (d NetworkDriver) ensure(ctx context.Context, j *job.Job, cfg network.Config, psa bool) (network.Result, error) {
	if cfg.VPCID != "" {
		return d.adopt(ctx, cfg)
	}
	cidr := cfg.CIDR
	if cidr == "" {
		cidr = "10.0.0.0/16"
	}
	pfx, err := netip.ParsePrefix(cidr)
	if err != nil || !pfx.Addr().Is4() {
		return network.Result{}, fault.UserAction(fmt.Errorf("cidr %q is not an IPv4 block", cidr), "InvalidCIDR",
			"Give cidr as an IPv4 block such as 10.0.0.0/16.", "")
	}
	s, err := d.C.computeService(ctx)
	if err != nil {
		return network.Result{}, err
	}
	ops := opsOf(j, network.InfraNetwork)
	own := d.own(j)
	p, region := d.C.ProjectID, d.C.Region
	n := Network{NetworkID: own.ID(), SelfLink: own.SelfLink(), Region: region, CIDR: pfx.Masked().String(),
		Subnets:             map[string]string{roleSubnet: "projects/" + p + "/regions/" + region + "/subnetworks/" + name(j, roleSubnet)},
		PrivateServiceRange: "projects/" + p + "/global/addresses/" + name(j, rolePSARange)}
	n.SubnetIDs = []string{n.Subnets[roleSubnet]}
	if !psa {
		n.PrivateServiceRange = ""
	}
	for _, fw := range firewalls(j, pfx, own.SelfLink()) {
		n.Firewalls = append(n.Firewalls, "projects/"+p+"/global/firewalls/"+fw.rule.Name)
	}
	if !cfg.NoNAT {
		n.RouterID = "projects/" + p + "/regions/" + region + "/routers/" + name(j, roleRouter)
		n.NAT = name(j, roleNAT)
	}
	res := func(ready bool, err error) (network.Result, error) {
		return network.Result{VPCID: n.NetworkID, Ready: ready && err == nil, Data: n.data(ops)}, err
	}

	ok, err := d.C.converge(ctx, ops, "create network", d.computeResource(s, j, "network", "network "+own.Name,
		func(ctx context.Context) (string, error) {
			v, err := s.Networks.Get(p, own.Name).Context(ctx).Do()
			if err != nil {
				return "", err
			}
			return v.Description, nil
		}, func(ctx context.Context, rid string) (*compute.Operation, error) {
			return s.Networks.Insert(p, &compute.Network{Name: own.Name, Description: description(j, roleNetwork),
				AutoCreateSubnetworks: false, ForceSendFields: []string{"AutoCreateSubnetworks"},
				RoutingConfig: &compute.NetworkRoutingConfig{RoutingMode: "REGIONAL"}}).
				RequestId(rid).Context(ctx).Do()
		}, nil))
	if err != nil || !ok {
		return res(false, err)
	}
	// The parts need only the network: they are started together and polled together.
	keys, parts := d.parts(s, j, pfx, !cfg.NoNAT, psa)
	all := true
	for _, key := range keys {
		ok, err := d.C.converge(ctx, ops, key, parts[key])
		if err != nil {
			return res(false, err)
		}
		all = all && ok
	}
	if !all || !psa {
		return res(all, nil)
	}
	svc, err := d.C.serviceNetworking(ctx)
	if err != nil {
		return res(false, err)
	}
	consumer, err := d.consumerNetwork(ctx, own)
	if err != nil {
		return res(false, err)
	}
	ok, err = d.C.converge(ctx, ops, "create connection", d.connection(svc, j, consumer))
	return res(ok, err)
}

// serviceNetworking opens the Service Networking API with the account.
func (c *Client) serviceNetworking(ctx context.Context) (*sn.APIService, error) {
	s, err := sn.NewService(ctx, c.Options(ServiceNetworking)...)
	if err != nil {
		return nil, fault.System(err)
	}
	return s, nil
}

// consumerNetwork is the network as Service Networking names it: by project number, which
// Resource Manager tells.
func (d NetworkDriver) consumerNetwork(ctx context.Context, n networkRef) (string, error) {
	s, err := crm.NewService(ctx, d.C.Options(ServiceResourceManager)...)
	if err != nil {
		return "", fault.System(err)
	}
	pr, err := s.Projects.Get("projects/" + n.Project).Context(ctx).Do()
	if err != nil {
		return "", d.C.Classify(fmt.Errorf("project %s: %w", n.Project, err))
	}
	number := strings.TrimPrefix(pr.Name, "projects/")
	if number == "" {
		return "", fault.System(fmt.Errorf("project %s has no number", n.Project))
	}
	return "projects/" + number + "/global/networks/" + n.Name, nil
}

// connection is the network's private services access connection. It carries no
// description of its own: it is the job's because it is on the job's network, which the
// caller has read as the job's.
func (d NetworkDriver) connection(s *sn.APIService, j *job.Job, consumer string) Resource {
	return Resource{
		Get: func(ctx context.Context) (State, error) {
			l, err := s.Services.Connections.List(psaService).Network(consumer).Context(ctx).Do()
			if notFound(err) {
				return State{}, nil
			}
			if err != nil {
				return State{}, err
			}
			for _, c := range l.Connections {
				if c.Peering == psaPeering {
					return State{Found: true, Ours: true, Ready: true}, nil
				}
			}
			return State{}, nil
		},
		Create: func(ctx context.Context) (string, error) {
			op, err := s.Services.Connections.Create(psaService, &sn.Connection{Network: consumer,
				ReservedPeeringRanges: []string{name(j, rolePSARange)}}).Context(ctx).Do()
			return snStarted(op, err)
		},
		Delete: func(ctx context.Context) (string, error) {
			op, err := s.Services.Connections.DeleteConnection(psaService+"/connections/"+psaPeering,
				&sn.DeleteConnectionRequest{ConsumerNetwork: consumer}).Context(ctx).Do()
			return snStarted(op, err)
		},
		Poll: func(ctx context.Context, name string) (bool, error, error) {
			op, err := s.Operations.Get(name).Context(ctx).Do()
			if err != nil {
				return false, nil, err
			}
			if !op.Done {
				return false, nil, nil
			}
			if op.Error != nil {
				return true, statusError(op.Error.Code, op.Error.Message, op.Error.Details), nil
			}
			return true, nil, nil
		},
	}
}

// snStarted is a Service Networking call's operation as Resource.Create and Delete return it.
func snStarted(op *sn.Operation, err error) (string, error) {
	if err != nil {
		return "", err
	}
	if op.Done && op.Error != nil {
		return "", statusError(op.Error.Code, op.Error.Message, op.Error.Details)
	}
	return doneOr(op.Name, op.Done), nil
}

// adopt records a network the user already has; nothing is made in it and it is never
// deleted.
func (d NetworkDriver) adopt(ctx context.Context, cfg network.Config) (network.Result, error) {
	ref, ok := parseNetwork(cfg.VPCID)
	if !ok {
		return network.Result{}, fault.UserAction(fmt.Errorf("vpcID %q is not a VPC network", cfg.VPCID), "InvalidNetworkID",
			"Give vpcID as projects/<project>/global/networks/<name> (or the network's self link).", "")
	}
	s, err := d.C.computeService(ctx)
	if err != nil {
		return network.Result{}, err
	}
	v, err := s.Networks.Get(ref.Project, ref.Name).Context(ctx).Do()
	if notFound(err) {
		return network.Result{}, fault.UserAction(fmt.Errorf("network %s: %w", ref.ID(), err), "NetworkNotFound",
			"The VPC network to adopt does not exist (or the account cannot see it); check vpcID.", d.C.ConsoleURL("networking/networks/list"))
	}
	if err != nil {
		return network.Result{}, d.C.Classify(err)
	}
	n := Network{NetworkID: ref.ID(), SelfLink: v.SelfLink, Region: d.C.Region, Subnets: map[string]string{}, Adopted: true}
	have := map[string]bool{}
	for _, link := range v.Subnetworks {
		id := strings.TrimPrefix(link, "https://www.googleapis.com/compute/v1/")
		have[id] = true
		n.Subnets[id[strings.LastIndex(id, "/")+1:]] = id
	}
	for _, want := range cfg.SubnetIDs {
		id := strings.TrimPrefix(want, "https://www.googleapis.com/compute/v1/")
		if !have[id] {
			return network.Result{}, fault.UserAction(fmt.Errorf("subnet %s is not in %s", want, ref.ID()), "SubnetNotFound",
				"Every subnetIDs entry must be a subnet of the adopted network, as projects/<p>/regions/<r>/subnetworks/<name>.",
				d.C.ConsoleURL("networking/networks/details/"+ref.Name))
		}
		n.SubnetIDs = append(n.SubnetIDs, id)
	}
	if len(cfg.SubnetIDs) == 0 {
		for _, id := range n.Subnets {
			n.SubnetIDs = append(n.SubnetIDs, id)
		}
	}
	return network.Result{VPCID: n.NetworkID, Ready: true, Data: n.data(nil)}, nil
}

// DeleteNetwork implements network.Driver: the job's parts go in the reverse of the order
// they were made (the connection, then the range, firewall rules, router and subnet, then
// the network), only those that are the job's, and what is gone already is done. An adopted
// network is left alone.
//
// The step's undo records nothing while it waits, so the delete operations are not kept:
// each call reads the resources again, and a delete re-sent for one still there carries the
// same requestId, which Google answers with the operation already under way.
func (d NetworkDriver) DeleteNetwork(ctx context.Context, j *job.Job) (bool, error) {
	return d.deleteNetwork(ctx, j, teardown{psa: true})
}

// teardown says what a network's deletion finds of private services access.
type teardown struct {
	// psa: the network was made with private services access (ensure's psa).
	psa bool
	// ownProducers: the only producers on the connection were the job's own, deleted by
	// an earlier step (a datastore's instance), so a connection Google still holds is
	// released on its own in a few minutes rather than the user's to free.
	ownProducers bool
}

func (d NetworkDriver) deleteNetwork(ctx context.Context, j *job.Job, o teardown) (bool, error) {
	cfg, _ := network.DecodeConfig(j.Config)
	if cfg.VPCID != "" {
		return true, nil
	}
	s, err := d.C.computeService(ctx)
	if err != nil {
		return false, err
	}
	own := d.own(j)
	ops := Ops{}
	netRes := d.computeResource(s, j, "network", "network "+own.Name, func(ctx context.Context) (string, error) {
		v, err := s.Networks.Get(own.Project, own.Name).Context(ctx).Do()
		if err != nil {
			return "", err
		}
		return v.Description, nil
	}, nil, func(ctx context.Context, rid string) (*compute.Operation, error) {
		return s.Networks.Delete(own.Project, own.Name).RequestId(rid).Context(ctx).Do()
	})
	st, err := netRes.Get(ctx)
	if err != nil {
		return false, d.C.Classify(err)
	}
	if st.Found && st.Ours && o.psa {
		svc, err := d.C.serviceNetworking(ctx)
		if err != nil {
			return false, err
		}
		consumer, err := d.consumerNetwork(ctx, own)
		if err != nil {
			return false, err
		}
		// Service Networking takes no requestId and a connection being deleted reads as
		// there, so its operation could not be found again by a later call: it is awaited
		// here (it takes seconds to a minute). It fails while a producer service still has
		// an address in the range.
		conn := d.connection(svc, j, consumer)
		// A refusal (400) means a producer still has an address in the range.
		inUse := func(err error) error {
			var ge *googleapi.Error
			switch {
			case !errors.As(err, &ge) || ge.Code != http.StatusBadRequest:
				return err
			case o.ownProducers:
				return fault.Transient(fmt.Errorf("private services access of %s is still held after its instance was deleted: %w", own.ID(), err))
			}
			return fault.UserAction(fmt.Errorf("private services access of %s: %w", own.ID(), err), "NetworkInUseByServices",
				"Cloud SQL or Memorystore instances still use the network's private services access; delete them (or the datastore jobs on this network) first, then retry.",
				d.C.ConsoleURL("networking/peering/list"))
		}
		poll, del := conn.Poll, conn.Delete
		conn.Poll = func(ctx context.Context, op string) (bool, error, error) {
			done, failed, err := poll(ctx, op)
			return done, inUse(failed), err
		}
		conn.Delete = func(ctx context.Context) (string, error) {
			op, err := del(ctx)
			return op, inUse(err)
		}
		if err := d.C.await(ctx, "deleting the private services access connection of "+own.ID(), func() (bool, error) {
			return d.C.remove(ctx, ops, "delete connection", conn)
		}); err != nil {
			return false, err
		}
	}
	// The parts of every config the job may have had: with and without NAT.
	keys, parts := d.parts(s, j, netip.MustParsePrefix("10.0.0.0/16"), true, true)
	all := true
	for _, key := range keys {
		gone, err := d.C.remove(ctx, ops, key, parts[key])
		if err != nil {
			return false, err
		}
		all = all && gone
	}
	if !all {
		return false, nil
	}
	return d.C.remove(ctx, ops, "delete network", netRes)
}

// peeringResource is the job's peering on network own.
func (d NetworkDriver) peeringResource(s *compute.Service, j *job.Job, own networkRef, peer *networkRef) Resource {
	pname := name(j, rolePeering)
	return Resource{
		Get: func(ctx context.Context) (State, error) {
			v, err := s.Networks.Get(own.Project, own.Name).Context(ctx).Do()
			if notFound(err) {
				return State{}, nil
			}
			if err != nil {
				return State{}, err
			}
			for _, pr := range v.Peerings {
				if pr.Name != pname {
					continue
				}
				if peer != nil {
					if got, _ := parseNetwork(pr.Network); got != *peer {
						return State{}, fault.UserAction(fmt.Errorf("peering %s goes to %s, not %s", pname, pr.Network, peer.ID()), "PeeringChanged",
							"The job's peering was moved to another network meanwhile; retry the job.", "")
					}
				}
				return State{Found: true, Ours: true, Ready: true}, nil
			}
			return State{}, nil
		},
		Create: func(ctx context.Context) (string, error) {
			return sendOnce(ctx, j, "add peering", func(ctx context.Context, rid string) (*compute.Operation, error) {
				return s.Networks.AddPeering(own.Project, own.Name, &compute.NetworksAddPeeringRequest{
					NetworkPeering: &compute.NetworkPeering{Name: pname, Network: peer.SelfLink(), ExchangeSubnetRoutes: true}}).
					RequestId(rid).Context(ctx).Do()
			})
		},
		Delete: func(ctx context.Context) (string, error) {
			return sendOnce(ctx, j, "remove peering", func(ctx context.Context, rid string) (*compute.Operation, error) {
				return s.Networks.RemovePeering(own.Project, own.Name, &compute.NetworksRemovePeeringRequest{Name: pname}).
					RequestId(rid).Context(ctx).Do()
			})
		},
		Poll: d.C.pollCompute(s),
	}
}

// EnsurePeering implements network.Driver: a peering from the job's network to
// p.PeerVPCID, exchanging subnet routes; a peering of the job to another network (a config
// update moved it) is removed first. It is awaited here (Google adds one in seconds) and
// its name returned; it is ACTIVE once the peer network peers back, which is the peer's
// owner's to do.
func (d NetworkDriver) EnsurePeering(ctx context.Context, j *job.Job, vpcID string, p network.Peering) (string, error) {
	peer, ok := parseNetwork(p.PeerVPCID)
	if !ok {
		return "", fault.UserAction(fmt.Errorf("peering.peerVPCID %q is not a VPC network", p.PeerVPCID), "InvalidNetworkID",
			"Give peering.peerVPCID as projects/<project>/global/networks/<name> (or the network's self link).", "")
	}
	own, ok := parseNetwork(vpcID)
	if !ok {
		return "", fault.System(fmt.Errorf("own network id %q", vpcID))
	}
	s, err := d.C.computeService(ctx)
	if err != nil {
		return "", err
	}
	if _, err := s.Networks.Get(peer.Project, peer.Name).Context(ctx).Do(); notFound(err) {
		return "", fault.UserAction(fmt.Errorf("peer network %s: %w", peer.ID(), err), "PeerNotFound",
			"The network in peering.peerVPCID does not exist (or the account cannot see it); check the id.", d.C.ConsoleURL("networking/networks/list"))
	} else if err != nil {
		return "", d.C.Classify(err)
	}
	ops := Ops{}
	// A config update that moved the peering to another network: the job's peering (one
	// name per job) goes first, then the new one is added under the same name. A crash in
	// between finds no peering and adds the new one.
	if moved, err := d.peeringElsewhere(ctx, s, j, own, peer); err != nil {
		return "", err
	} else if moved {
		if err := d.C.await(ctx, "removing peering "+name(j, rolePeering), func() (bool, error) {
			return d.C.remove(ctx, ops, "remove peering", d.peeringResource(s, j, own, nil))
		}); err != nil {
			return "", err
		}
	}
	r := d.peeringResource(s, j, own, &peer)
	if err := d.C.await(ctx, "peering "+name(j, rolePeering), func() (bool, error) {
		return d.C.converge(ctx, ops, "add peering", r)
	}); err != nil {
		return "", err
	}
	return name(j, rolePeering), nil
}

// peeringElsewhere reports whether the job's peering on network own goes to a network other
// than peer.
func (d NetworkDriver) peeringElsewhere(ctx context.Context, s *compute.Service, j *job.Job, own, peer networkRef) (bool, error) {
	v, err := s.Networks.Get(own.Project, own.Name).Context(ctx).Do()
	if notFound(err) {
		return false, nil
	}
	if err != nil {
		return false, d.C.Classify(err)
	}
	for _, pr := range v.Peerings {
		if pr.Name == name(j, rolePeering) {
			got, _ := parseNetwork(pr.Network)
			return got != peer, nil
		}
	}
	return false, nil
}

// DeletePeering implements network.Driver: the job's peering is removed from its network (the
// job's own, or the adopted one); a network or peering already gone is done.
func (d NetworkDriver) DeletePeering(ctx context.Context, j *job.Job) error {
	own := d.own(j)
	if cfg, err := network.DecodeConfig(j.Config); err == nil && cfg.VPCID != "" {
		if ref, ok := parseNetwork(cfg.VPCID); ok {
			own = ref
		}
	}
	s, err := d.C.computeService(ctx)
	if err != nil {
		return err
	}
	r := d.peeringResource(s, j, own, nil)
	ops := Ops{}
	return d.C.await(ctx, "removing peering "+name(j, rolePeering), func() (bool, error) {
		return d.C.remove(ctx, ops, "remove peering", r)
	})
}

// networkOf reads the Network a result's Data records.
func networkOf(res network.Result) Network {
	var n Network
	b, _ := json.Marshal(res.Data)
	_ = json.Unmarshal(b, &n)
	return n
}
