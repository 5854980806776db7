package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/oklog/ulid/v2"

	"github.com/groundworkhq/groundwork/internal/audit"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
)

// authMethod describes one way to authenticate to a cloud: the credential fields it needs.
type authMethod struct {
	required []string
	// public fields are copied into the account's config too (they identify, they do not
	// authenticate), so the account shows them without revealing anything.
	public []string
}

// authMethods are the methods of reference/NOTES.md per provider, plus "default" (the SDK's
// own credential chain: environment, instance role, workload identity) for the clouds.
var authMethods = map[string]map[string]authMethod{
	"aws": {
		"static_keys":           {required: []string{"accessKeyId", "secretAccessKey"}},
		"assume_role":           {required: []string{"roleArn"}, public: []string{"roleArn"}},
		"temporary_credentials": {required: []string{"accessKeyId", "secretAccessKey", "sessionToken"}},
		"default":               {},
	},
	"gcp": {
		"service_account": {required: []string{"serviceAccountKey"}},
		"oauth":           {required: []string{"clientId", "clientSecret", "refreshToken"}, public: []string{"clientId"}},
		"default":         {},
	},
	"azure": {
		"service_principal":            {required: []string{"tenantId", "clientId", "clientSecret"}, public: []string{"tenantId", "clientId", "subscriptionId"}},
		"workload_identity_federation": {required: []string{"tenantId", "clientId"}, public: []string{"tenantId", "clientId", "subscriptionId"}},
		"default":                      {},
	},
	"local": {"local": {}, "default": {}},
}

