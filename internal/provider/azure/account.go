// Package azure is the Azure cloud module: the families' drivers on the official
// azure-sdk-for-go resource manager clients, opened per space with its cloud account.
//
// Every resource a job makes lives in its space's resource group, has a name derived from the
// job (so a PUT re-sent after a crash is the same request, not a second resource) and carries
// the groundwork-* tags. Long-running operations are the SDK's pollers: a step starts one,
// records its resume token with the step's result and returns "wait"; the next call resumes the
// poller from that token, so no worker is held and a restarted server picks up where the dead
// one stopped.
package azure

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/netguard"
)

// AuthMethod is how a cloud account authenticates to Azure.
type AuthMethod string

const (
	// AuthServicePrincipal is an app registration's client secret.
	AuthServicePrincipal AuthMethod = "service_principal"
	// AuthWorkloadIdentity exchanges a federated token (a Kubernetes service account's) for
	// an Azure one; no secret is stored.
	AuthWorkloadIdentity AuthMethod = "workload_identity_federation"
	// AuthDefault is the SDK's own chain: environment, managed identity, Azure CLI.
	AuthDefault AuthMethod = "default"
	// AuthNone sends no credential. It is only accepted with an Endpoint: it is for
	// Azure-compatible test targets, never for Azure itself.
	AuthNone AuthMethod = "none"
)

// Account is what opening Azure needs: who, which subscription, where, and the resource group
// a space's resources go in.
type Account struct {
	AuthMethod     AuthMethod
	SubscriptionID string
	TenantID       string
	ClientID       string
	ClientSecret   string
	// ClientCertificate is a service principal's certificate and private key (PEM), used
	// when there is no ClientSecret.
	ClientCertificate string
	// TokenFile is the federated token of workload identity (default: the SDK reads
	// AZURE_FEDERATED_TOKEN_FILE).
	TokenFile string
	Location  string
	// ResourceGroup holds every resource of the space's jobs.
	ResourceGroup string
	// ExistingResourceGroup says the group was there before Groundwork: it must exist, and
	// no teardown deletes it.
	ExistingResourceGroup bool
	// Endpoint replaces Azure Resource Manager's (a sovereign cloud, Azure Stack, a test
	// target). Empty: the public cloud.
	Endpoint string
	// KeyVaultURL is the vault datastore passwords are kept in; empty: the server's store.
	KeyVaultURL string
	// Outbound is the address policy a user-given Endpoint is dialled through.
	Outbound *netguard.Policy
	// Transport, if set, carries every request (tests); it replaces Outbound's client.
	Transport policy.Transporter
	// Poll is how often a driver call that waits on an operation asks Azure again (default
	// 2s); a test target that finishes operations in a few reads sets it short.
	Poll time.Duration
}

// Client is Azure opened with an Account: the credential and the client options every
// resource manager client is made with.
type Client struct {
	Account
	cred azcore.TokenCredential
	opts *arm.ClientOptions

	groupMu    sync.Mutex
	groupReady bool
}

// Open checks the account and makes its credential. Nothing is called yet: Azure is first
// reached by the first step.
func Open(a Account) (*Client, error) {
	if a.SubscriptionID == "" {
		return nil, fault.UserAction(errors.New("the Azure account names no subscription"), "NoSubscription",
			"Set subscriptionId in the cloud account's credentials or config.", "")
	}
	if a.Location == "" {
		return nil, fault.UserAction(errors.New("no Azure location"), "NoLocation",
			"Give the space (or its cloud account) a region: an Azure location such as westeurope.", "")
	}
	if a.ResourceGroup == "" {
		return nil, fault.System(errors.New("no resource group for the space"))
	}
	opts := &arm.ClientOptions{}
	if a.Endpoint != "" {
		u, err := url.Parse(a.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fault.UserAction(fmt.Errorf("endpoint %q is not an http(s) URL", a.Endpoint), "EndpointInvalid",
				"Set the account's config.endpoint to the base URL of an Azure Resource Manager endpoint.", "")
		}
		base := strings.TrimSuffix(u.String(), "/")
		opts.Cloud = cloud.Configuration{
			ActiveDirectoryAuthorityHost: cloud.AzurePublic.ActiveDirectoryAuthorityHost,
			Services:                     map[cloud.ServiceName]cloud.ServiceConfiguration{cloud.ResourceManager: {Endpoint: base, Audience: base}},
		}
		opts.InsecureAllowCredentialWithHTTP = u.Scheme == "http"
		policyOf := a.Outbound
		if policyOf == nil {
			policyOf = netguard.New(nil)
		}
		opts.Transport = policyOf.HTTPClient(2 * time.Minute)
	}
	if a.Transport != nil {
		opts.Transport = a.Transport
	}
	// The engine retries transient faults with its own backoff and without holding a worker;
	// the SDK's retries are kept short so that a throttled step lets go of its worker soon.
	opts.Retry = policy.RetryOptions{MaxRetries: 2, RetryDelay: 200 * time.Millisecond, MaxRetryDelay: 2 * time.Second}
	// A resource provider the subscription has not registered is the user's to register
	// (Classify says how): the SDK's own registration would hold the worker for minutes
	// while it polls, and needs a subscription-wide permission the account may rightly lack.
	opts.DisableRPRegistration = true
	cred, err := credential(a, opts.Cloud)
	if err != nil {
		return nil, err
	}
	return &Client{Account: a, cred: cred, opts: opts}, nil
}

