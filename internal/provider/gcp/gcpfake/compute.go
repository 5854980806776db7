package gcpfake

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// HostCompute is Compute Engine's host.
const HostCompute = "compute.googleapis.com"

// SelfLinkBase is what compute self links start with.
const SelfLinkBase = "https://www.googleapis.com/compute/v1/"

// ComputeCollection is one compute resource type the fake serves: insert (an operation),
// get, list, delete (an operation), in a global, regional or zonal scope.
type ComputeCollection struct {
	// Scope is "global", "regions" or "zones".
	Scope string
	// Name is the collection's path segment ("networks", "subnetworks").
	Name string
	// Kind is the resources' kind ("compute#network").
	Kind string
	// Check refuses an insert: it returns the HTTP status, reason and message of the
	// refusal, or status 0. It runs without the lock; scope is the region or zone ("" when
	// global).
	Check func(c *Cloud, scope string, in map[string]any) (status int, reason, message string)
	// Done fills in what Google adds when the insert is done (under the lock).
	Done func(c *Cloud, self *Resource)
	// InUse names what still uses the resource (a network's subnetworks), which refuses
	// its delete; "" when nothing does. It runs without the lock.
	InUse func(c *Cloud, self Resource) string
	// Gone runs when a delete is done (under the lock), for what goes with the resource.
	Gone func(c *Cloud, self Resource)
	// Read runs (under the lock) before a read of the resource answers: what Google does
	// by itself as time passes (a managed group's rolling update), one step per read.
	Read func(c *Cloud, self *Resource)
}

// ComputePath is the path pattern of a collection under a scope.
func ComputePath(scope string) string {
	switch scope {
	case "regions":
		return "/compute/v1/projects/{project}/regions/{scope}/"
	case "zones":
		return "/compute/v1/projects/{project}/zones/{scope}/"
	}
	return "/compute/v1/projects/{project}/global/"
}

// computeParent is the resource-name prefix of the request's scope.
func (c *Cloud) computeParent(r *http.Request, scope string) string {
	switch scope {
	case "regions", "zones":
		return "projects/" + r.PathValue("project") + "/" + scope + "/" + r.PathValue("scope")
	}
	return "projects/" + r.PathValue("project") + "/global"
}

// RegisterCompute serves a compute collection.
func (c *Cloud) RegisterCompute(k ComputeCollection) {
	base := ComputePath(k.Scope) + k.Name
	c.Handle(HostCompute, "POST "+base, func(w http.ResponseWriter, r *http.Request) { c.computeInsert(w, r, k) })
	c.Handle(HostCompute, "GET "+base, func(w http.ResponseWriter, r *http.Request) {
		if !c.ownProject(w, r) {
			return
		}
		var items []map[string]any
		for _, res := range c.Under(HostCompute, c.computeParent(r, k.Scope)+"/"+k.Name) {
			items = append(items, res.Body)
		}
		page, next := Page(r, items)
		out := map[string]any{"kind": k.Kind + "List", "items": page,
			"selfLink": SelfLinkBase + c.computeParent(r, k.Scope) + "/" + k.Name}
		if next != "" {
			out["nextPageToken"] = next
		}
		WriteJSON(w, http.StatusOK, out)
	})
	c.Handle(HostCompute, "GET "+base+"/{name}", func(w http.ResponseWriter, r *http.Request) {
		if res, ok := c.ComputeGet(w, r, k); ok {
			WriteJSON(w, http.StatusOK, res.Body)
		}
	})
	c.Handle(HostCompute, "DELETE "+base+"/{name}", func(w http.ResponseWriter, r *http.Request) { c.computeDelete(w, r, k) })
	c.Handle(HostCompute, "PATCH "+base+"/{name}", func(w http.ResponseWriter, r *http.Request) { c.computePatch(w, r, k) })
}

