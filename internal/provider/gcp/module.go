package gcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/netguard"
	"github.com/groundworkhq/groundwork/internal/provider"
	"github.com/groundworkhq/groundwork/internal/store"
)

// Name is the provider name of GCP spaces and jobs.
const Name = "gcp"

// Records is what the module reads of the server's store (store.Store has it).
type Records interface {
	GetSpace(ctx context.Context, orgID, id string) (*store.Space, error)
	GetCloudAccount(ctx context.Context, orgID, id string) (*store.CloudAccount, error)
	// GetJob finds a job by id alone: the datastore pipeline names its jobs so.
	GetJob(ctx context.Context, p *store.GetJobParams) (*job.Job, error)
}

// ModuleOptions configure the GCP module.
type ModuleOptions struct {
	Records Records
	// Vault holds cloud accounts' credentials by reference.
	Vault provider.CredentialVault
	// Outbound is the address policy an account's user-given endpoints are dialled through.
	Outbound *netguard.Policy
	// Poll is Account.Poll of every client (default 2s).
	Poll time.Duration
}

// Module is GCP as a cloud module: it resolves a job to a Client opened with its space's
// cloud account, kept per account, region, endpoints and credential value.
type Module struct {
	o ModuleOptions

	mu   sync.Mutex
	open map[string]*Client
}

var (
	_ provider.Module            = (*Module)(nil)
	_ provider.RegistryDrivers   = (*Module)(nil)
	_ provider.DNSZoneDrivers    = (*Module)(nil)
	_ provider.KubernetesDrivers = (*Module)(nil)
	_ provider.VMPoolDrivers     = (*Module)(nil)
	_ provider.NetworkDrivers    = (*Module)(nil)
	_ provider.ErrorClassifier   = (*Module)(nil)
	_ provider.PlanSources       = (*Module)(nil)
)

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
func (m *Module) Title() string { return "GCP" }

// Classify implements provider.ErrorClassifier for errors that reach the engine unclassified.
func (m *Module) Classify(err error) error { return (&Client{}).Classify(err) }

// accountCredentials is the JSON a GCP account's credentials secret holds.
type accountCredentials struct {
	// ServiceAccountKey is the JSON key file of a service account, as a string.
	ServiceAccountKey string `json:"serviceAccountKey"`
	ClientID          string `json:"clientId"`
	ClientSecret      string `json:"clientSecret"`
	RefreshToken      string `json:"refreshToken"`
	ProjectID         string `json:"projectId"`
}

// accountConfig is what a GCP account's public config may say.
type accountConfig struct {
	ProjectID string `json:"projectId"`
	// TargetServiceAccount is the service account authMethod impersonation acts as.
	TargetServiceAccount string `json:"targetServiceAccount"`
	// Endpoints replace Google's per service host name (test targets, emulators, private
	// service connect endpoints).
	Endpoints map[string]string `json:"endpoints"`
	// SecretManager keeps the account's datastore jobs' passwords in the project's Secret
	// Manager; the job holds only a gcpsm: reference.
	SecretManager bool `json:"secretManager"`
}

// Client opens (or reuses) the GCP client of j's space.
func (m *Module) Client(ctx context.Context, j *job.Job) (*Client, error) {
	if j.Provider != Name {
		return nil, fault.UserAction(fmt.Errorf("job %s is on provider %q", j.ID, j.Provider), "WrongProvider",
			string(j.Family)+" jobs of this module run on GCP spaces only.", "")
	}
	return m.ClientFor(ctx, j.OrgID, j.SpaceID)
}

// ClientFor opens (or reuses) the GCP client of a space.
func (m *Module) ClientFor(ctx context.Context, orgID, spaceID string) (*Client, error) {
	sa, err := provider.OpenSpaceAccount(ctx, m.o.Records, m.o.Vault, orgID, spaceID, "a GCP cloud account")
	if err != nil {
		return nil, err
	}
	sp, acc, secretValue := sa.Space, sa.Account, sa.Credentials
	var cfg accountConfig
	if len(acc.Config) > 0 {
		_ = json.Unmarshal(acc.Config, &cfg) // unknown shapes mean "no overrides"
	}
	a := Account{AuthMethod: AuthMethod(acc.AuthMethod), ProjectID: cfg.ProjectID, Region: sp.Region,
		Endpoints: cfg.Endpoints, Outbound: m.o.Outbound, Poll: m.o.Poll, SecretManager: cfg.SecretManager,
		TargetServiceAccount: cfg.TargetServiceAccount}
	if a.Region == "" {
		a.Region = acc.Region
	}
	if secretValue != "" {
		var c accountCredentials
		if err := json.Unmarshal([]byte(secretValue), &c); err != nil {
			return nil, fault.UserAction(fmt.Errorf("credentials of %s are not a JSON object", acc.ID), "CredentialsInvalid",
				"Store the account's credentials as serviceAccountKey (or clientId, clientSecret and refreshToken).", "")
		}
		a.ServiceAccountKey, a.ClientID, a.ClientSecret, a.RefreshToken = c.ServiceAccountKey, c.ClientID, c.ClientSecret, c.RefreshToken
		if a.ProjectID == "" {
			a.ProjectID = c.ProjectID
		}
	}
	sum := sha256.Sum256([]byte(secretValue))
	var eps []string
	for h, u := range a.Endpoints {
		eps = append(eps, h+"="+u)
	}
	sort.Strings(eps)
	key := strings.Join([]string{acc.ID, a.Region, a.ProjectID, string(a.AuthMethod), a.TargetServiceAccount, strings.Join(eps, ","),
		fmt.Sprint(a.SecretManager), hex.EncodeToString(sum[:])}, "|")
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.open[key]; ok {
		return c, nil
	}
	c, err := Open(ctx, a)
	if err != nil {
		return nil, err
	}
	m.open[key] = c
	return c, nil
}
