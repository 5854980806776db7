package gcpfake

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

func init() {
	registrations = append(registrations, registerComputeNetwork)
}

// registerComputeNetwork serves what a VPC network holds besides its subnets: Cloud Routers
// (with their Cloud NAT configurations), firewall rules, and the networks' peerings
// (networks.addPeering and networks.removePeering).
func registerComputeNetwork(c *Cloud) {
	c.RegisterCompute(Routers)
	c.RegisterCompute(Firewalls)
	base := ComputePath("global") + "networks/{name}/"
	c.Handle(HostCompute, "POST "+base+"addPeering", c.addPeering)
	c.Handle(HostCompute, "POST "+base+"removePeering", c.removePeering)
}

// networkOf normalises the network field of an insert to the full self link Google answers
// with, and reports whether that network is there. A partial URL ("projects/p/global/networks/n",
// "global/networks/n") is accepted as Google accepts it.
func networkOf(c *Cloud, in map[string]any) (string, bool) {
	link, _ := in["network"].(string)
	full := strings.TrimPrefix(link, SelfLinkBase)
	if strings.HasPrefix(full, "global/") {
		full = "projects/" + c.Project + "/" + full
	}
	in["network"] = SelfLinkBase + full
	_, ok := c.Lookup(HostCompute, full)
	return link, ok
}

func missingNetwork(link string) (int, string, string) {
	return 400, "invalid", fmt.Sprintf("Invalid value for field 'resource.network': '%s'. The referenced network resource cannot be found.", link)
}

// Routers are Cloud Routers; a router's Cloud NAT configurations are its nats[] items.
var Routers = ComputeCollection{Scope: "regions", Name: "routers", Kind: "compute#router",
	Check: func(c *Cloud, _ string, in map[string]any) (int, string, string) {
		if link, ok := networkOf(c, in); !ok {
			return missingNetwork(link)
		}
		nats, _ := in["nats"].([]any)
		for i, n := range nats {
			nat, _ := n.(map[string]any)
			if name, _ := nat["name"].(string); !validName(name) {
				return 400, "invalid", fmt.Sprintf("Invalid value for field 'resource.nats[%d].name': '%s'.", i, name)
			}
			switch nat["natIpAllocateOption"] {
			case "AUTO_ONLY":
			case "MANUAL_ONLY":
				if ips, _ := nat["natIps"].([]any); len(ips) == 0 {
					return 400, "invalid", fmt.Sprintf("Invalid value for field 'resource.nats[%d].natIps': ''. NAT IPs must be specified when natIpAllocateOption is MANUAL_ONLY.", i)
				}
			default:
				return 400, "invalid", fmt.Sprintf("Invalid value for field 'resource.nats[%d].natIpAllocateOption': '%v'.", i, nat["natIpAllocateOption"])
			}
			switch nat["sourceSubnetworkIpRangesToNat"] {
			case "ALL_SUBNETWORKS_ALL_IP_RANGES", "ALL_SUBNETWORKS_ALL_PRIMARY_IP_RANGES", "LIST_OF_SUBNETWORKS":
			default:
				return 400, "invalid", fmt.Sprintf("Invalid value for field 'resource.nats[%d].sourceSubnetworkIpRangesToNat': '%v'.", i, nat["sourceSubnetworkIpRangesToNat"])
			}
		}
		return 0, "", ""
	},
	Done: func(_ *Cloud, self *Resource) {
		nats, _ := self.Body["nats"].([]any)
		for _, n := range nats {
			if nat, ok := n.(map[string]any); ok {
				if nat["endpointTypes"] == nil {
					nat["endpointTypes"] = []any{"ENDPOINT_TYPE_VM"}
				}
				if nat["enableEndpointIndependentMapping"] == nil {
					nat["enableEndpointIndependentMapping"] = false
				}
				if nat["type"] == nil {
					nat["type"] = "PUBLIC"
				}
			}
		}
		if self.Body["encryptedInterconnectRouter"] == nil {
			self.Body["encryptedInterconnectRouter"] = false
		}
	},
}