// computePatch merges the request's fields into the resource (PATCH semantics: a field
// given replaces the stored one, lists whole), as an operation.
func (c *Cloud) computePatch(w http.ResponseWriter, r *http.Request, k ComputeCollection) {
	if c.replayed(w, r) {
		return
	}
	res, ok := c.ComputeGet(w, r, k)
	if !ok {
		return
	}
	var in map[string]any
	if !ReadJSON(w, r, &in) {
		return
	}
	for _, f := range []string{"name", "id", "selfLink", "kind", "creationTimestamp"} {
		delete(in, f)
	}
	c.StartComputeOp(w, r, c.computeParent(r, k.Scope), "patch", res.Name, func() (any, *Status) {
		stored, ok := c.resources[HostCompute+" "+res.Name]
		if !ok {
			return nil, &Status{Code: 5, Message: "the resource was deleted meanwhile", Reason: "RESOURCE_NOT_FOUND"}
		}
		for f, v := range in {
			stored.Body[f] = v
		}
		// Every change gives the resource a new fingerprint, as Google's do.
		stored.Body["fingerprint"] = fmt.Sprintf("fp%d", c.next())
		return nil, nil
	})
}

// ComputeGet reads the resource the request's path names, answering 404 when it is not
// there; handlers of a collection's custom verbs use it too.
func (c *Cloud) ComputeGet(w http.ResponseWriter, r *http.Request, k ComputeCollection) (Resource, bool) {
	if !c.ownProject(w, r) {
		return Resource{}, false
	}
	full := c.computeParent(r, k.Scope) + "/" + k.Name + "/" + r.PathValue("name")
	if k.Read != nil {
		c.mu.Lock()
		if stored, ok := c.resources[HostCompute+" "+full]; ok && !stored.Pending {
			k.Read(c, stored)
		}
		c.mu.Unlock()
	}
	res, ok := c.Lookup(HostCompute, full)
	if !ok || res.Pending {
		WriteError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("The resource '%s' was not found", full), "notFound")
		return Resource{}, false
	}
	return res, true
}

// Made are the compute resources whose insert finished, by full name, in order, each time
// one was made (a name made, deleted and made again is there twice): a test counts what a
// job made across crashes and re-sent calls with it.
func (c *Cloud) Made() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.made...)
}

// ComputeOp answers op in compute's shape (compute#operation).
func (c *Cloud) ComputeOp(w http.ResponseWriter, op Op) { WriteJSON(w, http.StatusOK, computeOp(op)) }

// replayed answers a requestId seen before with that call's operation, as Compute Engine does.
func (c *Cloud) replayed(w http.ResponseWriter, r *http.Request) bool {
	id := r.URL.Query().Get("requestId")
	if id == "" {
		return false
	}
	c.mu.Lock()
	op, ok := c.requests[HostCompute+" "+id]
	var cp Op
	if ok {
		cp = *op
	}
	c.mu.Unlock()
	if ok {
		WriteJSON(w, http.StatusOK, computeOp(cp))
	}
	return ok
}

// StartComputeOp starts an operation on a compute resource (target, a resource name) in the
// scope of parent ("projects/p/global", "projects/p/regions/r"), deduplicated by the
// request's requestId, and answers it.
func (c *Cloud) StartComputeOp(w http.ResponseWriter, r *http.Request, parent, typ, target string, finish func() (any, *Status)) {
	name := fmt.Sprintf("operation-%d-%s", time.Now().UnixMilli(), newUUID()[:13])
	op, _ := c.StartOp(HostCompute, parent+"/operations/"+name, typ, target, r.URL.Query().Get("requestId"), finish)
	WriteJSON(w, http.StatusOK, computeOp(*op))
}

func (c *Cloud) computeInsert(w http.ResponseWriter, r *http.Request, k ComputeCollection) {
	if !c.ownProject(w, r) || c.replayed(w, r) {
		return
	}
	var in map[string]any
	if !ReadJSON(w, r, &in) {
		return
	}
	if src := r.URL.Query().Get("sourceInstanceTemplate"); src != "" {
		// instances.insert names its template as a query parameter; the instance answers
		// it as a field.
		in["sourceInstanceTemplate"] = src
	}
	name, _ := in["name"].(string)
	if !validName(name) {
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT",
			fmt.Sprintf("Invalid value for field 'resource.name': '%s'. Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'", name), "invalid")
		return
	}
	parent := c.computeParent(r, k.Scope)
	full := parent + "/" + k.Name + "/" + name
	if _, ok := c.Lookup(HostCompute, full); ok {
		AlreadyExists(w, full)
		return
	}
	if k.Check != nil {
		if status, reason, msg := k.Check(c, r.PathValue("scope"), in); status != 0 {
			WriteError(w, status, statusName(status), msg, reason)
			return
		}
	}
	c.mu.Lock()
	in["id"] = fmt.Sprint(5000000000000000000 + c.next())
	c.mu.Unlock()
	in["kind"], in["selfLink"] = k.Kind, SelfLinkBase+full
	in["creationTimestamp"] = time.Now().Format("2006-01-02T15:04:05.000-07:00")
	if k.Scope != "global" {
		in[strings.TrimSuffix(k.Scope, "s")] = SelfLinkBase + parent
	}
	c.Put(Resource{Service: HostCompute, Kind: k.Kind, Name: full, Body: in, Pending: true})
	c.StartComputeOp(w, r, parent, "insert", full, func() (any, *Status) {
		res, ok := c.resources[HostCompute+" "+full]
		if !ok {
			return nil, &Status{Code: 10, Message: "deleted while being created", Reason: "RESOURCE_NOT_READY"}
		}
		res.Pending = false
		c.made = append(c.made, full)
		if k.Done != nil {
			k.Done(c, res)
		}
		return nil, nil
	})
}

