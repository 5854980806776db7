package gcpfake

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"time"
)

// HostContainer is Google Kubernetes Engine's host.
const HostContainer = "container.googleapis.com"

const containerBase = "https://container.googleapis.com/v1/"

func init() {
	registrations = append(registrations, registerContainer)
}

// registerContainer serves GKE (container/v1): regional and zonal clusters under
// projects/{p}/locations/{l}, their node pools, and the operations that make and delete them.
// A cluster is readable from its create on, PROVISIONING until its operation is done, then
// RUNNING with an endpoint and the cluster CA; its node pools follow it. The CA is a real
// self-signed certificate made when the fake starts, so a client can parse and trust it.
func registerContainer(c *Cloud) {
	ca := selfSignedCA()
	base := "/v1/projects/{project}/locations/{location}"
	c.Handle(HostContainer, "POST "+base+"/clusters", func(w http.ResponseWriter, r *http.Request) { c.gkeCreate(w, r, ca) })
	c.Handle(HostContainer, "GET "+base+"/clusters", func(w http.ResponseWriter, r *http.Request) {
		if !c.ownProject(w, r) {
			return
		}
		out := []map[string]any{}
		for _, cl := range c.Under(HostContainer, parentOf(r)+"/clusters") {
			out = append(out, cl.Body)
		}
		WriteJSON(w, http.StatusOK, map[string]any{"clusters": out})
	})
	c.Handle(HostContainer, "GET "+base+"/clusters/{cluster}", func(w http.ResponseWriter, r *http.Request) {
		if cl, ok := c.gkeCluster(w, r); ok {
			WriteJSON(w, http.StatusOK, cl.Body)
		}
	})
	c.Handle(HostContainer, "DELETE "+base+"/clusters/{cluster}", c.gkeDelete)
	c.Handle(HostContainer, "GET "+base+"/clusters/{cluster}/nodePools", func(w http.ResponseWriter, r *http.Request) {
		if cl, ok := c.gkeCluster(w, r); ok {
			pools, _ := cl.Body["nodePools"].([]any)
			WriteJSON(w, http.StatusOK, map[string]any{"nodePools": pools})
		}
	})
	c.Handle(HostContainer, "GET "+base+"/clusters/{cluster}/nodePools/{pool}", func(w http.ResponseWriter, r *http.Request) {
		cl, ok := c.gkeCluster(w, r)
		if !ok {
			return
		}
		if p := poolOf(cl.Body, r.PathValue("pool")); p != nil {
			WriteJSON(w, http.StatusOK, p)
			return
		}
		gkeNotFound(w, cl.Name+"/nodePools/"+r.PathValue("pool"))
	})
	c.Handle(HostContainer, "POST "+base+"/clusters/{cluster}/nodePools", c.gkeCreatePool)
	// A custom method's verb shares the last segment with the pool ("{pool}:setAutoscaling"),
	// which a ServeMux wildcard cannot split: the handler does.
	c.Handle(HostContainer, "POST "+base+"/clusters/{cluster}/nodePools/{rest}", func(w http.ResponseWriter, r *http.Request) {
		pool, verb, _ := strings.Cut(r.PathValue("rest"), ":")
		if verb != "setAutoscaling" {
			WriteError(w, http.StatusNotFound, "NOT_FOUND", "The requested URL "+r.URL.Path+" was not found on this server.", "notFound")
			return
		}
		c.gkeSetAutoscaling(w, r, pool)
	})
	c.Handle(HostContainer, "GET "+base+"/operations/{op}", func(w http.ResponseWriter, r *http.Request) {
		if !c.ownProject(w, r) {
			return
		}
		name := parentOf(r) + "/operations/" + r.PathValue("op")
		op, ok := c.Operation(HostContainer, name)
		if !ok {
			gkeNotFound(w, name)
			return
		}
		WriteJSON(w, http.StatusOK, gkeOp(op))
	})
}

// gkeNotFound is GKE's 404: "Not found: <name>."
func gkeNotFound(w http.ResponseWriter, name string) {
	WriteError(w, http.StatusNotFound, "NOT_FOUND", "Not found: "+name+".", "notFound")
}