// Firewalls are VPC firewall rules: an ingress rule takes sourceRanges (or source tags), an
// egress rule destinationRanges, and a rule either allows or denies.
var Firewalls = ComputeCollection{Scope: "global", Name: "firewalls", Kind: "compute#firewall",
	Check: func(c *Cloud, _ string, in map[string]any) (int, string, string) {
		if in["network"] == nil {
			// Google puts a rule without a network on the project's default network.
			in["network"] = SelfLinkBase + "projects/" + c.Project + "/global/networks/default"
		}
		if link, ok := networkOf(c, in); !ok {
			return missingNetwork(link)
		}
		allowed, _ := in["allowed"].([]any)
		denied, _ := in["denied"].([]any)
		if (len(allowed) == 0) == (len(denied) == 0) {
			return 400, "invalid", "Exactly one of 'allowed' or 'denied' must be specified."
		}
		for _, rule := range append(allowed, denied...) {
			m, _ := rule.(map[string]any)
			switch p, _ := m["IPProtocol"].(string); p {
			case "tcp", "udp", "icmp", "esp", "ah", "sctp", "ipip", "all":
			default:
				return 400, "invalid", fmt.Sprintf("Invalid value for field 'resource.allowed[].IPProtocol': '%s'.", p)
			}
		}
		if in["direction"] == nil {
			in["direction"] = "INGRESS"
		}
		var ranges []any
		if in["direction"] == "EGRESS" {
			ranges, _ = in["destinationRanges"].([]any)
		} else {
			ranges, _ = in["sourceRanges"].([]any)
			if tags, _ := in["sourceTags"].([]any); len(ranges) == 0 && len(tags) == 0 {
				return 400, "invalid", "Invalid value for field 'resource.sourceRanges': ''. At least one of sourceRanges, sourceTags or sourceServiceAccounts must be specified."
			}
		}
		for _, r := range ranges {
			if s, _ := r.(string); !validCIDR(s) {
				return 400, "invalid", fmt.Sprintf("Invalid value for field 'resource.sourceRanges': '%v'. Must be a CIDR address range that is contained in the network.", r)
			}
		}
		return 0, "", ""
	},
	Done: func(_ *Cloud, self *Resource) {
		if self.Body["priority"] == nil {
			self.Body["priority"] = 1000
		}
		if self.Body["disabled"] == nil {
			self.Body["disabled"] = false
		}
		if self.Body["logConfig"] == nil {
			self.Body["logConfig"] = map[string]any{"enable": false}
		}
	},
}

// Peering states and the stateDetails Google words them with.
const (
	PeeringActive   = "ACTIVE"
	PeeringInactive = "INACTIVE"
)

func peeringDetails(state string) string {
	now := time.Now().Format("2006-01-02T15:04:05.000-07:00")
	if state == PeeringActive {
		return "[" + now + "]: Connected."
	}
	return "[" + now + "]: Waiting for peer network to connect."
}

