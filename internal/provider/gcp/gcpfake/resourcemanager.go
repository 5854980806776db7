package gcpfake

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net/http"
	"strings"
)

// HostResourceManager is Cloud Resource Manager's host.
const HostResourceManager = "cloudresourcemanager.googleapis.com"

// ProjectOwner is the member the project's IAM policy starts with, as roles/owner.
const ProjectOwner = "user:owner@example.com"

func init() {
	registrations = append(registrations, registerResourceManager)
}

// registerResourceManager serves the project's IAM policy (cloudresourcemanager/v3
// projects.getIamPolicy and projects.setIamPolicy). The policy is kept as one resource,
// projects/{p}, with an etag that changes on every set: a set carrying another etag than the
// policy's is refused 409 ABORTED, as Google refuses a read-modify-write that raced another.
func registerResourceManager(c *Cloud) {
	c.Put(Resource{Service: HostResourceManager, Kind: "cloudresourcemanager.policy", Name: "projects/" + c.Project,
		Body: map[string]any{"version": 1, "etag": etagOf(1),
			"bindings": []any{map[string]any{"role": "roles/owner", "members": []any{ProjectOwner}}}}})
	// A custom method's verb shares the last segment with the project ("{p}:getIamPolicy"),
	// which a ServeMux wildcard cannot split: the handler does.
	c.Handle(HostResourceManager, "POST /v3/projects/{rest}", func(w http.ResponseWriter, r *http.Request) {
		project, verb, _ := strings.Cut(r.PathValue("rest"), ":")
		if project != c.Project {
			WriteError(w, http.StatusForbidden, "PERMISSION_DENIED",
				fmt.Sprintf("The caller does not have permission on project %s (or it may not exist)", project), "forbidden")
			return
		}
		switch verb {
		case "getIamPolicy":
			pol, _ := c.Lookup(HostResourceManager, "projects/"+c.Project)
			WriteJSON(w, http.StatusOK, pol.Body)
		case "setIamPolicy":
			c.setPolicy(w, r)
		default:
			WriteError(w, http.StatusNotFound, "NOT_FOUND", "The requested URL "+r.URL.Path+" was not found on this server.", "notFound")
		}
	})
}

// etagOf is the policy etag of revision n (base64, as Google's are).
func etagOf(n uint64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	return base64.StdEncoding.EncodeToString(b[:])
}

func bindingsOf(policy map[string]any) []map[string]any {
	var out []map[string]any
	list, _ := policy["bindings"].([]any)
	for _, b := range list {
		if m, ok := b.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// Policy is the project's IAM policy as the fake holds it: members by role, for bindings
// without a condition.
func (c *Cloud) Policy() map[string][]string {
	pol, _ := c.Lookup(HostResourceManager, "projects/"+c.Project)
	out := map[string][]string{}
	for _, b := range bindingsOf(pol.Body) {
		if b["condition"] != nil {
			continue
		}
		role := fmt.Sprint(b["role"])
		members, _ := b["members"].([]any)
		for _, m := range members {
			out[role] = append(out[role], fmt.Sprint(m))
		}
	}
	return out
}

// Grant adds member to role in the project's policy, as someone else's change would.
func (c *Cloud) Grant(role, member string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pol := c.resources[HostResourceManager+" projects/"+c.Project]
	list, _ := pol.Body["bindings"].([]any)
	pol.Body["bindings"] = append(list, map[string]any{"role": role, "members": []any{member}})
	c.bumpEtag(pol)
}

// bumpEtag gives the policy its next revision's etag; the lock is held.
func (c *Cloud) bumpEtag(pol *Resource) {
	raw, _ := base64.StdEncoding.DecodeString(fmt.Sprint(pol.Body["etag"]))
	var n uint64
	if len(raw) == 8 {
		n = binary.BigEndian.Uint64(raw)
	}
	pol.Body["etag"] = etagOf(n + 1)
}

func (c *Cloud) setPolicy(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Policy map[string]any `json:"policy"`
	}
	if !ReadJSON(w, r, &in) {
		return
	}
	if in.Policy == nil {
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Request contains an invalid argument: policy is required.", "badRequest")
		return
	}
	for _, b := range bindingsOf(in.Policy) {
		role, _ := b["role"].(string)
		if !strings.HasPrefix(role, "roles/") && !strings.HasPrefix(role, "projects/") && !strings.HasPrefix(role, "organizations/") {
			WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("Role %s is not supported for this resource.", role), "badRequest")
			return
		}
		members, _ := b["members"].([]any)
		if len(members) == 0 {
			WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("Binding for role %s has no members.", role), "badRequest")
			return
		}
		for _, m := range members {
			ms := fmt.Sprint(m)
			if !validMember(ms) {
				WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("Invalid member %q.", ms), "badRequest")
				return
			}
			email, isSA := strings.CutPrefix(ms, "serviceAccount:")
			if isSA && strings.HasSuffix(email, "@"+c.Project+".iam.gserviceaccount.com") {
				if _, ok := c.Lookup(HostIAM, "projects/"+c.Project+"/serviceAccounts/"+email); !ok {
					WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("Service account %s does not exist.", email), "badRequest")
					return
				}
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	pol := c.resources[HostResourceManager+" projects/"+c.Project]
	if etag, _ := in.Policy["etag"].(string); etag != "" && etag != pol.Body["etag"] {
		WriteError(w, http.StatusConflict, "ABORTED",
			"There were concurrent policy changes. Please retry the whole read-modify-write with exponential backoff. The request's ETag '"+etag+"' did not match the current policy's ETag '"+fmt.Sprint(pol.Body["etag"])+"'.",
			"aborted")
		return
	}
	version := in.Policy["version"]
	if version == nil {
		version = 1
	}
	bindings := in.Policy["bindings"]
	if bindings == nil {
		bindings = []any{}
	}
	pol.Body["version"], pol.Body["bindings"] = version, bindings
	c.bumpEtag(pol)
	WriteJSON(w, http.StatusOK, pol.Body)
}
