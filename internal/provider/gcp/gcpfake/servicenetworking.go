package gcpfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
)

// HostServiceNetworking is the Service Networking API's host.
const HostServiceNetworking = "servicenetworking.googleapis.com"

const hostCRM = "cloudresourcemanager.googleapis.com"

// PSAService is the service private services access connects (Cloud SQL, Memorystore).
const PSAService = "services/servicenetworking.googleapis.com"

// PSAPeering is the peering a private services access connection makes on the consumer's
// network.
const PSAPeering = "servicenetworking-googleapis-com"

// KindConnection is the kind the fake lists private services access connections under.
const KindConnection = "servicenetworking#connection"

const snMetadata = "type.googleapis.com/google.protobuf.Empty"

func init() {
	registrations = append(registrations, registerServiceNetworking)
}

// registerServiceNetworking serves private services access (servicenetworking/v1): a
// connection per consumer network, made and deleted by google.longrunning operations, which
// peers the network with the service producer's network; and Resource Manager's
// projects.get, which is where a caller learns the project number the connection names its
// network by.
func registerServiceNetworking(c *Cloud) {
	base := "/v1/services/{service}/connections"
	c.Handle(HostServiceNetworking, "POST "+base, c.snCreate)
	c.Handle(HostServiceNetworking, "GET "+base, c.snList)
	// connections.deleteConnection is a POST on the connection's name
	// (POST v1/{name=services/*/connections/*}), which is how the Go client sends it.
	c.Handle(HostServiceNetworking, "POST "+base+"/{name}", func(w http.ResponseWriter, r *http.Request) {
		c.snDelete(w, r, r.PathValue("name"))
	})
	c.Handle(HostServiceNetworking, "GET /v1/operations/{op}", func(w http.ResponseWriter, r *http.Request) {
		op, ok := c.Operation(HostServiceNetworking, "operations/"+r.PathValue("op"))
		if !ok {
			NotFound(w, "operations/"+r.PathValue("op"))
			return
		}
		WriteJSON(w, http.StatusOK, LRO(op, snMetadata))
	})
	// Another file may serve Resource Manager's projects already; one handler is enough.
	if _, pattern := c.muxes[hostCRM].Handler(httptest.NewRequest(http.MethodGet, "/v3/projects/"+c.Project, nil)); pattern == "" {
		c.Handle(hostCRM, "GET /v3/projects/{project}", func(w http.ResponseWriter, r *http.Request) {
			if p := r.PathValue("project"); p != c.Project && p != ProjectNumber {
				WriteError(w, http.StatusForbidden, "PERMISSION_DENIED",
					fmt.Sprintf("The caller does not have permission on project %s (or it may not exist)", p), "forbidden")
				return
			}
			WriteJSON(w, http.StatusOK, map[string]any{"name": "projects/" + ProjectNumber, "projectId": c.Project,
				"displayName": c.Project, "state": "ACTIVE", "parent": "organizations/1"})
		})
	}
}

// consumerNetwork reads a connection's network, "projects/{number or id}/global/networks/{n}",
// as the name of the compute network it is and as Google answers it (by project number).
func (c *Cloud) consumerNetwork(network string) (computeName, answered string, ok bool) {
	parts := strings.Split(network, "/")
	if len(parts) != 5 || parts[0] != "projects" || parts[2] != "global" || parts[3] != "networks" || parts[4] == "" {
		return "", "", false
	}
	if parts[1] != c.Project && parts[1] != ProjectNumber {
		return "", "", false
	}
	return "projects/" + c.Project + "/global/networks/" + parts[4], "projects/" + ProjectNumber + "/global/networks/" + parts[4], true
}

func connectionName(answered string) string { return PSAService + "/connections/" + answered }

// inFlight is the unfinished operation on target, if any. The lock is held.
func (c *Cloud) inFlight(target string) *Op {
	for _, op := range c.ops {
		if op.Service == HostServiceNetworking && op.Target == target && !op.Done {
			return op
		}
	}
	return nil
}

func (c *Cloud) snService(w http.ResponseWriter, r *http.Request) bool {
	if s := "services/" + r.PathValue("service"); s != PSAService {
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("Service %s is not a peering service.", s), "badRequest")
		return false
	}
	return true
}

