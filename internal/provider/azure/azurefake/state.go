package azurefake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
)

// groupID is a resource group's id.
func groupID(rg string) string {
	return "/subscriptions/" + Subscription + "/resourceGroups/" + rg
}

// armID is the id of a resource of type typ ("Microsoft.Network/virtualNetworks") in rg;
// children add "/subnets/name" pairs in names.
func armID(rg, typ string, names ...string) string {
	ns, kinds, _ := strings.Cut(typ, "/")
	id := groupID(rg) + "/providers/" + ns
	for i, k := range strings.Split(kinds, "/") {
		id += "/" + k
		if i < len(names) {
			id += "/" + names[i]
		}
	}
	return id
}

// stored reads the resource at id into T.
func stored[T any](c *Cloud, id string) (T, bool) {
	var v T
	c.mu.Lock()
	raw, ok := c.objs[strings.ToLower(id)]
	c.mu.Unlock()
	if !ok {
		return v, false
	}
	return v, json.Unmarshal(raw, &v) == nil
}

// refusal is an Azure error to answer instead of a result.
type refusal struct {
	status int
	code   string
}

func (r *refusal) into(e *azfake.ErrorResponder) { e.SetResponseError(r.status, r.code) }

// store writes body (a model from a PUT) at id as Azure would keep it: with its id, name,
// type and location, provisioningState Succeeded, and fix applied to the properties (to
// stamp child ids, say; it runs under c.mu). The resource group must exist, and an existing resource keeps its
// location. It returns the stored resource as T (the response type, which embeds the model).
func store[T any](c *Cloud, rg, id, typ string, body any, fix func(props map[string]any)) (T, *refusal) {
	var out T
	if rg != "" && !c.hasGroup(rg) {
		return out, &refusal{http.StatusNotFound, "ResourceGroupNotFound"}
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return out, &refusal{http.StatusBadRequest, "InvalidRequestContent"}
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return out, &refusal{http.StatusBadRequest, "InvalidRequestContent"}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	key := strings.ToLower(id)
	if old, ok := c.objs[key]; ok {
		var prev map[string]any
		_ = json.Unmarshal(old, &prev)
		if loc, _ := m["location"].(string); loc != "" && prev["location"] != nil && !strings.EqualFold(loc, prev["location"].(string)) {
			return out, &refusal{http.StatusConflict, "InvalidResourceLocation"}
		}
	}
	m["id"] = id
	m["name"] = id[strings.LastIndex(id, "/")+1:]
	m["type"] = typ
	props, _ := m["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
		m["properties"] = props
	}
	props["provisioningState"] = "Succeeded"
	if fix != nil {
		fix(props)
	}
	raw, _ = json.Marshal(m)
	c.objs[key] = raw
	_ = json.Unmarshal(raw, &out)
	return out, nil
}

// remove deletes the resource at id and everything under it; false if it was not there. A
// resource another one still refers to (a NAT gateway on a subnet) is refused with inUse.
func (c *Cloud) remove(id, inUse string) (bool, *refusal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := strings.ToLower(id)
	if _, ok := c.objs[key]; !ok {
		return false, nil
	}
	if inUse != "" {
		needle := `"id":"` + key + `"`
		for k, raw := range c.objs {
			if k != key && !strings.HasPrefix(k, key+"/") && strings.Contains(strings.ToLower(string(raw)), needle) {
				return true, &refusal{http.StatusBadRequest, inUse}
			}
		}
	}
	for k := range c.objs {
		if k == key || strings.HasPrefix(k, key+"/") {
			delete(c.objs, k)
		}
	}
	return true, nil
}

// children lists the resources directly under parent whose type is typ, as T.
func children[T any](c *Cloud, parent, typ string) []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	prefix := strings.ToLower(parent) + "/"
	var out []T
	for k, raw := range c.objs {
		if !strings.HasPrefix(k, prefix) || strings.Contains(k[len(prefix):], "/providers/") {
			continue
		}
		var probe struct{ Type string }
		if json.Unmarshal(raw, &probe) != nil || !strings.EqualFold(probe.Type, typ) {
			continue
		}
		var v T
		if json.Unmarshal(raw, &v) == nil {
			out = append(out, v)
		}
	}
	return out
}