// gkeBad is GKE's 400 INVALID_ARGUMENT.
func gkeBad(w http.ResponseWriter, format string, a ...any) {
	WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf(format, a...), "badRequest")
}

func (c *Cloud) gkeCluster(w http.ResponseWriter, r *http.Request) (Resource, bool) {
	if !c.ownProject(w, r) {
		return Resource{}, false
	}
	name := parentOf(r) + "/clusters/" + r.PathValue("cluster")
	cl, ok := c.Lookup(HostContainer, name)
	if !ok {
		gkeNotFound(w, name)
		return Resource{}, false
	}
	return cl, true
}

// validGKEName is GKE's rule for cluster and node pool names: a lower-case letter, then
// lower-case letters, digits and '-', not ending in '-', at most 40 characters.
func validGKEName(n string) bool { return len(n) <= 40 && validName(n) }

// computeRef reads a network or subnetwork reference as GKE takes it (a name, a relative
// name or a self link) as the compute resource name it stands for.
func computeRef(project, region, kind, ref string) string {
	ref = strings.TrimPrefix(ref, SelfLinkBase)
	if strings.HasPrefix(ref, "projects/") {
		return ref
	}
	if kind == "networks" {
		return "projects/" + project + "/global/networks/" + ref
	}
	return "projects/" + project + "/regions/" + region + "/subnetworks/" + ref
}

// regionOf is the region of a location: the location itself, or a zone's region.
func regionOf(location string) string {
	if i := strings.LastIndex(location, "-"); i > 0 && len(location)-i == 2 {
		return location[:i]
	}
	return location
}

// busy names the unfinished operation of the service at host that works on target, or "".
func (c *Cloud) busy(host, target string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, op := range c.ops {
		if op.Service == host && !op.Done && (op.Target == target || strings.HasPrefix(op.Target, target+"/")) {
			return op.Name[strings.LastIndex(op.Name, "/")+1:]
		}
	}
	return ""
}

func (c *Cloud) gkeCreate(w http.ResponseWriter, r *http.Request, ca string) {
	if !c.ownProject(w, r) {
		return
	}
	var in struct {
		Cluster map[string]any `json:"cluster"`
	}
	if !ReadJSON(w, r, &in) {
		return
	}
	cl := in.Cluster
	if cl == nil {
		gkeBad(w, "Cluster is required.")
		return
	}
	name, _ := cl["name"].(string)
	if !validGKEName(name) {
		gkeBad(w, "Invalid value for field \"cluster.name\": %q. Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?)'.", name)
		return
	}
	location := r.PathValue("location")
	full := parentOf(r) + "/clusters/" + name
	if _, ok := c.Lookup(HostContainer, full); ok {
		WriteError(w, http.StatusConflict, "ALREADY_EXISTS", "Already exists: "+full+".", "alreadyExists")
		return
	}
	if msg := c.gkeCheck(cl, regionOf(location)); msg != "" {
		gkeBad(w, "%s", msg)
		return
	}
	pools, _ := cl["nodePools"].([]any)
	if len(pools) == 0 && cl["initialNodeCount"] == nil {
		gkeBad(w, "Cluster.initial_node_count must be greater than zero.")
		return
	}
	for _, p := range pools {
		pm, _ := p.(map[string]any)
		if msg := c.gkeCheckPool(pm); msg != "" {
			gkeBad(w, "%s", msg)
			return
		}
	}
	now := time.Now().UTC().Format(time.RFC3339)
	cl["selfLink"] = containerBase + full
	cl["location"] = location
	cl["zone"] = location
	cl["status"] = "PROVISIONING"
	cl["createTime"] = now
	cl["id"] = newUUID()[:32]
	if cl["network"] == nil {
		cl["network"] = "default"
	}
	version, _ := cl["initialClusterVersion"].(string)
	if version == "" {
		version = "1.33.5-gke.1000000"
	} else if strings.Count(version, ".") == 1 {
		version += ".5-gke.1000000"
	}
	for _, p := range pools {
		pm, _ := p.(map[string]any)
		pm["status"] = "PROVISIONING"
		pm["version"] = version
		pm["selfLink"] = containerBase + full + "/nodePools/" + fmt.Sprint(pm["name"])
	}
	c.Put(Resource{Service: HostContainer, Kind: "container.cluster", Name: full, Body: cl})
	c.gkeStartOp(w, r, "CREATE_CLUSTER", full, func() *Status {
		res, ok := c.resources[HostContainer+" "+full]
		if !ok {
			return &Status{Code: 10, Message: "the cluster was deleted while being created", Reason: "ABORTED"}
		}
		b := res.Body
		b["status"] = "RUNNING"
		b["currentMasterVersion"], b["currentNodeVersion"] = version, version
		public := fmt.Sprintf("34.76.%d.%d", c.seq%250+1, c.next()%250+1)
		private := fmt.Sprintf("10.132.%d.2", c.next()%250)
		b["endpoint"] = public
		if pc, ok := b["privateClusterConfig"].(map[string]any); ok {
			pc["privateEndpoint"], pc["publicEndpoint"] = private, public
			if pc["enablePrivateEndpoint"] == true {
				b["endpoint"] = private
			}
		}
		b["masterAuth"] = map[string]any{"clusterCaCertificate": ca}
		for _, p := range b["nodePools"].([]any) {
			p.(map[string]any)["status"] = "RUNNING"
		}
		return nil
	})
}

