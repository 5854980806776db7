package gcpfake

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// HostIAMCredentials is the IAM Service Account Credentials API's host.
const HostIAMCredentials = "iamcredentials.googleapis.com"

func init() { registrations = append(registrations, registerIAMCredentials) }

// ImpersonatedToken is the access token the fake mints for a service account.
func ImpersonatedToken(email string) string { return "ya29.impersonated." + email }

// registerIAMCredentials serves generateAccessToken: a caller with a bearer token gets a
// token of a service account of the project (ImpersonatedToken), valid for the lifetime it
// asks (at most an hour). The caller's right to act as the account
// (roles/iam.serviceAccountTokenCreator) is not checked, except through Deny.
func registerIAMCredentials(c *Cloud) {
	c.Handle(HostIAMCredentials, "POST /v1/projects/{project}/serviceAccounts/{name}", func(w http.ResponseWriter, r *http.Request) {
		email, ok := strings.CutSuffix(r.PathValue("name"), ":generateAccessToken")
		if !ok || r.PathValue("project") != "-" {
			NotFound(w, r.URL.Path)
			return
		}
		if r.Header.Get("Authorization") == "" {
			WriteError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Request is missing required authentication credential.", "required")
			return
		}
		var in struct {
			Scope    []string `json:"scope"`
			Lifetime string   `json:"lifetime"`
		}
		if !ReadJSON(w, r, &in) {
			return
		}
		if len(in.Scope) == 0 {
			WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Scope required.", "badRequest")
			return
		}
		if !strings.HasSuffix(email, "@"+c.Project+".iam.gserviceaccount.com") {
			WriteError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("Not found; Gaia id not found for email %s", email), "notFound")
			return
		}
		life := time.Hour
		if d, err := time.ParseDuration(in.Lifetime); err == nil && d > 0 && d < life {
			life = d
		}
		WriteJSON(w, http.StatusOK, map[string]any{"accessToken": ImpersonatedToken(email),
			"expireTime": time.Now().Add(life).UTC().Format(time.RFC3339)})
	})
}
