package gcpfake

import (
	"fmt"
	"net/http"
	"strings"
)

func init() {
	registrations = append(registrations, func(c *Cloud) {
		c.Handle(HostRedis, "PATCH /v1/projects/{project}/locations/{location}/instances/{instance}", c.redisPatch)
	})
}

// redisPatch is instances.patch with updateMask memory_size_gb (the one field the fake
// changes): the instance is UPDATING until the "update" operation is done, then READY with
// the new size. Memorystore refuses a patch of an instance that is not READY.
func (c *Cloud) redisPatch(w http.ResponseWriter, r *http.Request) {
	in, ok := c.redisInstance(w, r)
	if !ok {
		return
	}
	var body map[string]any
	if !ReadJSON(w, r, &body) {
		return
	}
	bad := func(msg string) {
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", msg, "badRequest")
	}
	mask := r.URL.Query().Get("updateMask")
	for _, f := range strings.Split(mask, ",") {
		if f != "memory_size_gb" && f != "memorySizeGb" {
			bad(fmt.Sprintf("The fake patches memory_size_gb alone, not %q.", mask))
			return
		}
	}
	mem, _ := body["memorySizeGb"].(float64)
	if mem < 1 || mem > 300 {
		bad(fmt.Sprintf("Invalid value at 'instance.memory_size_gb' (%v): must be between 1 and 300.", mem))
		return
	}
	if in.Body["state"] != "READY" {
		WriteError(w, http.StatusBadRequest, "FAILED_PRECONDITION", fmt.Sprintf("The instance is %v; it can be updated when it is READY.", in.Body["state"]), "FAILED_PRECONDITION")
		return
	}
	c.Update(HostRedis, in.Name, func(res *Resource) { res.Body["state"] = "UPDATING" })
	op, _ := c.StartOp(HostRedis, parentOf(r)+"/operations/operation-"+newUUID(), "update", in.Name, "", func() (any, *Status) {
		res, ok := c.resources[HostRedis+" "+in.Name]
		if !ok {
			return nil, &Status{Code: 10, Message: "the instance was deleted while being updated", Reason: "ABORTED"}
		}
		res.Body["state"], res.Body["memorySizeGb"] = "READY", mem
		return nil, nil
	})
	WriteJSON(w, http.StatusOK, LRO(*op, redisMetadata))
}

// RedisPatches counts the instances.patch calls Memorystore took for the instance named full.
func (c *Cloud) RedisPatches(full string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, op := range c.ops {
		if op.Service == HostRedis && op.Type == "update" && op.Target == full {
			n++
		}
	}
	return n
}
