package gcpfake

import (
	"net/http"
	"strconv"
	"strings"
)

func init() {
	registrations = append(registrations, func(c *Cloud) {
		base := "/v1/projects/{project}/locations/{location}/clusters/{cluster}"
		c.Handle(HostContainer, "PUT "+base, c.gkeUpdate)
		c.Handle(HostContainer, "DELETE "+base+"/nodePools/{pool}", c.gkeDeletePool)
	})
}

// gkeUpdate is clusters.update with update.desiredMasterVersion: the control plane is
// upgraded by an UPGRADE_MASTER operation, during which the cluster is RECONCILING. As GKE
// does, it refuses a downgrade and a jump of more than one minor version; a MAJOR.MINOR
// version becomes that minor's current patch. Other updates are not served.
func (c *Cloud) gkeUpdate(w http.ResponseWriter, r *http.Request) {
	cl, ok := c.gkeCluster(w, r)
	if !ok {
		return
	}
	var in struct {
		Update map[string]any `json:"update"`
	}
	if !ReadJSON(w, r, &in) {
		return
	}
	want, _ := in.Update["desiredMasterVersion"].(string)
	if want == "" || len(in.Update) != 1 {
		gkeBad(w, "The fake serves clusters.update with desiredMasterVersion alone.")
		return
	}
	have, _ := cl.Body["currentMasterVersion"].(string)
	h, hok := gkeMinor(have)
	v, vok := gkeMinor(want)
	switch {
	case !vok:
		gkeBad(w, "Master version %q is unsupported.", want)
		return
	case hok && (v[0] != h[0] || v[1] < h[1]):
		gkeBad(w, "Master cannot be downgraded from %q to %q.", have, want)
		return
	case hok && v[1] > h[1]+1:
		gkeBad(w, "Master cannot be upgraded to %q from %q: upgrade one minor version at a time.", want, have)
		return
	}
	if op := c.busy(HostContainer, cl.Name); op != "" || cl.Body["status"] != "RUNNING" {
		gkeIncompatible(w, cl, op)
		return
	}
	if strings.Count(want, ".") == 1 {
		want += ".5-gke.1000000"
	}
	c.Update(HostContainer, cl.Name, func(res *Resource) { res.Body["status"] = "RECONCILING" })
	c.gkeStartOp(w, r, "UPGRADE_MASTER", cl.Name, func() *Status {
		res, ok := c.resources[HostContainer+" "+cl.Name]
		if !ok {
			return &Status{Code: 10, Message: "the cluster was deleted", Reason: "ABORTED"}
		}
		res.Body["status"] = "RUNNING"
		res.Body["currentMasterVersion"] = want
		return nil
	})
}

func gkeMinor(v string) ([2]int, bool) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return [2]int{}, false
	}
	a, err1 := strconv.Atoi(parts[0])
	b, err2 := strconv.Atoi(strings.SplitN(parts[1], "-", 2)[0])
	return [2]int{a, b}, err1 == nil && err2 == nil
}

// gkeDeletePool is nodePools.delete: the pool is STOPPING and the cluster RECONCILING until
// the DELETE_NODE_POOL operation is done, when the pool is gone.
func (c *Cloud) gkeDeletePool(w http.ResponseWriter, r *http.Request) {
	cl, ok := c.gkeCluster(w, r)
	if !ok {
		return
	}
	pool := r.PathValue("pool")
	if poolOf(cl.Body, pool) == nil {
		gkeNotFound(w, cl.Name+"/nodePools/"+pool)
		return
	}
	if op := c.busy(HostContainer, cl.Name); op != "" || cl.Body["status"] != "RUNNING" {
		gkeIncompatible(w, cl, op)
		return
	}
	c.Update(HostContainer, cl.Name, func(res *Resource) {
		res.Body["status"] = "RECONCILING"
		if pm := poolOf(res.Body, pool); pm != nil {
			pm["status"] = "STOPPING"
		}
	})
	c.gkeStartOp(w, r, "DELETE_NODE_POOL", cl.Name+"/nodePools/"+pool, func() *Status {
		res, ok := c.resources[HostContainer+" "+cl.Name]
		if !ok {
			return &Status{Code: 10, Message: "the cluster was deleted", Reason: "ABORTED"}
		}
		res.Body["status"] = "RUNNING"
		pools, _ := res.Body["nodePools"].([]any)
		kept := []any{}
		for _, p := range pools {
			if m, ok := p.(map[string]any); !ok || m["name"] != pool {
				kept = append(kept, p)
			}
		}
		res.Body["nodePools"] = kept
		return nil
	})
}

// GKEOps counts the GKE operations of type typ (CREATE_NODE_POOL, SET_NODE_POOL_SIZE,
// DELETE_NODE_POOL, UPGRADE_MASTER) started on target or under it, for tests that prove a
// change is sent once.
func (c *Cloud) GKEOps(typ, target string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, op := range c.ops {
		if op.Service == HostContainer && op.Type == typ && (op.Target == target || strings.HasPrefix(op.Target, target+"/")) {
			n++
		}
	}
	return n
}
