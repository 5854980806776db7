// Package gcp is the Google Cloud module: the families' drivers on Google's official REST
// clients (google.golang.org/api), opened per space with its cloud account.
//
// Every resource a job makes has a name derived from the job (so an insert re-sent after a
// crash names the same resource and is refused as a duplicate rather than made twice), carries
// the lower-case groundwork-* labels where the API takes labels (and the job id in its
// description where it does not), and every mutating call that accepts one carries a requestId
// derived from the job and the call, so Google itself drops a re-sent request. Long-running
// operations are recorded by name with the step's result and polled by the next call: no
// worker is held while Google works, and a restarted server polls the same operation.
package gcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/option"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/netguard"
)

// AuthMethod is how a cloud account authenticates to Google Cloud.
type AuthMethod string

const (
	// AuthServiceAccount is a service account's JSON key.
	AuthServiceAccount AuthMethod = "service_account"
	// AuthOAuth is a user's OAuth client and refresh token.
	AuthOAuth AuthMethod = "oauth"
	// AuthDefault is Application Default Credentials: the environment, the metadata server
	// (workload identity on GKE, a VM's service account), gcloud's login.
	AuthDefault AuthMethod = "default"
	// AuthImpersonation acts as another service account (TargetServiceAccount): the base
	// credential (a service account key when the account has one, else Application Default
	// Credentials) mints that account's short-lived tokens through the IAM Credentials API,
	// so no key of the target account is ever stored.
	AuthImpersonation AuthMethod = "impersonation"
	// AuthNone sends no credential. It is accepted only together with Endpoints: it is for
	// GCP-compatible test targets and emulators, never for Google itself.
	AuthNone AuthMethod = "none"
)

// Scope is the OAuth scope every client asks for: the account's IAM roles, not the scope,
// limit what it may do.
const Scope = "https://www.googleapis.com/auth/cloud-platform"

// The services the module calls, by host name (the keys of Account.Endpoints).
const (
	ServiceCompute          = "compute.googleapis.com"
	ServiceDNS              = "dns.googleapis.com"
	ServiceArtifactRegistry = "artifactregistry.googleapis.com"
	ServiceSQLAdmin         = "sqladmin.googleapis.com"
	ServiceRedis            = "redis.googleapis.com"
	ServiceSecretManager    = "secretmanager.googleapis.com"
	ServiceContainer        = "container.googleapis.com"
	ServiceIAM              = "iam.googleapis.com"
	ServiceResourceManager  = "cloudresourcemanager.googleapis.com"
	ServiceNetworking       = "servicenetworking.googleapis.com"
	ServiceIAMCredentials   = "iamcredentials.googleapis.com"
)

// servicePaths are the paths under each host the REST clients' base URLs carry: an endpoint
// override names the host only, as what an account chooses is where a service is, not which version of it.
var servicePaths = map[string]string{
	ServiceCompute: "compute/v1/",
}

// Account is what opening Google Cloud needs: who, which project, where.
type Account struct {
	AuthMethod AuthMethod
	ProjectID  string
	// Region is the space's region ("europe-west1"); zonal resources go in its zone "-b"
	// unless the config names one.
	Region string
	// ServiceAccountKey is a service account's JSON key (AuthServiceAccount).
	ServiceAccountKey string
	// OAuth client and refresh token (AuthOAuth).
	ClientID, ClientSecret, RefreshToken string
	// TargetServiceAccount is the email of the service account AuthImpersonation acts as.
	TargetServiceAccount string
	// Endpoints replace Google's, per service host name: "compute.googleapis.com" →
	// "http://127.0.0.1:9101/". A service not named is reached at Google.
	Endpoints map[string]string
	// Outbound is the address policy user-given endpoints are dialled through.
	Outbound *netguard.Policy
	// Poll is how often a call that waits on an operation asks again (default 2s).
	Poll time.Duration
	// SecretManager keeps the datastore jobs' passwords in the project's Secret Manager
	// (secretmanager.go) rather than the server's own store.
	SecretManager bool
}

// Client is Google Cloud opened with an Account: an HTTP client that carries the account's
// token, and each service's endpoint.
type Client struct {
	Account
	http   *http.Client
	tokens oauth2.TokenSource

	computeOnce sync.Once
	compute     *compute.Service
	computeErr  error
}