func credential(a Account, c cloud.Configuration) (azcore.TokenCredential, error) {
	co := azcore.ClientOptions{Cloud: c}
	switch a.AuthMethod {
	case AuthServicePrincipal:
		if a.ClientSecret == "" && a.ClientCertificate != "" {
			certs, key, err := azidentity.ParseCertificates([]byte(a.ClientCertificate), nil)
			if err != nil {
				return nil, fault.UserAction(fmt.Errorf("service principal certificate: %w", err), "CredentialsInvalid",
					"Store clientCertificate as the PEM of the certificate and its unencrypted private key.", "")
			}
			cred, err := azidentity.NewClientCertificateCredential(a.TenantID, a.ClientID, certs, key, &azidentity.ClientCertificateCredentialOptions{ClientOptions: co})
			if err != nil {
				return nil, fault.UserAction(fmt.Errorf("service principal: %w", err), "CredentialsInvalid",
					"Store the account's credentials as tenantId, clientId and clientCertificate of an app registration.", "")
			}
			return cred, nil
		}
		cred, err := azidentity.NewClientSecretCredential(a.TenantID, a.ClientID, a.ClientSecret, &azidentity.ClientSecretCredentialOptions{ClientOptions: co})
		if err != nil {
			return nil, fault.UserAction(fmt.Errorf("service principal: %w", err), "CredentialsInvalid",
				"Store the account's credentials as tenantId, clientId and clientSecret of an app registration.", "")
		}
		return cred, nil
	case AuthWorkloadIdentity:
		cred, err := azidentity.NewWorkloadIdentityCredential(&azidentity.WorkloadIdentityCredentialOptions{
			ClientOptions: co, TenantID: a.TenantID, ClientID: a.ClientID, TokenFilePath: a.TokenFile})
		if err != nil {
			return nil, fault.UserAction(fmt.Errorf("workload identity: %w", err), "CredentialsInvalid",
				"Workload identity needs tenantId, clientId and a federated token file (AZURE_FEDERATED_TOKEN_FILE) on the server.", "")
		}
		return cred, nil
	case AuthNone:
		if a.Endpoint == "" {
			return nil, fault.UserAction(errors.New("authMethod none without an endpoint"), "CredentialsInvalid",
				"authMethod none is only for test targets named by config.endpoint.", "")
		}
		return noCredential{}, nil
	case AuthDefault, "":
		cred, err := azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{ClientOptions: co, TenantID: a.TenantID})
		if err != nil {
			return nil, fault.UserAction(fmt.Errorf("default credential chain: %w", err), "CredentialsInvalid",
				"The server found no Azure credential in its environment; give the account a service principal.", "")
		}
		return cred, nil
	}
	return nil, fault.UserAction(fmt.Errorf("auth method %q", a.AuthMethod), "CredentialsInvalid",
		"Use service_principal, workload_identity_federation or default.", "")
}

// TestTargetPrincipal is the object id AuthNone's token names as its principal.
const TestTargetPrincipal = "00000000-0000-0000-0000-00000000ca11"

// noCredential is the bearer of AuthNone: test targets take any token. It is an unsigned JWT
// naming TestTargetPrincipal, so that what reads the caller from its token (a cluster's
// admin assignment) reads it the same way as from Entra ID's.
type noCredential struct{}

var noToken = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." +
	base64.RawURLEncoding.EncodeToString([]byte(`{"oid":"`+TestTargetPrincipal+`","idtyp":"app"}`)) + "."

func (noCredential) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: noToken, ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// Options are the client options every resource manager client is made with.
func (c *Client) Options() *arm.ClientOptions { return c.opts }

// Credential is the account's credential.
func (c *Client) Credential() azcore.TokenCredential { return c.cred }

// PortalURL links to a resource (or the subscription) in the Azure portal, for fix hints.
func (c *Client) PortalURL(resourceID string) string {
	if resourceID == "" {
		resourceID = "/subscriptions/" + c.SubscriptionID
	}
	return "https://portal.azure.com/#@" + c.TenantID + "/resource" + resourceID
}