// snCreate is connections.create: the reserved ranges must be the network's VPC_PEERING
// global addresses; once the operation is done the network holds an ACTIVE peering to the
// producer's network (the producer peers back by itself). A create while one for the same
// network is under way answers that operation.
func (c *Cloud) snCreate(w http.ResponseWriter, r *http.Request) {
	if !c.snService(w, r) {
		return
	}
	var in struct {
		Network               string   `json:"network"`
		ReservedPeeringRanges []string `json:"reservedPeeringRanges"`
	}
	if !ReadJSON(w, r, &in) {
		return
	}
	netName, answered, ok := c.consumerNetwork(in.Network)
	if !ok {
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT",
			fmt.Sprintf("Invalid network name %q; expected projects/{project}/global/networks/{network}.", in.Network), "badRequest")
		return
	}
	if n, ok := c.Lookup(HostCompute, netName); !ok || n.Pending {
		WriteError(w, http.StatusBadRequest, "FAILED_PRECONDITION", fmt.Sprintf("Network %s does not exist.", in.Network), "failedPrecondition")
		return
	}
	if len(in.ReservedPeeringRanges) == 0 {
		WriteError(w, http.StatusBadRequest, "FAILED_PRECONDITION",
			"Allocated IP ranges are required: reserve a global address with purpose VPC_PEERING and name it in reservedPeeringRanges.", "failedPrecondition")
		return
	}
	for _, rng := range in.ReservedPeeringRanges {
		a, ok := c.Lookup(HostCompute, "projects/"+c.Project+"/global/addresses/"+rng)
		if !ok || a.Pending || a.Body["purpose"] != "VPC_PEERING" || networkName(fmt.Sprint(a.Body["network"])) != netName {
			WriteError(w, http.StatusBadRequest, "FAILED_PRECONDITION",
				fmt.Sprintf("Allocated IP range '%s' not found in network.", rng), "failedPrecondition")
			return
		}
	}
	full := connectionName(answered)
	if have, ok := c.Lookup(HostServiceNetworking, full); ok {
		b, _ := json.Marshal(have.Body["reservedPeeringRanges"])
		w2, _ := json.Marshal(in.ReservedPeeringRanges)
		if string(b) != string(w2) {
			WriteError(w, http.StatusBadRequest, "FAILED_PRECONDITION",
				"Cannot modify allocated ranges in CreateConnection. Please use UpdateConnection.", "failedPrecondition")
			return
		}
	}
	c.mu.Lock()
	running := c.inFlight(full)
	var cp Op
	if running != nil {
		cp = *running
	}
	c.mu.Unlock()
	if running != nil {
		WriteJSON(w, http.StatusOK, LRO(cp, snMetadata))
		return
	}
	conn := map[string]any{"network": answered, "reservedPeeringRanges": in.ReservedPeeringRanges,
		"peering": PSAPeering, "service": PSAService}
	op, _ := c.StartOp(HostServiceNetworking, "operations/pssn.p24-"+ProjectNumber+"-"+newUUID(), "create", full, "", func() (any, *Status) {
		res, ok := c.resources[HostCompute+" "+netName]
		if !ok {
			return nil, &Status{Code: 9, Message: fmt.Sprintf("Network %s does not exist.", in.Network), Reason: "FAILED_PRECONDITION"}
		}
		c.put(Resource{Service: HostServiceNetworking, Kind: KindConnection, Name: full, Body: conn})
		ps := Peerings(*res)
		found := false
		for _, p := range ps {
			found = found || p["name"] == PSAPeering
		}
		if !found {
			ps = append(ps, map[string]any{"name": PSAPeering,
				"network": SelfLinkBase + "projects/sn-tenant-" + ProjectNumber + "/global/networks/servicenetworking",
				"state":   PeeringActive, "stateDetails": peeringDetails(PeeringActive),
				"autoCreateRoutes": true, "exchangeSubnetRoutes": true, "exportCustomRoutes": false, "importCustomRoutes": false,
				"peerMtu": 1460, "stackType": "IPV4_ONLY", "updateStrategy": "INDEPENDENT"})
			setPeerings(res, ps)
		}
		return map[string]any{"@type": "type.googleapis.com/google.cloud.servicenetworking.v1.Connection"}, nil
	})
	WriteJSON(w, http.StatusOK, LRO(*op, snMetadata))
}