// gkeCheck refuses what GKE refuses of a cluster's network settings: a network or
// subnetwork that is not there, secondary ranges the subnetwork does not have, private
// nodes without VPC-native addressing, a workload pool of another project.
func (c *Cloud) gkeCheck(cl map[string]any, region string) string {
	netRef, _ := cl["network"].(string)
	if netRef != "" {
		if _, ok := c.Lookup(HostCompute, computeRef(c.Project, region, "networks", netRef)); !ok {
			return fmt.Sprintf("Network %q does not exist.", netRef)
		}
	}
	subRef, _ := cl["subnetwork"].(string)
	var sub Resource
	if subRef != "" {
		s, ok := c.Lookup(HostCompute, computeRef(c.Project, region, "subnetworks", subRef))
		if !ok || s.Pending {
			return fmt.Sprintf("Subnetwork %q does not exist.", subRef)
		}
		sub = s
		if netRef != "" && strings.TrimPrefix(fmt.Sprint(s.Body["network"]), SelfLinkBase) != computeRef(c.Project, region, "networks", netRef) {
			return fmt.Sprintf("Subnetwork %q is not in network %q.", subRef, netRef)
		}
	}
	ipa, _ := cl["ipAllocationPolicy"].(map[string]any)
	aliases := ipa != nil && ipa["useIpAliases"] == true
	for _, field := range []string{"clusterSecondaryRangeName", "servicesSecondaryRangeName"} {
		want, _ := ipa[field].(string)
		if want == "" {
			continue
		}
		if sub.Body == nil {
			return fmt.Sprintf("ip_allocation_policy.%s requires a subnetwork.", field)
		}
		found := false
		ranges, _ := sub.Body["secondaryIpRanges"].([]any)
		for _, rg := range ranges {
			if m, ok := rg.(map[string]any); ok && m["rangeName"] == want {
				found = true
			}
		}
		if !found {
			return fmt.Sprintf("Secondary range %q does not exist in network %q, subnetwork %q.", want, netRef, subRef)
		}
	}
	if pc, ok := cl["privateClusterConfig"].(map[string]any); ok && pc["enablePrivateNodes"] == true && !aliases {
		return "Private clusters must be VPC-native clusters (ip_allocation_policy.use_ip_aliases)."
	}
	if wi, ok := cl["workloadIdentityConfig"].(map[string]any); ok {
		if pool, _ := wi["workloadPool"].(string); pool != c.Project+".svc.id.goog" {
			return fmt.Sprintf("Workload pool %q is not of project %s; use %s.svc.id.goog.", pool, c.Project, c.Project)
		}
	}
	return ""
}