func (c *Cloud) computeDelete(w http.ResponseWriter, r *http.Request, k ComputeCollection) {
	if c.replayed(w, r) {
		return
	}
	res, ok := c.ComputeGet(w, r, k)
	if !ok {
		return
	}
	if k.InUse != nil {
		if by := k.InUse(c, res); by != "" {
			WriteError(w, http.StatusBadRequest, "FAILED_PRECONDITION",
				fmt.Sprintf("The %s resource '%s' is already being used by '%s'", strings.TrimSuffix(k.Name, "s"), res.Name, by),
				"resourceInUseByAnotherResource")
			return
		}
	}
	c.StartComputeOp(w, r, c.computeParent(r, k.Scope), "delete", res.Name, func() (any, *Status) {
		delete(c.resources, HostCompute+" "+res.Name)
		if k.Gone != nil {
			k.Gone(c, res)
		}
		return nil, nil
	})
}

// computeOp is op as a compute#operation.
func computeOp(op Op) map[string]any {
	parent, _, _ := strings.Cut(op.Name, "/operations/")
	short := op.Name[strings.LastIndex(op.Name, "/")+1:]
	out := map[string]any{"kind": "compute#operation", "id": fmt.Sprint(op.Started.UnixNano()), "name": short,
		"operationType": op.Type, "targetLink": SelfLinkBase + op.Target, "status": op.State(),
		"user": "groundwork@" + Project + ".iam.gserviceaccount.com", "progress": 0,
		"insertTime": op.Started.Format("2006-01-02T15:04:05.000-07:00"), "selfLink": SelfLinkBase + op.Name}
	if i := strings.Index(parent, "/regions/"); i >= 0 {
		out["region"] = SelfLinkBase + parent
	}
	if i := strings.Index(parent, "/zones/"); i >= 0 {
		out["zone"] = SelfLinkBase + parent
	}
	if op.Done {
		out["progress"] = 100
		out["endTime"] = time.Now().Format("2006-01-02T15:04:05.000-07:00")
		if op.Err != nil {
			out["error"] = map[string]any{"errors": []map[string]any{{"code": op.Err.Reason, "message": op.Err.Message}}}
			out["httpErrorStatusCode"] = httpOf(op.Err.Code)
			out["httpErrorMessage"] = statusName(httpOf(op.Err.Code))
		}
	}
	return out
}

func httpOf(rpc int) int {
	switch rpc {
	case 3, 9:
		return 400
	case 5:
		return 404
	case 6, 10:
		return 409
	case 7:
		return 403
	case 8:
		return 429
	case 14:
		return 503
	}
	return 500
}

func init() {
	registrations = append(registrations, registerComputeCore)
}

// registerComputeCore serves compute's operations, VPC networks (custom mode), subnetworks
// and global addresses (the ranges private services access reserves).
func registerComputeCore(c *Cloud) {
	for _, scope := range []string{"global", "regions", "zones"} {
		c.Handle(HostCompute, "GET "+ComputePath(scope)+"operations/{op}", func(w http.ResponseWriter, r *http.Request) {
			if !c.ownProject(w, r) {
				return
			}
			name := c.computeParent(r, scope) + "/operations/" + r.PathValue("op")
			op, ok := c.Operation(HostCompute, name)
			if !ok {
				NotFound(w, name)
				return
			}
			c.ComputeOp(w, op)
		})
	}
	c.RegisterCompute(Networks)
	c.RegisterCompute(Subnetworks)
	c.RegisterCompute(GlobalAddresses)
}

