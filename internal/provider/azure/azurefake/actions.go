package azurefake

import (
	"net/http"
	"slices"
	"strings"
)

// Every request the cloud serves is noted as the Azure RBAC action that authorises it, so
// that a test can check a plan's role definition against what a pipeline really calls:
//   - Resource Manager: the provider namespace and the resource type path after the last
//     "/providers/" (resource names dropped, child types kept), then "read" (GET, HEAD),
//     "write" (PUT, PATCH), "delete" (DELETE), or for a POST its last segment and "action"
//     ("Microsoft.ContainerService/managedClusters/listClusterUserCredential/action");
//     a path with no provider is Microsoft.Resources' ("Microsoft.Resources/subscriptions/
//     resourceGroups/write");
//   - Key Vault's data plane: its data actions (Microsoft.KeyVault/vaults/secrets/
//     getSecret/action, setSecret/action, delete, purge/action, readMetadata/action);
//   - operation status polls are not noted: the fake's status URLs are its own
//     (…/locations/fake/operationStatuses/<id>), not each resource provider's, so they name
//     no action Azure has.

// Action is the RBAC action (or Key Vault data action) a request of method on path needs;
// "" for an operation status poll. vault is whether the request went to a Key Vault.
func Action(method, path string, vault bool) string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	if vault {
		return vaultAction(method, segs)
	}
	if asyncPath.MatchString(path) {
		return ""
	}
	ns := "Microsoft.Resources"
	var rest []string
	if i := lastIndexFold(segs, "providers"); i >= 0 && i+1 < len(segs) {
		ns, rest = segs[i+1], segs[i+2:]
		if len(rest) == 0 && method == http.MethodGet {
			// A resource provider's registration is read as the subscription's providers.
			return "Microsoft.Resources/subscriptions/providers/read"
		}
	} else {
		rest = segs
	}
	verb := ""
	switch method {
	case http.MethodGet, http.MethodHead:
		verb = "read"
	case http.MethodPut, http.MethodPatch:
		verb = "write"
	case http.MethodDelete:
		verb = "delete"
	case http.MethodPost:
		if len(rest)%2 == 1 {
			verb, rest = rest[len(rest)-1]+"/action", rest[:len(rest)-1]
		} else {
			verb = "action"
		}
	default:
		verb = strings.ToLower(method)
	}
	parts := []string{ns}
	for k := 0; k < len(rest); k += 2 {
		parts = append(parts, typeName(rest[k]))
	}
	return strings.Join(append(parts, verb), "/")
}

// typeName spells a resource type segment as Azure's action names do: the SDK's resource
// group client sends it lower-case.
func typeName(s string) string {
	if strings.EqualFold(s, "resourceGroups") {
		return "resourceGroups"
	}
	return s
}

func vaultAction(method string, segs []string) string {
	const p = "Microsoft.KeyVault/vaults/secrets/"
	deleted := len(segs) > 0 && strings.EqualFold(segs[0], "deletedsecrets")
	switch {
	case deleted && method == http.MethodDelete:
		return p + "purge/action"
	case deleted && method == http.MethodPost:
		return p + "recover/action"
	case deleted:
		return p + "readMetadata/action"
	case method == http.MethodPut:
		return p + "setSecret/action"
	case method == http.MethodDelete:
		return p + "delete"
	case method == http.MethodPatch:
		return p + "update/action"
	case method == http.MethodGet && len(segs) < 2:
		return p + "readMetadata/action" // a list of secrets holds no value
	default:
		return p + "getSecret/action"
	}
}

func lastIndexFold(segs []string, s string) int {
	for i := len(segs) - 1; i >= 0; i-- {
		if strings.EqualFold(segs[i], s) {
			return i
		}
	}
	return -1
}

func (c *Cloud) noteAction(req *http.Request, vault bool) {
	a := Action(req.Method, req.URL.Path, vault)
	if a == "" {
		return
	}
	c.mu.Lock()
	c.actions = append(c.actions, a)
	c.mu.Unlock()
}

// Actions returns the actions of every request served so far, each once, sorted.
func (c *Cloud) Actions() []string { return c.ActionsSince(0) }

// Mark is where the requests served so far end: ActionsSince(Mark()) are the actions of
// the requests that come after.
func (c *Cloud) Mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.actions)
}

// ActionsSince returns the actions of the requests served after mark, each once, sorted.
func (c *Cloud) ActionsSince(mark int) []string {
	c.mu.Lock()
	out := slices.Clone(c.actions[min(mark, len(c.actions)):])
	c.mu.Unlock()
	slices.Sort(out)
	return slices.Compact(out)
}
