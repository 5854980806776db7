package gcp

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/provider/drivertest"
	"github.com/groundworkhq/groundwork/internal/provider/gcp/gcpfake"
)

// testClient opens a client on a fake project of its own.
func testClient(t *testing.T) (*Client, *gcpfake.Cloud) {
	t.Helper()
	cloud := gcpfake.New(t)
	return clientOn(t, cloud), cloud
}

// clientOn opens a client on cloud, as a restarted server opens one on the same account.
func clientOn(t *testing.T, cloud *gcpfake.Cloud) *Client {
	t.Helper()
	c, err := Open(context.Background(), Account{AuthMethod: AuthNone, ProjectID: gcpfake.Project, Region: "europe-west1",
		Endpoints: cloud.Endpoints(), Poll: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// observe lists what the fake project holds. A child without labels of its own (a zone's
// record set) goes with its parent, and is reported as its parent's job's.
func observe(cloud *gcpfake.Cloud) drivertest.Observer {
	return func(_ context.Context) ([]drivertest.Resource, error) {
		var out []drivertest.Resource
		all := cloud.Resources()
		byName := map[string]gcpfake.Resource{}
		for _, r := range all {
			byName[r.Service+" "+r.Name] = r
		}
		for _, r := range all {
			if r.Kind == "cloudresourcemanager.policy" {
				continue // the project's own; its bindings are listed below
			}
			out = append(out, drivertest.Resource{Kind: r.Kind, ID: r.Name, JobID: jobOf(r, byName)})
		}
		// Each member of the project's IAM policy is a grant of its own, a service
		// account's reported as its account's job's: a binding left behind shows up.
		for role, members := range cloud.Policy() {
			for _, m := range members {
				if m == gcpfake.ProjectOwner {
					continue // every project's, from its creation
				}
				jobID := ""
				if email, ok := strings.CutPrefix(m, "serviceAccount:"); ok {
					if sa, ok := byName[gcpfake.HostIAM+" projects/"+cloud.Project+"/serviceAccounts/"+email]; ok {
						jobID = jobOf(sa, byName)
					}
				}
				out = append(out, drivertest.Resource{Kind: "iam-binding", ID: role + " " + m, JobID: jobID})
			}
		}
		return out, nil
	}
}

// jobOf is the job a resource names: in its description, in its labels, or its parent's.
func jobOf(r gcpfake.Resource, byName map[string]gcpfake.Resource) string {
	if d, _ := r.Body["description"].(string); JobOfDescription(d) != "" {
		return JobOfDescription(d)
	}
	if id := r.Labels()[LabelJob]; id != "" {
		return id
	}
	if r.Kind == gcpfake.KindConnection {
		// A private services access connection carries nothing of its own: it is its
		// network's (named by project number, the network is under the project id).
		n, _ := r.Body["network"].(string)
		if p, ok := byName[gcpfake.HostCompute+" projects/"+gcpfake.Project+"/global/networks/"+n[strings.LastIndex(n, "/")+1:]]; ok {
			return jobOf(p, byName)
		}
		return ""
	}
	for name := r.Name; ; {
		i := lastSlash(name, 2)
		if i < 0 {
			return ""
		}
		name = name[:i]
		if p, ok := byName[r.Service+" "+name]; ok {
			return jobOf(p, byName)
		}
	}
}

// lastSlash is the index of the n-th slash from the end of s (a parent's end), or -1.
func lastSlash(s string, n int) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			n--
			if n == 0 {
				return i
			}
		}
	}
	return -1
}

// serviceAccountKey is a service account's JSON key whose token endpoint is a local server
// that grants minted for a signed assertion, as Google's does.
func serviceAccountKey(t *testing.T, minted string) []byte {
	t.Helper()
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" || r.Form.Get("assertion") == "" {
			http.Error(w, "bad grant", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": minted, "token_type": "Bearer", "expires_in": 3600})
	}))
	t.Cleanup(tokens.Close)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	saKey, _ := json.Marshal(map[string]string{"type": "service_account", "project_id": gcpfake.Project, "private_key_id": "k1",
		"private_key": string(keyPEM), "client_email": "groundwork@" + gcpfake.Project + ".iam.gserviceaccount.com",
		"client_id": "1", "token_uri": tokens.URL + "/token"})
	return saKey
}