func (c *Cloud) hasGroup(rg string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.objs[strings.ToLower(groupID(rg))]
	return ok
}

// getter answers a GET of the resource at id.
func getter[T any](c *Cloud, id string) (resp azfake.Responder[T], errResp azfake.ErrorResponder) {
	v, ok := stored[T](c, id)
	if !ok {
		errResp.SetResponseError(http.StatusNotFound, "ResourceNotFound")
		return
	}
	resp.SetResponse(http.StatusOK, v, nil)
	return
}

// putter answers a long-running PUT of body at id.
func putter[T any](c *Cloud, rg, id, typ string, body any, fix func(map[string]any)) (resp azfake.PollerResponder[T], errResp azfake.ErrorResponder) {
	v, r := store[T](c, rg, id, typ, body, fix)
	if r != nil {
		r.into(&errResp)
		return
	}
	resp.SetTerminalResponse(http.StatusOK, v, nil)
	return
}

// deleter answers a long-running DELETE of id; deleting what is not there succeeds (204), as
// on Azure.
func deleter[T any](c *Cloud, id, inUse string) (resp azfake.PollerResponder[T], errResp azfake.ErrorResponder) {
	var zero T
	found, r := c.remove(id, inUse)
	if r != nil {
		r.into(&errResp)
		return
	}
	if !found {
		resp.SetTerminalResponse(http.StatusNoContent, zero, nil)
		return
	}
	resp.SetTerminalResponse(http.StatusOK, zero, nil)
	return
}

// CreateGroup makes a resource group as a person would, outside Groundwork.
func (c *Cloud) CreateGroup(name, location string, tags map[string]string) error {
	t := map[string]*string{}
	for k, v := range tags {
		t[k] = &v
	}
	_, r := store[map[string]any](c, "", groupID(name), "Microsoft.Resources/resourceGroups",
		map[string]any{"location": location, "tags": t}, nil)
	if r != nil {
		return fmt.Errorf("create group %s: %d %s", name, r.status, r.code)
	}
	return nil
}

// patch merges body (a model from a PATCH) into the resource stored at id, as Azure's PATCH
// does: the fields it sends replace those stored (objects merged field by field), the rest
// stay. fix runs on the merged properties under c.mu. What is not there is ResourceNotFound.
func patch[T any](c *Cloud, id string, body any, fix func(props map[string]any)) (T, *refusal) {
	var out T
	raw, err := json.Marshal(body)
	if err != nil {
		return out, &refusal{http.StatusBadRequest, "InvalidRequestContent"}
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return out, &refusal{http.StatusBadRequest, "InvalidRequestContent"}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	key := strings.ToLower(id)
	old, ok := c.objs[key]
	if !ok {
		return out, &refusal{http.StatusNotFound, "ResourceNotFound"}
	}
	var cur map[string]any
	if err := json.Unmarshal(old, &cur); err != nil {
		return out, &refusal{http.StatusInternalServerError, "InternalServerError"}
	}
	merge(cur, m)
	props, _ := cur["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
		cur["properties"] = props
	}
	props["provisioningState"] = "Succeeded"
	if fix != nil {
		fix(props)
	}
	raw, _ = json.Marshal(cur)
	c.objs[key] = raw
	_ = json.Unmarshal(raw, &out)
	return out, nil
}

// merge writes src's fields over dst's, objects field by field.
func merge(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				merge(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

// patcher answers a long-running PATCH of body at id.
func patcher[T any](c *Cloud, id string, body any, fix func(map[string]any)) (resp azfake.PollerResponder[T], errResp azfake.ErrorResponder) {
	v, r := patch[T](c, id, body, fix)
	if r != nil {
		r.into(&errResp)
		return
	}
	resp.SetTerminalResponse(http.StatusOK, v, nil)
	return
}