// Networks are VPC networks. Groundwork makes them in custom mode; a network with
// subnetworks (or anything else in it) is not deleted.
var Networks = ComputeCollection{Scope: "global", Name: "networks", Kind: "compute#network",
	Check: func(_ *Cloud, _ string, in map[string]any) (int, string, string) {
		if _, ok := in["IPv4Range"]; ok {
			return 400, "invalid", "Legacy networks are not supported."
		}
		return 0, "", ""
	},
	Done: func(_ *Cloud, self *Resource) {
		if self.Body["routingConfig"] == nil {
			self.Body["routingConfig"] = map[string]any{"routingMode": "REGIONAL"}
		}
	},
	InUse: func(c *Cloud, self Resource) string {
		link := SelfLinkBase + self.Name
		for _, r := range c.Resources() {
			if r.Service == HostCompute && r.Name != self.Name && r.Body["network"] == link {
				return SelfLinkBase + r.Name
			}
		}
		return ""
	},
}

// Subnetworks are a network's subnets in a region: the network must exist, and two subnets
// of one network may not overlap.
var Subnetworks = ComputeCollection{Scope: "regions", Name: "subnetworks", Kind: "compute#subnetwork",
	Check: func(c *Cloud, _ string, in map[string]any) (int, string, string) {
		netLink, _ := in["network"].(string)
		if _, ok := c.Lookup(HostCompute, strings.TrimPrefix(netLink, SelfLinkBase)); !ok {
			return 400, "invalid", fmt.Sprintf("Invalid value for field 'resource.network': '%s'. The referenced network resource cannot be found.", netLink)
		}
		cidr, _ := in["ipCidrRange"].(string)
		if !validCIDR(cidr) {
			return 400, "invalid", fmt.Sprintf("Invalid value for field 'resource.ipCidrRange': '%s'. Invalid IPCidrRange.", cidr)
		}
		for _, r := range c.Resources() {
			if r.Kind == "compute#subnetwork" && r.Body["network"] == netLink && overlaps(fmt.Sprint(r.Body["ipCidrRange"]), cidr) {
				return 400, "invalid", fmt.Sprintf("Invalid IPCidrRange: %s conflicts with existing subnetwork '%s'.", cidr, r.Body["name"])
			}
		}
		return 0, "", ""
	},
	Done: func(_ *Cloud, self *Resource) {
		cidr, _ := self.Body["ipCidrRange"].(string)
		self.Body["gatewayAddress"] = gateway(cidr)
		self.Body["stackType"] = "IPV4_ONLY"
	},
}

// GlobalAddresses are reserved ranges and addresses; Groundwork reserves the range private
// services access peers (purpose VPC_PEERING).
var GlobalAddresses = ComputeCollection{Scope: "global", Name: "addresses", Kind: "compute#address",
	Check: func(c *Cloud, _ string, in map[string]any) (int, string, string) {
		if in["purpose"] == "VPC_PEERING" {
			netLink, _ := in["network"].(string)
			if _, ok := c.Lookup(HostCompute, strings.TrimPrefix(netLink, SelfLinkBase)); !ok {
				return 400, "invalid", fmt.Sprintf("Invalid value for field 'resource.network': '%s'. The referenced network resource cannot be found.", netLink)
			}
			if pl, ok := in["prefixLength"].(float64); !ok || pl < 8 || pl > 29 {
				return 400, "invalid", "Invalid value for field 'resource.prefixLength'."
			}
		}
		return 0, "", ""
	},
	// A range a private services access connection names is the connection's until the
	// connection is deleted.
	InUse: func(c *Cloud, self Resource) string {
		short := self.Name[strings.LastIndex(self.Name, "/")+1:]
		for _, r := range c.Resources() {
			if r.Kind != KindConnection {
				continue
			}
			ranges, _ := r.Body["reservedPeeringRanges"].([]any)
			for _, rng := range ranges {
				if rng == short {
					return r.Name
				}
			}
		}
		return ""
	},
	Done: func(_ *Cloud, self *Resource) {
		self.Body["status"] = "RESERVED"
		if self.Body["address"] == nil {
			self.Body["address"] = "10.240.0.0"
		}
	},
}
