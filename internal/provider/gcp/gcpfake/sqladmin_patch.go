package gcpfake

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
)

func init() {
	registrations = append(registrations, func(c *Cloud) {
		c.Handle(HostSQLAdmin, "PATCH /v1/projects/{project}/instances/{instance}", c.sqlPatch)
		c.Handle(HostSQLAdmin, "GET /v1/projects/{project}/operations", c.sqlListOps)
	})
}

// sqlPatch is instances.patch: the settings the body names replace the instance's (a
// message such as backupConfiguration whole), the rest stay. It answers an UPDATE operation
// (PENDING, RUNNING, then DONE), and the instance shows the new settings once it is done, as
// Cloud SQL's settingsVersion moves on. A disk never shrinks; one operation at a time runs on
// an instance (409 operationInProgress).
func (c *Cloud) sqlPatch(w http.ResponseWriter, r *http.Request) {
	in, ok := c.sqlInstance(w, r)
	if !ok {
		return
	}
	var body map[string]any
	if !ReadJSON(w, r, &body) {
		return
	}
	c.mu.Lock()
	busy := c.sqlBusy(in.Name)
	c.mu.Unlock()
	if busy || in.Body["state"] != "RUNNABLE" {
		operationInProgress(w)
		return
	}
	want, _ := body["settings"].(map[string]any)
	have, _ := in.Body["settings"].(map[string]any)
	if tier, ok := want["tier"].(string); ok && !sqlTier.MatchString(tier) {
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("Invalid request: Invalid Tier (%s).", tier), "invalid")
		return
	}
	tier, _ := have["tier"].(string)
	if t, ok := want["tier"].(string); ok {
		tier = t
	}
	avail := have["availabilityType"]
	if a, ok := want["availabilityType"]; ok {
		avail = a
	}
	if avail == "REGIONAL" && (tier == "db-f1-micro" || tier == "db-g1-small") {
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid request: High availability is not supported for shared-core machine types.", "invalid")
		return
	}
	if d, ok := want["dataDiskSizeGb"]; ok {
		to, _ := strconv.ParseInt(fmt.Sprint(d), 10, 64)
		from, _ := strconv.ParseInt(fmt.Sprint(have["dataDiskSizeGb"]), 10, 64)
		if to < from {
			WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid request: The disk size cannot be decreased.", "invalid")
			return
		}
	}
	op, _ := c.StartOp(HostSQLAdmin, newUUID(), "UPDATE", in.Name, "", func() (any, *Status) {
		res, ok := c.resources[HostSQLAdmin+" "+in.Name]
		if !ok {
			return nil, &Status{Code: 10, Message: "The instance was deleted while being updated.", Reason: "INTERNAL_ERROR"}
		}
		s, _ := res.Body["settings"].(map[string]any)
		if s == nil {
			s = map[string]any{}
			res.Body["settings"] = s
		}
		for k, v := range want {
			s[k] = v
		}
		n, _ := strconv.Atoi(fmt.Sprint(s["settingsVersion"]))
		s["settingsVersion"] = strconv.Itoa(n + 1)
		return nil, nil
	})
	WriteJSON(w, http.StatusOK, sqlOp(*op))
}

// SQLPatches counts the instances.patch calls Cloud SQL took for instance (its UPDATE
// operations), for tests that prove a change is sent once.
func (c *Cloud) SQLPatches(instance string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, target := 0, sqlName(c.Project, instance)
	for _, op := range c.ops {
		if op.Service == HostSQLAdmin && op.Type == "UPDATE" && op.Target == target {
			n++
		}
	}
	return n
}

// sqlListOps is operations.list: the operations of the instance the query names, newest
// first.
func (c *Cloud) sqlListOps(w http.ResponseWriter, r *http.Request) {
	if !c.ownProject(w, r) {
		return
	}
	target := sqlName(c.Project, r.URL.Query().Get("instance"))
	c.mu.Lock()
	var ops []Op
	for _, op := range c.ops {
		if op.Service == HostSQLAdmin && op.Target == target {
			ops = append(ops, *op)
		}
	}
	c.mu.Unlock()
	sort.Slice(ops, func(a, b int) bool { return ops[a].Started.After(ops[b].Started) })
	items := []map[string]any{}
	for _, op := range ops {
		items = append(items, sqlOp(op))
	}
	WriteJSON(w, http.StatusOK, map[string]any{"kind": "sql#operationsList", "items": items})
}