func methodNames(provider string) string {
	var names []string
	for n := range authMethods[provider] {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

type createAccountRequest struct {
	Name            string            `json:"name"`
	Provider        string            `json:"provider"`
	Region          string            `json:"region"`
	AuthMethod      string            `json:"authMethod"`
	CredentialsRef  string            `json:"credentialsRef"`
	Credentials     map[string]string `json:"credentials"`
	PermissionLevel string            `json:"permissionLevel"`
	Config          json.RawMessage   `json:"config"`
}

func (s *Server) createAccount(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var req createAccountRequest
	if pr := decode(r, &req); pr != nil {
		return pr
	}
	cfg, fields := validateAccount(&req)
	if len(fields) == 0 && len(req.Credentials) > 0 && s.cfg.Secrets == nil {
		fields = append(fields, FieldError{Field: "credentials", Rule: "unsupported",
			Message: "this server has no secret store; store the credentials elsewhere and pass credentialsRef"})
	}
	if len(fields) > 0 {
		return badRequest("the cloud account request is invalid", fields...)
	}
	ctx := r.Context()
	a := &store.CloudAccount{ID: "acc_" + ulid.Make().String(), OrgID: p.OrgID, Name: req.Name, Provider: req.Provider,
		Region: req.Region, AuthMethod: req.AuthMethod, CredentialsRef: req.CredentialsRef,
		PermissionLevel: req.PermissionLevel, Config: cfg, CreatedAt: s.cfg.Now()}
	stored := false
	if len(req.Credentials) > 0 {
		body, err := json.Marshal(req.Credentials)
		if err != nil {
			return err
		}
		ref, err := s.cfg.Secrets.Put(ctx, "cloud-account-"+a.ID, string(body))
		if err != nil {
			return fmt.Errorf("store credentials of %s: %w", a.ID, err)
		}
		a.CredentialsRef, stored = ref, true
		a.Config = withManaged(a.Config)
	}
	err := s.audited(ctx, p, entry(audit.ScopePlatform, "cloud-account.create", "cloud-account", a.ID,
		map[string]any{"name": a.Name, "provider": a.Provider, "authMethod": a.AuthMethod, "permissionLevel": a.PermissionLevel}),
		func(tx store.Store) error { return tx.CreateCloudAccount(ctx, a) })
	if err != nil {
		if stored {
			// The account was not created: its secret would be an orphan nobody can name.
			if derr := s.cfg.Secrets.Delete(ctx, a.CredentialsRef); derr != nil {
				s.log.Warn("orphaned cloud account secret", "ref", a.CredentialsRef, "error", derr)
			}
		}
		return err
	}
	w.Header().Set("Location", "/api/cloud-accounts/"+a.ID)
	writeJSON(w, http.StatusCreated, a)
	return nil
}

// validateAccount checks provider, auth method, credentials and permission level, and returns
// the account config with the public credential fields merged in.
func validateAccount(req *createAccountRequest) (json.RawMessage, []FieldError) {
	var fields []FieldError
	if strings.TrimSpace(req.Name) == "" || len(req.Name) > 100 {
		fields = append(fields, FieldError{Field: "name", Rule: "required", Message: "is required, at most 100 characters"})
	}
	if req.PermissionLevel == "" {
		req.PermissionLevel = "read_write"
	}
	if req.PermissionLevel != "read_write" && req.PermissionLevel != "read_only" {
		fields = append(fields, FieldError{Field: "permissionLevel", Rule: "enum", Message: "must be read_only or read_write"})
	}
	methods, ok := authMethods[req.Provider]
	if !ok {
		return nil, append(fields, FieldError{Field: "provider", Rule: "enum", Message: "must be one of " + strings.Join(providers, ", ")})
	}
	if req.AuthMethod == "" {
		req.AuthMethod = "default"
	}
	m, ok := methods[req.AuthMethod]
	if !ok {
		return nil, append(fields, FieldError{Field: "authMethod", Rule: "enum",
			Message: fmt.Sprintf("%s accounts authenticate by one of %s", req.Provider, methodNames(req.Provider))})
	}
	if req.CredentialsRef != "" && !secrets.IsRef(req.CredentialsRef) {
		fields = append(fields, FieldError{Field: "credentialsRef", Rule: "format", Message: "must be a secret reference such as local:sec_…"})
	}
	if req.CredentialsRef != "" && len(req.Credentials) > 0 {
		fields = append(fields, FieldError{Field: "credentials", Rule: "exclusive", Message: "give credentials or credentialsRef, not both"})
	}
	if req.CredentialsRef == "" {
		for _, k := range m.required {
			if strings.TrimSpace(req.Credentials[k]) == "" {
				fields = append(fields, FieldError{Field: "credentials." + k, Rule: "required",
					Message: "is required for " + req.Provider + " " + req.AuthMethod})
			}
		}
	}
	allowed := map[string]bool{"subscriptionId": true, "projectId": true, "externalId": true}
	for _, k := range m.required {
		allowed[k] = true
	}
	for k := range req.Credentials {
		if !allowed[k] {
			fields = append(fields, FieldError{Field: "credentials." + k, Rule: "unknown", Message: "is not a credential of " + req.Provider + " " + req.AuthMethod})
		}
	}
	cfg := map[string]any{}
	if len(req.Config) > 0 && string(req.Config) != "null" {
		if err := json.Unmarshal(req.Config, &cfg); err != nil {
			fields = append(fields, FieldError{Field: "config", Rule: "type", Message: "must be an object"})
		}
	}
	for _, k := range m.public {
		if v := req.Credentials[k]; v != "" {
			cfg[k] = v
		}
	}
	out, _ := json.Marshal(cfg)
	return out, fields
}

// upgradePolicy is what to grant an account's principal so that Groundwork may provision with
// it: an instruction and the exact policy document, per provider.
func upgradePolicy(provider string) (string, json.RawMessage) {
	switch provider {
	case "aws":
		return "Attach this IAM policy to the account's principal, then set permissionLevel to read_write:",
			json.RawMessage(`{"Version":"2012-10-17","Statement":[{"Sid":"GroundworkProvision","Effect":"Allow","Action":["ec2:*","eks:*","rds:*","elasticache:*","ecr:*","elasticloadbalancing:*","autoscaling:*","route53:*","secretsmanager:*","iam:CreateRole","iam:DeleteRole","iam:GetRole","iam:PassRole","iam:AttachRolePolicy","iam:DetachRolePolicy","iam:TagRole","iam:CreateServiceLinkedRole","iam:CreateInstanceProfile","iam:DeleteInstanceProfile","iam:AddRoleToInstanceProfile","iam:RemoveRoleFromInstanceProfile"],"Resource":"*"}]}`)
	case "gcp":
		return "Grant these roles to the account's service account on the project, then set permissionLevel to read_write:",
			json.RawMessage(`{"bindings":[{"role":"roles/compute.admin"},{"role":"roles/container.admin"},{"role":"roles/cloudsql.admin"},{"role":"roles/redis.admin"},{"role":"roles/artifactregistry.admin"},{"role":"roles/dns.admin"},{"role":"roles/secretmanager.admin"},{"role":"roles/iam.serviceAccountUser"}]}`)
	case "azure":
		return "Assign this role to the account's principal on the subscription, then set permissionLevel to read_write:",
			json.RawMessage(`{"roleDefinitionName":"Contributor","principalType":"ServicePrincipal","scope":"/subscriptions/<subscriptionId>"}`)
	}
	return "Set the account's permissionLevel to read_write.", nil
}

// readOnlyRefusal is the answer to provisioning on a read-only account: the exact policy to
// grant, so the fix is one copy and paste.
func readOnlyRefusal(a *store.CloudAccount) *Problem {
	instruction, doc := upgradePolicy(a.Provider)
	pr := problem(http.StatusForbidden, "cloud account "+a.ID+" is read_only; provisioning needs read_write",
		FieldError{Field: "spaceID", Rule: "permissionLevel", Message: "the space's cloud account " + a.ID + " is read_only"})
	pr.FixHint = strings.TrimSpace(instruction + " " + string(doc))
	return pr
}

// UpgradePolicy is the answer of GET /cloud-accounts/{id}/upgrade-policy.
type UpgradePolicy struct {
	AccountID       string          `json:"accountID"`
	Provider        string          `json:"provider"`
	PermissionLevel string          `json:"permissionLevel"`
	Instruction     string          `json:"instruction"`
	Policy          json.RawMessage `json:"policy,omitempty"`
}

func (s *Server) accountUpgradePolicy(w http.ResponseWriter, r *http.Request, p *Principal) error {
	a, err := s.cfg.Store.GetCloudAccount(r.Context(), p.OrgID, r.PathValue("id"))
	if err != nil {
		return storeErr(err, "cloud account")
	}
	instruction, doc := upgradePolicy(a.Provider)
	writeJSON(w, http.StatusOK, UpgradePolicy{AccountID: a.ID, Provider: a.Provider, PermissionLevel: a.PermissionLevel,
		Instruction: instruction, Policy: doc})
	return nil
}

type patchAccountRequest struct {
	Name            *string `json:"name"`
	PermissionLevel *string `json:"permissionLevel"`
}

func (s *Server) patchAccount(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var req patchAccountRequest
	if pr := decode(r, &req); pr != nil {
		return pr
	}
	if req.Name != nil && (strings.TrimSpace(*req.Name) == "" || len(*req.Name) > 100) {
		return badRequest("bad name", FieldError{Field: "name", Rule: "required", Message: "is required, at most 100 characters"})
	}
	if req.PermissionLevel != nil && *req.PermissionLevel != "read_only" && *req.PermissionLevel != "read_write" {
		return badRequest("bad permissionLevel", FieldError{Field: "permissionLevel", Rule: "enum", Message: "must be read_only or read_write"})
	}
	id := r.PathValue("id")
	var out *store.CloudAccount
	err := s.audited(r.Context(), p, entry(audit.ScopePlatform, "cloud-account.update", "cloud-account", id,
		map[string]any{"name": req.Name, "permissionLevel": req.PermissionLevel}),
		func(tx store.Store) (err error) {
			out, err = tx.UpdateCloudAccount(r.Context(), &store.UpdateCloudAccountParams{OrgID: p.OrgID, ID: id,
				Name: req.Name, PermissionLevel: req.PermissionLevel})
			return err
		})
	if err != nil {
		return storeErr(err, "cloud account")
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) deleteAccount(w http.ResponseWriter, r *http.Request, p *Principal) error {
	id := r.PathValue("id")
	ctx := r.Context()
	var ref string
	err := s.audited(ctx, p, entry(audit.ScopePlatform, "cloud-account.delete", "cloud-account", id, nil),
		func(tx store.Store) error {
			a, err := tx.GetCloudAccount(ctx, p.OrgID, id)
			if err != nil {
				return err
			}
			if managed(a.Config) {
				ref = a.CredentialsRef
			}
			return tx.DeleteCloudAccount(ctx, p.OrgID, id)
		})
	if err != nil {
		return storeErr(err, "cloud account")
	}
	// Only a secret this server stored for the account goes with it (a reference given at
	// creation may be shared); deleting after the commit means a failed delete can orphan a secret but
	// never leave an account without its credentials.
	if s.cfg.Secrets != nil && ref != "" {
		if err := s.cfg.Secrets.Delete(ctx, ref); err != nil {
			s.log.Warn("cloud account deleted, its secret was not", "ref", ref, "error", err)
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// managedKey marks, in an account's config, credentials this server stored from the create
// request: they belong to the account and go with it.
const managedKey = "managedCredentials"

func withManaged(cfg json.RawMessage) json.RawMessage {
	m := map[string]any{}
	_ = json.Unmarshal(cfg, &m)
	m[managedKey] = true
	out, _ := json.Marshal(m)
	return out
}

func managed(cfg json.RawMessage) bool {
	var m map[string]any
	return json.Unmarshal(cfg, &m) == nil && m[managedKey] == true
}