// snList is connections.list; Google requires the network parameter.
func (c *Cloud) snList(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("service") != "-" && !c.snService(w, r) {
		return
	}
	network := r.URL.Query().Get("network")
	_, answered, ok := c.consumerNetwork(network)
	if !ok {
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT",
			fmt.Sprintf("Invalid network name %q; expected projects/{project}/global/networks/{network}.", network), "badRequest")
		return
	}
	out := []map[string]any{}
	if conn, ok := c.Lookup(HostServiceNetworking, connectionName(answered)); ok {
		out = append(out, conn.Body)
	}
	WriteJSON(w, http.StatusOK, map[string]any{"connections": out})
}

// snDelete is connections.deleteConnection: refused (in its operation) while a producer
// service (a Cloud SQL instance, a Memorystore instance) still has an address in the range.
func (c *Cloud) snDelete(w http.ResponseWriter, r *http.Request, name string) {
	if !c.snService(w, r) {
		return
	}
	var in struct {
		ConsumerNetwork string `json:"consumerNetwork"`
	}
	if !ReadJSON(w, r, &in) {
		return
	}
	netName, answered, ok := c.consumerNetwork(in.ConsumerNetwork)
	if !ok {
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT",
			fmt.Sprintf("Invalid consumer network %q; expected projects/{project}/global/networks/{network}.", in.ConsumerNetwork), "badRequest")
		return
	}
	full := connectionName(answered)
	if _, ok := c.Lookup(HostServiceNetworking, full); !ok || name != PSAPeering {
		NotFound(w, PSAService+"/connections/"+name)
		return
	}
	c.mu.Lock()
	running := c.inFlight(full)
	var cp Op
	if running != nil {
		cp = *running
	}
	c.mu.Unlock()
	if running != nil {
		WriteJSON(w, http.StatusOK, LRO(cp, snMetadata))
		return
	}
	op, _ := c.StartOp(HostServiceNetworking, "operations/pssn.p24-"+ProjectNumber+"-"+newUUID(), "delete", full, "", func() (any, *Status) {
		if by := c.producerUsing(netName); by != "" {
			return nil, &Status{Code: 9, Reason: "FAILED_PRECONDITION",
				Message: "Failed to delete connection; Producer services (e.g. CloudSQL, Cloud Memstore, etc.) are still using this connection: " + by}
		}
		delete(c.resources, HostServiceNetworking+" "+full)
		if res, ok := c.resources[HostCompute+" "+netName]; ok {
			var keep []map[string]any
			for _, p := range Peerings(*res) {
				if p["name"] != PSAPeering {
					keep = append(keep, p)
				}
			}
			setPeerings(res, keep)
		}
		return map[string]any{"@type": "type.googleapis.com/google.protobuf.Empty"}, nil
	})
	WriteJSON(w, http.StatusOK, LRO(*op, snMetadata))
}

// PSARanges are the ranges the private services access connection of a compute network
// (netPath, "projects/<p>/global/networks/<n>") reserves, and whether it has a connection.
// Cloud SQL and Memorystore give a private-IP instance its address from these, and refuse
// one on a network without a connection.
func (c *Cloud) PSARanges(netPath string) ([]string, bool) {
	_, answered, ok := c.consumerNetwork(netPath)
	if !ok {
		return nil, false
	}
	conn, ok := c.Lookup(HostServiceNetworking, connectionName(answered))
	if !ok {
		return nil, false
	}
	var ranges []string
	for _, r := range asSlice(conn.Body["reservedPeeringRanges"]) {
		ranges = append(ranges, fmt.Sprint(r))
	}
	return ranges, true
}

// asSlice reads a list held as []string (as put) or []any (as decoded from JSON).
func asSlice(v any) []any {
	switch l := v.(type) {
	case []any:
		return l
	case []string:
		out := make([]any, len(l))
		for i, s := range l {
			out[i] = s
		}
		return out
	}
	return nil
}

// producerUsing names a Cloud SQL or Memorystore instance on the network (netName, a compute
// network's resource name), or "". The lock is held.
func (c *Cloud) producerUsing(netName string) string {
	short := "/global/networks/" + netName[strings.LastIndex(netName, "/")+1:] + `"`
	for _, r := range c.resources {
		if r.Service != "sqladmin.googleapis.com" && r.Service != "redis.googleapis.com" {
			continue
		}
		if b, _ := json.Marshal(r.Body); strings.Contains(string(b), short) {
			return r.Name
		}
	}
	return ""
}