// Peerings are the peerings a network's body holds.
func Peerings(network Resource) []map[string]any {
	var out []map[string]any
	list, _ := network.Body["peerings"].([]any)
	for _, p := range list {
		if m, ok := p.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// setPeerings stores a network's peerings under the lock.
func setPeerings(r *Resource, ps []map[string]any) {
	list := make([]any, 0, len(ps))
	for _, p := range ps {
		list = append(list, p)
	}
	if len(list) == 0 {
		delete(r.Body, "peerings")
		return
	}
	r.Body["peerings"] = list
}

// networkName is the resource name ("projects/p/global/networks/n") a network URL names.
func networkName(link string) string {
	return strings.TrimPrefix(strings.TrimPrefix(link, SelfLinkBase), "/")
}

// peerState is what a peering from self to peer is: ACTIVE when peer holds a peering back to
// self, INACTIVE until then. The lock is held.
func (c *Cloud) peerState(self, peer string) string {
	p, ok := c.resources[HostCompute+" "+peer]
	if !ok || p.Pending {
		return PeeringInactive
	}
	for _, back := range Peerings(*p) {
		if networkName(fmt.Sprint(back["network"])) == self {
			return PeeringActive
		}
	}
	return PeeringInactive
}

// restate sets the state of the peerings of network peer that point at self. The lock is held.
func (c *Cloud) restate(peer, self, state string) {
	p, ok := c.resources[HostCompute+" "+peer]
	if !ok {
		return
	}
	ps := Peerings(*p)
	for _, back := range ps {
		if networkName(fmt.Sprint(back["network"])) == self {
			back["state"], back["stateDetails"] = state, peeringDetails(state)
		}
	}
	setPeerings(p, ps)
}

// addPeering is networks.addPeering: the peering is on the network once the operation is
// done, INACTIVE until the peer network peers back, and then ACTIVE on both sides.
func (c *Cloud) addPeering(w http.ResponseWriter, r *http.Request) {
	if c.replayed(w, r) {
		return
	}
	self, ok := c.ComputeGet(w, r, Networks)
	if !ok {
		return
	}
	var in struct {
		Name             string         `json:"name"`
		PeerNetwork      string         `json:"peerNetwork"`
		AutoCreateRoutes bool           `json:"autoCreateRoutes"`
		NetworkPeering   map[string]any `json:"networkPeering"`
	}
	if !ReadJSON(w, r, &in) {
		return
	}
	peering := in.NetworkPeering
	if peering == nil {
		// The older request shape: name, peerNetwork and autoCreateRoutes at the top.
		peering = map[string]any{"name": in.Name, "network": in.PeerNetwork, "exchangeSubnetRoutes": in.AutoCreateRoutes}
	}
	pname, _ := peering["name"].(string)
	peerLink, _ := peering["network"].(string)
	peer := networkName(peerLink)
	switch {
	case !validName(pname):
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("Invalid value for field 'networkPeering.name': '%s'.", pname), "invalid")
		return
	case peer == self.Name:
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "A network cannot be peered with itself.", "invalid")
		return
	}
	if strings.HasPrefix(peer, "projects/"+c.Project+"/") {
		if p, ok := c.Lookup(HostCompute, peer); !ok || p.Pending {
			NotFound(w, peer)
			return
		}
	}
	for _, p := range Peerings(self) {
		if p["name"] == pname {
			WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT",
				fmt.Sprintf("There is already a peering %s in network %s.", pname, self.Name), "invalid")
			return
		}
		if networkName(fmt.Sprint(p["network"])) == peer {
			WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT",
				fmt.Sprintf("There is already a peering %s between network %s and network %s.", p["name"], self.Name, peer), "invalid")
			return
		}
	}
	exchange, _ := peering["exchangeSubnetRoutes"].(bool)
	c.StartComputeOp(w, r, "projects/"+r.PathValue("project")+"/global", "addPeering", self.Name, func() (any, *Status) {
		res, ok := c.resources[HostCompute+" "+self.Name]
		if !ok {
			return nil, &Status{Code: 5, Message: fmt.Sprintf("The resource '%s' was not found", self.Name), Reason: "RESOURCE_NOT_FOUND"}
		}
		state := c.peerState(self.Name, peer)
		ps := append(Peerings(*res), map[string]any{"name": pname, "network": SelfLinkBase + peer,
			"state": state, "stateDetails": peeringDetails(state), "autoCreateRoutes": exchange, "exchangeSubnetRoutes": exchange,
			"exportCustomRoutes": peering["exportCustomRoutes"] == true, "importCustomRoutes": peering["importCustomRoutes"] == true,
			"exportSubnetRoutesWithPublicIp": true, "importSubnetRoutesWithPublicIp": false,
			"peerMtu": 1460, "stackType": "IPV4_ONLY", "updateStrategy": "INDEPENDENT"})
		setPeerings(res, ps)
		if state == PeeringActive {
			c.restate(peer, self.Name, PeeringActive)
		}
		return nil, nil
	})
}

// removePeering is networks.removePeering: the peer network's side goes INACTIVE.
func (c *Cloud) removePeering(w http.ResponseWriter, r *http.Request) {
	if c.replayed(w, r) {
		return
	}
	self, ok := c.ComputeGet(w, r, Networks)
	if !ok {
		return
	}
	var in struct {
		Name string `json:"name"`
	}
	if !ReadJSON(w, r, &in) {
		return
	}
	var peer string
	for _, p := range Peerings(self) {
		if p["name"] == in.Name {
			peer = networkName(fmt.Sprint(p["network"]))
		}
	}
	if peer == "" {
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT",
			fmt.Sprintf("There is no peering with name %s in network %s.", in.Name, self.Name), "invalid")
		return
	}
	c.StartComputeOp(w, r, "projects/"+r.PathValue("project")+"/global", "removePeering", self.Name, func() (any, *Status) {
		if res, ok := c.resources[HostCompute+" "+self.Name]; ok {
			var keep []map[string]any
			for _, p := range Peerings(*res) {
				if p["name"] != in.Name {
					keep = append(keep, p)
				}
			}
			setPeerings(res, keep)
		}
		c.restate(peer, self.Name, PeeringInactive)
		return nil, nil
	})
}