// gkeCheckPool refuses a node pool GKE would: no machine type, no initial nodes, autoscaling
// bounds that do not hold, a node service account of the project that does not exist.
func (c *Cloud) gkeCheckPool(p map[string]any) string {
	name, _ := p["name"].(string)
	if !validGKEName(name) {
		return fmt.Sprintf("Invalid value for field \"node_pool.name\": %q.", name)
	}
	cfg, _ := p["config"].(map[string]any)
	if mt, _ := cfg["machineType"].(string); mt == "" {
		return fmt.Sprintf("Node pool %q: machine type is required.", name)
	}
	if n, _ := p["initialNodeCount"].(float64); n < 1 {
		return fmt.Sprintf("Node pool %q: initial_node_count must be greater than zero.", name)
	}
	if as, ok := p["autoscaling"].(map[string]any); ok && as["enabled"] == true {
		lo, _ := as["totalMinNodeCount"].(float64)
		hi, _ := as["totalMaxNodeCount"].(float64)
		if lo < 0 || hi < 1 || lo > hi {
			return fmt.Sprintf("Node pool %q: total_min_node_count (%v) must be <= total_max_node_count (%v), and the maximum at least 1.", name, lo, hi)
		}
	}
	if sa, _ := cfg["serviceAccount"].(string); strings.HasSuffix(sa, "@"+c.Project+".iam.gserviceaccount.com") {
		if _, ok := c.Lookup(HostIAM, "projects/"+c.Project+"/serviceAccounts/"+sa); !ok {
			return fmt.Sprintf("Service account %q does not exist.", sa)
		}
	}
	return ""
}

func poolOf(cluster map[string]any, name string) map[string]any {
	pools, _ := cluster["nodePools"].([]any)
	for _, p := range pools {
		if m, ok := p.(map[string]any); ok && m["name"] == name {
			return m
		}
	}
	return nil
}

func (c *Cloud) gkeCreatePool(w http.ResponseWriter, r *http.Request) {
	cl, ok := c.gkeCluster(w, r)
	if !ok {
		return
	}
	var in struct {
		NodePool map[string]any `json:"nodePool"`
	}
	if !ReadJSON(w, r, &in) {
		return
	}
	p := in.NodePool
	if p == nil {
		gkeBad(w, "Node pool is required.")
		return
	}
	name, _ := p["name"].(string)
	if poolOf(cl.Body, name) != nil {
		WriteError(w, http.StatusConflict, "ALREADY_EXISTS", "Already exists: "+cl.Name+"/nodePools/"+name+".", "alreadyExists")
		return
	}
	if msg := c.gkeCheckPool(p); msg != "" {
		gkeBad(w, "%s", msg)
		return
	}
	if op := c.busy(HostContainer, cl.Name); op != "" || cl.Body["status"] != "RUNNING" {
		gkeIncompatible(w, cl, op)
		return
	}
	p["status"] = "PROVISIONING"
	p["version"] = cl.Body["currentNodeVersion"]
	p["selfLink"] = containerBase + cl.Name + "/nodePools/" + name
	c.Update(HostContainer, cl.Name, func(res *Resource) {
		pools, _ := res.Body["nodePools"].([]any)
		res.Body["nodePools"] = append(pools, p)
		res.Body["status"] = "RECONCILING"
	})
	c.gkeStartOp(w, r, "CREATE_NODE_POOL", cl.Name+"/nodePools/"+name, func() *Status {
		res, ok := c.resources[HostContainer+" "+cl.Name]
		if !ok {
			return &Status{Code: 10, Message: "the cluster was deleted", Reason: "ABORTED"}
		}
		res.Body["status"] = "RUNNING"
		if pm := poolOf(res.Body, name); pm != nil {
			pm["status"] = "RUNNING"
		}
		return nil
	})
}

