package azure

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/netguard"
	"github.com/groundworkhq/groundwork/internal/provider"
	"github.com/groundworkhq/groundwork/internal/store"
)

// Name is the provider name of Azure spaces and jobs.
const Name = "azure"

// Records is what the module reads of the server's store (store.Store has it).
type Records interface {
	GetSpace(ctx context.Context, orgID, id string) (*store.Space, error)
	GetCloudAccount(ctx context.Context, orgID, id string) (*store.CloudAccount, error)
	// GetJob finds a job by id alone: the datastore pipeline names its jobs so.
	GetJob(ctx context.Context, p *store.GetJobParams) (*job.Job, error)
}

// Vault reads a cloud account's credentials as the account (*secrets.Vault has it).
type Vault = provider.CredentialVault

// ModuleOptions configure the Azure module.
type ModuleOptions struct {
	Records Records
	// Vault holds cloud accounts' credentials by reference.
	Vault Vault
	// Outbound is the address policy an account's user-given endpoint is dialled through.
	Outbound *netguard.Policy
	// Transport, if set, carries every request instead of the network (tests reach the
	// azurefake cloud through it).
	Transport policy.Transporter
	// Poll is Account.Poll of every client (default 2s).
	Poll time.Duration
}

// Module is Azure as a cloud module: it resolves a job to a Client opened with its space's
// cloud account, kept per account, location, resource group and credential value.
type Module struct {
	o ModuleOptions

	mu   sync.Mutex
	open map[string]*Client
}

var (
	_ provider.Module            = (*Module)(nil)
	_ provider.NetworkDrivers    = (*Module)(nil)
	_ provider.RegistryDrivers   = (*Module)(nil)
	_ provider.DNSZoneDrivers    = (*Module)(nil)
	_ provider.KubernetesDrivers = (*Module)(nil)
	_ provider.DatastoreDrivers  = (*Module)(nil)
	_ provider.ErrorClassifier   = (*Module)(nil)
	_ provider.SecretRoutes      = (*Module)(nil)
	_ provider.PlanSources       = (*Module)(nil)
	_ provider.FamilyNotes       = (*Module)(nil)
)

// NotOffered implements provider.FamilyNotes.
func (m *Module) NotOffered(f job.Family) string {
	if f == job.FamilyVMPool {
		return "VM pools on Azure (virtual machine scale sets, with Run Command as the exec channel) are not available yet: " +
			"Groundwork offers them once Azure makes both generally available. Use a space on an AWS account."
	}
	return ""
}

// NewModule returns the module.
func NewModule(o ModuleOptions) *Module {
	if o.Outbound == nil {
		o.Outbound = netguard.New(nil)
	}
	return &Module{o: o, open: map[string]*Client{}}
}

// Name implements provider.Module.
func (m *Module) Name() string { return Name }

// Title implements provider.Module.
func (m *Module) Title() string { return "Azure" }

// Classify implements provider.ErrorClassifier for errors that reach the engine unclassified.
func (m *Module) Classify(err error) error { return (&Client{}).Classify(err) }

// accountCredentials is the JSON an Azure account's credentials secret holds.
type accountCredentials struct {
	TenantID     string `json:"tenantId"`
	ClientID     string `json:"clientId"`
	ClientSecret string `json:"clientSecret"`
	// ClientCertificate is the PEM of the service principal's certificate and its private
	// key, instead of a secret.
	ClientCertificate string `json:"clientCertificate"`
	SubscriptionID    string `json:"subscriptionId"`
}

// accountConfig is what an Azure account's public config (and a space's config) may say.
type accountConfig struct {
	SubscriptionID string `json:"subscriptionId"`
	TenantID       string `json:"tenantId"`
	ClientID       string `json:"clientId"`
	// Endpoint replaces Azure Resource Manager's endpoint.
	Endpoint string `json:"endpoint"`
	// ExistingResourceGroup names a resource group that exists and that Groundwork uses
	// for the space's resources but never deletes.
	ExistingResourceGroup string `json:"existingResourceGroup"`
	// TokenFile is workload identity's federated token file.
	TokenFile string `json:"tokenFile"`
	// KeyVaultURL is the Key Vault datastore passwords are kept in
	// ("https://<name>.vault.azure.net/"); empty keeps them in the server's own store.
	KeyVaultURL string `json:"keyVaultURL"`
}

// Client opens (or reuses) the Azure client of j's space.
func (m *Module) Client(ctx context.Context, j *job.Job) (*Client, error) {
	if j.Provider != Name {
		return nil, fault.UserAction(fmt.Errorf("job %s is on provider %q", j.ID, j.Provider), "WrongProvider",
			string(j.Family)+" jobs of this module run on Azure spaces only.", "")
	}
	return m.ClientFor(ctx, j.OrgID, j.SpaceID)
}

// ClientFor opens (or reuses) the Azure client of a space.
func (m *Module) ClientFor(ctx context.Context, orgID, spaceID string) (*Client, error) {
	sa, err := provider.OpenSpaceAccount(ctx, m.o.Records, m.o.Vault, orgID, spaceID, "an Azure cloud account")
	if err != nil {
		return nil, err
	}
	sp, acc, secretValue := sa.Space, sa.Account, sa.Credentials
	var cfg, spaceCfg accountConfig
	if len(acc.Config) > 0 {
		_ = json.Unmarshal(acc.Config, &cfg) // unknown shapes mean "no overrides"
	}
	if len(sp.Config) > 0 {
		_ = json.Unmarshal(sp.Config, &spaceCfg)
	}
	a := Account{AuthMethod: AuthMethod(acc.AuthMethod), SubscriptionID: cfg.SubscriptionID, TenantID: cfg.TenantID,
		ClientID: cfg.ClientID, Endpoint: cfg.Endpoint, TokenFile: cfg.TokenFile, KeyVaultURL: cfg.KeyVaultURL, Location: sp.Region,
		ResourceGroup: GroupName(sp.ID), Outbound: m.o.Outbound, Transport: m.o.Transport, Poll: m.o.Poll}
	if a.Location == "" {
		a.Location = acc.Region
	}
	if rg := firstOf(spaceCfg.ExistingResourceGroup, cfg.ExistingResourceGroup); rg != "" {
		a.ResourceGroup, a.ExistingResourceGroup = rg, true
	}
	if secretValue != "" {
		var c accountCredentials
		if err := json.Unmarshal([]byte(secretValue), &c); err != nil {
			return nil, fault.UserAction(fmt.Errorf("credentials of %s are not a JSON object", acc.ID), "CredentialsInvalid",
				"Store the account's credentials as tenantId, clientId and clientSecret or clientCertificate (and subscriptionId).", "")
		}
		a.TenantID, a.ClientID, a.ClientSecret = firstOf(c.TenantID, a.TenantID), firstOf(c.ClientID, a.ClientID), c.ClientSecret
		a.ClientCertificate = c.ClientCertificate
		a.SubscriptionID = firstOf(c.SubscriptionID, a.SubscriptionID)
	}
	sum := sha256.Sum256([]byte(secretValue))
	key := fmt.Sprintf("%s|%s|%s|%s|%s|%s|%s", acc.ID, a.Location, a.ResourceGroup, a.AuthMethod, a.Endpoint, a.KeyVaultURL, hex.EncodeToString(sum[:]))
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.open[key]; ok {
		return c, nil
	}
	c, err := Open(a)
	if err != nil {
		return nil, err
	}
	m.open[key] = c
	return c, nil
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