// Open checks the account and makes its token source. Nothing is called yet.
func Open(ctx context.Context, a Account) (*Client, error) {
	if a.Region == "" {
		return nil, fault.UserAction(errors.New("no GCP region"), "NoRegion",
			"Give the space (or its cloud account) a region: a GCP region such as europe-west1.", "")
	}
	for host, ep := range a.Endpoints {
		u, err := url.Parse(ep)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fault.UserAction(fmt.Errorf("endpoint of %s %q is not an http(s) URL", host, ep), "EndpointInvalid",
				"Set each of the account's config.endpoints to the base URL of a GCP-compatible service.", "")
		}
	}
	var base http.RoundTripper = http.DefaultTransport
	if len(a.Endpoints) > 0 {
		pol := a.Outbound
		if pol == nil {
			pol = netguard.New(nil)
		}
		base = pol.HTTPClient(2 * time.Minute).Transport
	}
	c := &Client{Account: a}
	ts, project, err := tokenSource(ctx, a)
	if err != nil {
		return nil, err
	}
	if a.AuthMethod == AuthImpersonation {
		if ts, err = c.impersonate(ctx, ts, base); err != nil {
			return nil, err
		}
	}
	if c.ProjectID == "" {
		c.ProjectID = project
	}
	if c.ProjectID == "" {
		return nil, fault.UserAction(errors.New("the GCP account names no project"), "NoProject",
			"Set projectId in the cloud account's config (or use a service account key, which names its project).", "")
	}
	c.tokens = ts
	rt := base
	if ts != nil {
		rt = &oauth2.Transport{Source: ts, Base: base}
	}
	c.http = &http.Client{Transport: rt, Timeout: 2 * time.Minute}
	return c, nil
}

// tokenSource makes the account's token source and reads the project it names, if any.
func tokenSource(ctx context.Context, a Account) (oauth2.TokenSource, string, error) {
	// The token source outlives the call that opened it: it refreshes on later steps.
	ctx = context.WithoutCancel(ctx)
	switch a.AuthMethod {
	case AuthImpersonation:
		if a.TargetServiceAccount == "" {
			return nil, "", fault.UserAction(errors.New("impersonation without a target service account"), "CredentialsInvalid",
				"Set config.targetServiceAccount to the email of the service account to act as.", "")
		}
		if a.ServiceAccountKey == "" {
			return tokenSource(ctx, Account{AuthMethod: AuthDefault})
		}
		return tokenSource(ctx, Account{AuthMethod: AuthServiceAccount, ServiceAccountKey: a.ServiceAccountKey})
	case AuthServiceAccount:
		creds, err := google.CredentialsFromJSONWithType(ctx, []byte(a.ServiceAccountKey), google.ServiceAccount, Scope)
		if err != nil {
			return nil, "", fault.UserAction(fmt.Errorf("service account key: %w", err), "CredentialsInvalid",
				"Store the account's serviceAccountKey as the JSON key file of a service account (type service_account).", "")
		}
		return creds.TokenSource, creds.ProjectID, nil
	case AuthOAuth:
		cfg := &oauth2.Config{ClientID: a.ClientID, ClientSecret: a.ClientSecret, Endpoint: google.Endpoint, Scopes: []string{Scope}}
		return cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: a.RefreshToken}), "", nil
	case AuthNone:
		if len(a.Endpoints) == 0 {
			return nil, "", fault.UserAction(errors.New("authMethod none without endpoints"), "CredentialsInvalid",
				"authMethod none is only for test targets named by config.endpoints.", "")
		}
		return nil, "", nil
	case AuthDefault, "":
		creds, err := google.FindDefaultCredentials(ctx, Scope)
		if err != nil {
			return nil, "", fault.UserAction(fmt.Errorf("application default credentials: %w", err), "CredentialsInvalid",
				"The server found no Google credential in its environment; give the account a service account key.", "")
		}
		return creds.TokenSource, creds.ProjectID, nil
	}
	return nil, "", fault.UserAction(fmt.Errorf("auth method %q", a.AuthMethod), "CredentialsInvalid",
		"Use service_account, oauth, impersonation or default.", "")
}

// Options are the client options of the service at host: the account's HTTP client and, when
// the account names one, the service's endpoint.
func (c *Client) Options(host string) []option.ClientOption {
	opts := []option.ClientOption{option.WithHTTPClient(c.http)}
	if ep := c.Endpoints[host]; ep != "" {
		opts = append(opts, option.WithEndpoint(strings.TrimSuffix(ep, "/")+"/"+servicePaths[host]))
	}
	return opts
}

// Token is an access token of the account, for what takes a bearer token rather than a
// client (a GKE cluster's API server). A test target's account (AuthNone) has none: it gets
// a fixed placeholder the target accepts.
func (c *Client) Token(ctx context.Context) (string, error) {
	if c.tokens == nil {
		return "groundwork-test-target", nil
	}
	t, err := c.tokens.Token()
	if err != nil {
		return "", c.Classify(err)
	}
	return t.AccessToken, nil
}

// Zone is the zone zonal resources of the space go in when the config names none.
func (c *Client) Zone() string { return c.Region + "-b" }

// ConsoleURL is the Cloud Console's page at path for the account's project.
func (c *Client) ConsoleURL(path string) string {
	return "https://console.cloud.google.com/" + strings.TrimPrefix(path, "/") + "?project=" + url.QueryEscape(c.ProjectID)
}
