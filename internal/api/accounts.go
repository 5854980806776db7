package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/groundworkhq/groundwork/internal/audit"
	"github.com/groundworkhq/groundwork/internal/jobs"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
)

// authMethod describes one way to authenticate to a cloud: the credential fields it needs.
type authMethod struct {
	required []string
	// oneOf, when set, are credential fields of which exactly one is required (a service
	// principal's secret or its certificate).
	oneOf []string
	// public fields are copied into the account's config too (they identify, they do not
	// authenticate), so the account shows them without revealing anything.
	public []string
	// optional are credential fields that may be given or not (impersonation's base key).
	optional []string
}

// authMethods are the authentication methods each provider accepts, plus "default" (the SDK's
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
		"oauth":           {required: []string{"clientId", "clientSecret", "refreshToken"}, public: []string{"clientId", "projectId"}},
		"default":         {public: []string{"projectId"}},
		// impersonation acts as config.targetServiceAccount, with a service account key as
		// the base credential, or the server's own (ADC) without one.
		"impersonation": {optional: []string{"serviceAccountKey"}, public: []string{"projectId"}},
		// none sends no credential: only for a GCP-compatible test target named by
		// config.endpoints (validateAccount refuses it without them).
		"none": {public: []string{"projectId"}},
	},
	"azure": {
		"service_principal":            {required: []string{"tenantId", "clientId"}, oneOf: []string{"clientSecret", "clientCertificate"}, public: []string{"tenantId", "clientId", "subscriptionId"}},
		"workload_identity_federation": {required: []string{"tenantId", "clientId"}, public: []string{"tenantId", "clientId", "subscriptionId"}},
		"default":                      {public: []string{"subscriptionId"}},
		// none sends no credential: only for an Azure-compatible test target named by
		// config.endpoint (validateAccount refuses it without one).
		"none": {public: []string{"subscriptionId"}},
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
	fields = append(fields, s.checkEndpoint(r.Context(), req.Provider, cfg)...)
	if len(fields) == 0 && len(req.Credentials) > 0 && s.cfg.Secrets == nil {
		fields = append(fields, FieldError{Field: "credentials", Rule: "unsupported",
			Message: "this server has no secret store to keep credentials in"})
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
		ref, err := s.cfg.Secrets.For(accountSecrets(a)).Put(ctx, "cloud-account-"+a.ID, string(body))
		if err != nil {
			return fmt.Errorf("store credentials of %s: %w", a.ID, err)
		}
		a.CredentialsRef, stored = ref, true
		a.Config = withManaged(a.Config)
	}
	err := s.audited(ctx, p, entry(audit.ScopePlatform, "cloud-account.create", "cloud-account", a.ID,
		map[string]any{"name": a.Name, "provider": a.Provider, "authMethod": a.AuthMethod, "permissionLevel": a.PermissionLevel}),
		func(tx store.Tx) error { return tx.CreateCloudAccount(ctx, a) })
	if err != nil {
		if stored {
			// The account was not created: its secret would be an orphan nobody can name.
			if derr := s.cfg.Secrets.For(accountSecrets(a)).Delete(ctx, a.CredentialsRef); derr != nil {
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
	if req.CredentialsRef != "" {
		// A reference is never taken from a request: naming another account's (or another
		// organisation's) secret would let this account use it, and delete it with itself.
		fields = append(fields, FieldError{Field: "credentialsRef", Rule: "forbidden",
			Message: "is not accepted; give the credentials and Groundwork stores them for this account"})
	} else {
		for _, k := range m.required {
			if strings.TrimSpace(req.Credentials[k]) == "" {
				fields = append(fields, FieldError{Field: "credentials." + k, Rule: "required",
					Message: "is required for " + req.Provider + " " + req.AuthMethod})
			}
		}
		if len(m.oneOf) > 0 {
			given := 0
			for _, k := range m.oneOf {
				if strings.TrimSpace(req.Credentials[k]) != "" {
					given++
				}
			}
			if given != 1 {
				fields = append(fields, FieldError{Field: "credentials." + m.oneOf[0], Rule: "oneOf",
					Message: "exactly one of " + strings.Join(m.oneOf, ", ") + " is required for " + req.Provider + " " + req.AuthMethod})
			}
		}
	}
	allowed := map[string]bool{"subscriptionId": true, "projectId": true, "externalId": true}
	for _, k := range append(append(m.required, m.oneOf...), m.optional...) {
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
	if _, ok := cfg[managedKey]; ok {
		fields = append(fields, FieldError{Field: "config." + managedKey, Rule: "forbidden",
			Message: "is set by Groundwork when it stores the credentials, never by a request"})
	}
	for _, k := range m.public {
		if v := req.Credentials[k]; v != "" {
			cfg[k] = v
		}
	}
	if req.Provider == "gcp" {
		fields = append(fields, validateGCP(req, cfg)...)
	} else if req.AuthMethod == "none" {
		if ep, _ := cfg["endpoint"].(string); ep == "" {
			fields = append(fields, FieldError{Field: "config.endpoint", Rule: "required",
				Message: "is required with authMethod none, which is only for test targets"})
		}
	}
	out, _ := json.Marshal(cfg)
	return out, fields
}

// validateGCP checks what only GCP accounts have: a service account key that is one, and
// config.endpoints (service host name → base URL), which authMethod none requires, and
// config.secretManager, a boolean.
func validateGCP(req *createAccountRequest, cfg map[string]any) []FieldError {
	var fields []FieldError
	if key := req.Credentials["serviceAccountKey"]; strings.TrimSpace(key) != "" {
		var k struct {
			Type        string `json:"type"`
			ClientEmail string `json:"client_email"`
			PrivateKey  string `json:"private_key"`
		}
		if json.Unmarshal([]byte(key), &k) != nil || k.Type != "service_account" || k.ClientEmail == "" || k.PrivateKey == "" {
			fields = append(fields, FieldError{Field: "credentials.serviceAccountKey", Rule: "format",
				Message: "must be a service account's JSON key file (type service_account, client_email, private_key)"})
		}
	}
	if req.AuthMethod == "impersonation" {
		if sa, _ := cfg["targetServiceAccount"].(string); !strings.HasSuffix(sa, ".gserviceaccount.com") || !strings.Contains(sa, "@") {
			fields = append(fields, FieldError{Field: "config.targetServiceAccount", Rule: "format",
				Message: "is required with authMethod impersonation: the email of the service account to act as (name@project.iam.gserviceaccount.com)"})
		}
	}
	raw, given := cfg["endpoints"]
	eps, ok := raw.(map[string]any)
	switch {
	case given && !ok:
		fields = append(fields, FieldError{Field: "config.endpoints", Rule: "type",
			Message: "must be an object of service host name (compute.googleapis.com) to base URL"})
	case req.AuthMethod == "none" && len(eps) == 0:
		fields = append(fields, FieldError{Field: "config.endpoints", Rule: "required",
			Message: "is required with authMethod none, which is only for test targets"})
	}
	for host, v := range eps {
		u, err := url.Parse(fmt.Sprint(v))
		if _, isString := v.(string); !isString || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			fields = append(fields, FieldError{Field: "config.endpoints." + host, Rule: "url", Message: "must be an http(s) URL"})
		}
		if !strings.HasSuffix(host, ".googleapis.com") {
			fields = append(fields, FieldError{Field: "config.endpoints." + host, Rule: "enum",
				Message: "must be a Google service host name such as compute.googleapis.com"})
		}
	}
	// secretManager is decoded as a bool when the account is opened; anything else would fail
	// every job of the account then rather than the account's creation now.
	if v, given := cfg["secretManager"]; given {
		if _, ok := v.(bool); !ok {
			fields = append(fields, FieldError{Field: "config.secretManager", Rule: "type",
				Message: "must be a boolean: true keeps the space's secrets in the project's Secret Manager"})
		}
	}
	return fields
}

// checkEndpoint refuses, early, an AWS or Azure account endpoint the outbound policy would refuse: a
// literal address, or a name resolving to one. It is a courtesy: every connection to the
// endpoint is checked again when it is dialled (a name may resolve elsewhere later).
func (s *Server) checkEndpoint(ctx context.Context, provider string, cfg json.RawMessage) []FieldError {
	if provider == "gcp" {
		var c struct {
			Endpoints map[string]any `json:"endpoints"`
		}
		_ = json.Unmarshal(cfg, &c)
		var fields []FieldError
		for host, ep := range c.Endpoints {
			one, _ := json.Marshal(map[string]any{"endpoint": ep})
			for _, f := range s.checkEndpoint(ctx, "aws", one) {
				f.Field = "config.endpoints." + host
				fields = append(fields, f)
			}
		}
		return fields
	}
	if provider != "aws" && provider != "azure" {
		return nil
	}
	var c struct {
		Endpoint any `json:"endpoint"`
	}
	if json.Unmarshal(cfg, &c) != nil || c.Endpoint == nil {
		return nil
	}
	raw, ok := c.Endpoint.(string)
	u, err := url.Parse(raw)
	if !ok || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return []FieldError{{Field: "config.endpoint", Rule: "url", Message: "must be an http(s) URL"}}
	}
	refused := FieldError{Field: "config.endpoint", Rule: "outbound",
		Message: "is refused by the server's outbound policy: link-local and metadata addresses are refused, and addresses outside the operator's allowlist"}
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil {
		if s.cfg.Outbound.Check(ip) != nil {
			return []FieldError{refused}
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", u.Hostname())
	if err != nil {
		return nil // unresolvable now: the dial-time check decides
	}
	for _, ip := range ips {
		if s.cfg.Outbound.Check(ip) != nil {
			return []FieldError{refused}
		}
	}
	return nil
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
	instruction, doc := jobs.UpgradePolicy(a.Provider)
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
		func(tx store.Tx) (err error) {
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
	var gone *store.CloudAccount
	err := s.audited(ctx, p, entry(audit.ScopePlatform, "cloud-account.delete", "cloud-account", id, nil),
		func(tx store.Tx) error {
			a, err := tx.GetCloudAccount(ctx, p.OrgID, id)
			if err != nil {
				return err
			}
			gone = a
			return tx.DeleteCloudAccount(ctx, p.OrgID, id)
		})
	if err != nil {
		return storeErr(err, "cloud account")
	}
	// Only a secret this server stored for this account goes with it: the vault deletes a
	// reference only for the owner it was recorded for, whatever the account's config says.
	// Deleting after the commit means a failed delete can orphan a secret but never leave an
	// account without its credentials.
	if s.cfg.Secrets != nil && gone.CredentialsRef != "" {
		if err := s.cfg.Secrets.For(accountSecrets(gone)).Delete(ctx, gone.CredentialsRef); err != nil {
			s.log.Warn("cloud account deleted, its secret was not", "ref", gone.CredentialsRef, "error", err)
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// accountSecrets is the owner of the credentials stored for account a.
func accountSecrets(a *store.CloudAccount) secrets.Owner {
	return secrets.Owner{OrgID: a.OrgID, Kind: secrets.OwnerAccount, ID: a.ID}
}

// managedKey marks, in an account's config, credentials this server stored from the create
// request; it is shown to users, while the secret's recorded owner decides what is deleted.
const managedKey = "managedCredentials"

func withManaged(cfg json.RawMessage) json.RawMessage {
	m := map[string]any{}
	_ = json.Unmarshal(cfg, &m)
	m[managedKey] = true
	out, _ := json.Marshal(m)
	return out
}