// gkeSetAutoscaling changes a node pool's autoscaling bounds (an operation, during which
// the cluster is RECONCILING).
func (c *Cloud) gkeSetAutoscaling(w http.ResponseWriter, r *http.Request, pool string) {
	cl, ok := c.gkeCluster(w, r)
	if !ok {
		return
	}
	if poolOf(cl.Body, pool) == nil {
		gkeNotFound(w, cl.Name+"/nodePools/"+pool)
		return
	}
	var in struct {
		Autoscaling map[string]any `json:"autoscaling"`
	}
	if !ReadJSON(w, r, &in) {
		return
	}
	if msg := c.gkeCheckPool(map[string]any{"name": pool, "initialNodeCount": 1.0, "config": map[string]any{"machineType": "-"},
		"autoscaling": in.Autoscaling}); msg != "" {
		gkeBad(w, "%s", msg)
		return
	}
	if op := c.busy(HostContainer, cl.Name); op != "" || cl.Body["status"] != "RUNNING" {
		gkeIncompatible(w, cl, op)
		return
	}
	c.Update(HostContainer, cl.Name, func(res *Resource) { res.Body["status"] = "RECONCILING" })
	c.gkeStartOp(w, r, "SET_NODE_POOL_SIZE", cl.Name+"/nodePools/"+pool, func() *Status {
		res, ok := c.resources[HostContainer+" "+cl.Name]
		if !ok {
			return &Status{Code: 10, Message: "the cluster was deleted", Reason: "ABORTED"}
		}
		res.Body["status"] = "RUNNING"
		if pm := poolOf(res.Body, pool); pm != nil {
			pm["autoscaling"] = in.Autoscaling
		}
		return nil
	})
}

// gkeIncompatible is GKE's refusal of a change to a cluster that another operation works on.
func gkeIncompatible(w http.ResponseWriter, cl Resource, op string) {
	msg := "Cluster " + cl.Name + " is not ready for this operation; wait until it is RUNNING."
	switch {
	case op != "" && cl.Body["status"] == "PROVISIONING":
		msg = fmt.Sprintf("Operation %s is currently creating cluster %s. Please wait and try again once it is done.", op, cl.Body["name"])
	case op != "":
		msg = "Cluster is running incompatible operation " + op + "."
	}
	WriteError(w, http.StatusBadRequest, "FAILED_PRECONDITION", msg, "failedPrecondition")
}

func (c *Cloud) gkeDelete(w http.ResponseWriter, r *http.Request) {
	cl, ok := c.gkeCluster(w, r)
	if !ok {
		return
	}
	if op := c.busy(HostContainer, cl.Name); op != "" {
		gkeIncompatible(w, cl, op)
		return
	}
	c.Update(HostContainer, cl.Name, func(res *Resource) {
		res.Body["status"] = "STOPPING"
		for _, p := range res.Body["nodePools"].([]any) {
			p.(map[string]any)["status"] = "STOPPING"
		}
	})
	c.gkeStartOp(w, r, "DELETE_CLUSTER", cl.Name, func() *Status {
		delete(c.resources, HostContainer+" "+cl.Name)
		return nil
	})
}

// gkeStartOp starts a GKE operation on target and answers it. GKE has no request ids: a
// create re-sent is refused as ALREADY_EXISTS instead.
func (c *Cloud) gkeStartOp(w http.ResponseWriter, r *http.Request, typ, target string, finish func() *Status) {
	name := fmt.Sprintf("%s/operations/operation-%d-%s", parentOf(r), time.Now().UnixMilli(), newUUID()[:8])
	op, _ := c.StartOp(HostContainer, name, typ, target, "", func() (any, *Status) { return nil, finish() })
	WriteJSON(w, http.StatusOK, gkeOp(*op))
}

// gkeOp is op as a container/v1 Operation: its short name, status PENDING, RUNNING or
// DONE, links to itself and its target, and a google.rpc.Status once it failed.
func gkeOp(op Op) map[string]any {
	parent, short, _ := strings.Cut(op.Name, "/operations/")
	location := parent[strings.LastIndex(parent, "/")+1:]
	out := map[string]any{"name": short, "operationType": op.Type, "status": op.State(),
		"selfLink": containerBase + op.Name, "targetLink": containerBase + op.Target,
		"location": location, "zone": location, "startTime": op.Started.UTC().Format(time.RFC3339Nano)}
	if op.Done {
		out["endTime"] = time.Now().UTC().Format(time.RFC3339Nano)
		if op.Err != nil {
			out["error"] = map[string]any{"code": op.Err.Code, "message": op.Err.Message,
				"details": []map[string]any{ErrorInfo(op.Err.Reason, nil)}}
			out["statusMessage"] = op.Err.Message
		}
	}
	return out
}

// selfSignedCA is a cluster CA certificate as GKE gives it in masterAuth: base64 of its PEM.
func selfSignedCA() string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "gcpfake-cluster-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
