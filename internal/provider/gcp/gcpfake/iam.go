package gcpfake

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// HostIAM is the IAM API's host.
const HostIAM = "iam.googleapis.com"

func init() {
	registrations = append(registrations, registerIAM)
}

// accountID is IAM's rule for a service account's id: 6 to 30 lower-case letters, digits
// and '-', starting with a letter and not ending in '-'.
var accountID = regexp.MustCompile(`^[a-z][-a-z0-9]{4,28}[a-z0-9]$`)

// registerIAM serves IAM's service accounts (iam/v1 projects.serviceAccounts): create, get
// (by email or unique id, in the project or "-"), list and delete, all synchronous as IAM's
// are. A deleted account's project IAM bindings stay, their member rewritten to
// deleted:serviceAccount:<email>?uid=<id>, as IAM does.
func registerIAM(c *Cloud) {
	base := "/v1/projects/{project}/serviceAccounts"
	c.Handle(HostIAM, "POST "+base, c.iamCreate)
	c.Handle(HostIAM, "GET "+base, func(w http.ResponseWriter, r *http.Request) {
		if !c.ownProject(w, r) {
			return
		}
		out := []map[string]any{}
		for _, sa := range c.Under(HostIAM, "projects/"+c.Project+"/serviceAccounts") {
			out = append(out, sa.Body)
		}
		WriteJSON(w, http.StatusOK, map[string]any{"accounts": out})
	})
	c.Handle(HostIAM, "GET "+base+"/{account}", func(w http.ResponseWriter, r *http.Request) {
		if sa, ok := c.iamAccount(w, r); ok {
			WriteJSON(w, http.StatusOK, sa.Body)
		}
	})
	c.Handle(HostIAM, "DELETE "+base+"/{account}", func(w http.ResponseWriter, r *http.Request) {
		sa, ok := c.iamAccount(w, r)
		if !ok {
			return
		}
		c.mu.Lock()
		delete(c.resources, HostIAM+" "+sa.Name)
		if pol, ok := c.resources[HostResourceManager+" projects/"+c.Project]; ok {
			email := fmt.Sprint(sa.Body["email"])
			for _, b := range bindingsOf(pol.Body) {
				members, _ := b["members"].([]any)
				for i, m := range members {
					if m == "serviceAccount:"+email {
						members[i] = "deleted:serviceAccount:" + email + "?uid=" + fmt.Sprint(sa.Body["uniqueId"])
					}
				}
			}
		}
		c.mu.Unlock()
		WriteJSON(w, http.StatusOK, map[string]any{})
	})
}

// iamAccount reads the account the path names: projects/{p|-}/serviceAccounts/{email|id}.
func (c *Cloud) iamAccount(w http.ResponseWriter, r *http.Request) (Resource, bool) {
	if p := r.PathValue("project"); p != "-" && !c.ownProject(w, r) {
		return Resource{}, false
	}
	key := r.PathValue("account")
	for _, sa := range c.Under(HostIAM, "projects/"+c.Project+"/serviceAccounts") {
		if sa.Body["email"] == key || sa.Body["uniqueId"] == key {
			return sa, true
		}
	}
	WriteError(w, http.StatusNotFound, "NOT_FOUND", "Unknown service account", "notFound")
	return Resource{}, false
}

func (c *Cloud) iamCreate(w http.ResponseWriter, r *http.Request) {
	if !c.ownProject(w, r) {
		return
	}
	var in struct {
		AccountID      string `json:"accountId"`
		ServiceAccount struct {
			DisplayName string `json:"displayName"`
			Description string `json:"description"`
		} `json:"serviceAccount"`
	}
	if !ReadJSON(w, r, &in) {
		return
	}
	if !accountID.MatchString(in.AccountID) {
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT",
			fmt.Sprintf("Invalid account ID %q: it must be 6 to 30 lower-case letters, digits or hyphens, starting with a letter.", in.AccountID), "badRequest")
		return
	}
	if len(in.ServiceAccount.DisplayName) > 100 || len(in.ServiceAccount.Description) > 256 {
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "The display name is limited to 100 characters and the description to 256.", "badRequest")
		return
	}
	email := in.AccountID + "@" + c.Project + ".iam.gserviceaccount.com"
	full := "projects/" + c.Project + "/serviceAccounts/" + email
	if _, ok := c.Lookup(HostIAM, full); ok {
		WriteError(w, http.StatusConflict, "ALREADY_EXISTS",
			fmt.Sprintf("Service account %s already exists within project projects/%s.", in.AccountID, c.Project), "alreadyExists")
		return
	}
	c.mu.Lock()
	unique := fmt.Sprintf("1%020d", c.next())
	c.mu.Unlock()
	body := map[string]any{"name": full, "projectId": c.Project, "uniqueId": unique, "email": email,
		"displayName": in.ServiceAccount.DisplayName, "description": in.ServiceAccount.Description,
		"etag": "MDEwMjE5MjA=", "oauth2ClientId": unique}
	c.Put(Resource{Service: HostIAM, Kind: "iam.serviceAccount", Name: full, Body: body})
	WriteJSON(w, http.StatusOK, body)
}

// memberPrefixes are the principal kinds an IAM binding's member may name.
var memberPrefixes = []string{"user:", "serviceAccount:", "group:", "domain:", "deleted:", "principal:", "principalSet:"}

func validMember(m string) bool {
	if m == "allUsers" || m == "allAuthenticatedUsers" {
		return true
	}
	for _, p := range memberPrefixes {
		if strings.HasPrefix(m, p) && len(m) > len(p) {
			return true
		}
	}
	return false
}
