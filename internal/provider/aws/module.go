package aws

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/trace"

	"github.com/groundworkhq/groundwork/internal/discovery"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/netguard"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/pipeline/dnszone"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
	"github.com/groundworkhq/groundwork/internal/pipeline/registry"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
	"github.com/groundworkhq/groundwork/internal/plan"
	"github.com/groundworkhq/groundwork/internal/pricing"
	"github.com/groundworkhq/groundwork/internal/provider"
	"github.com/groundworkhq/groundwork/internal/remediation"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
)

// Name is the provider name of AWS spaces and jobs.
const Name = "aws"

// Records is what the module reads of the server's store: a job's space, the space's cloud
// account, and the job a datastore secret is named after. store.Store has them.
type Records interface {
	GetJob(ctx context.Context, p *store.GetJobParams) (*job.Job, error)
	GetSpace(ctx context.Context, orgID, id string) (*store.Space, error)
	GetCloudAccount(ctx context.Context, orgID, id string) (*store.CloudAccount, error)
}

// Vault reads a cloud account's credentials as the account (*secrets.Vault has it).
type Vault = provider.CredentialVault

// ModuleOptions configure the AWS module.
type ModuleOptions struct {
	Records Records
	// Vault holds cloud accounts' credentials by reference (nil: only accounts without a
	// credentials reference open).
	Vault Vault
	// Tracer, if set, traces every AWS API call under the calling step's span.
	Tracer trace.TracerProvider
	// Outbound is the address policy a cloud account's user-given endpoint is dialled through
	// (nil: the always-refused ranges only).
	Outbound *netguard.Policy
	// Probe reads a VM's bootstrap sentinel (default: over SSM). moto runs no command on its
	// emulated instances, so tests against it pass FakeBootstrapProbe.
	Probe func(p *Provider) BootstrapProbe
}

// Module is AWS as a cloud module: it resolves a job to a Provider opened with its space's
// cloud account. Opened providers are kept per account, region, endpoint and credential
// value: the SSM probe remembers the command it sent between polls, an assumed role is not
// assumed again per step, and a rotated credential opens a new provider.
type Module struct {
	o ModuleOptions

	mu   sync.Mutex
	open map[string]*opened
}

type opened struct {
	p     *Provider
	probe BootstrapProbe
}

var (
	_ provider.Module            = (*Module)(nil)
	_ provider.VMPoolDrivers     = (*Module)(nil)
	_ provider.NetworkDrivers    = (*Module)(nil)
	_ provider.RegistryDrivers   = (*Module)(nil)
	_ provider.DNSZoneDrivers    = (*Module)(nil)
	_ provider.KubernetesDrivers = (*Module)(nil)
	_ provider.DatastoreDrivers  = (*Module)(nil)
	_ provider.SecretRoutes      = (*Module)(nil)
	_ provider.ErrorClassifier   = (*Module)(nil)
	_ provider.Listers           = (*Module)(nil)
	_ provider.PlanSources       = (*Module)(nil)
	_ provider.PriceSources      = (*Module)(nil)
	_ provider.Remediators       = (*Module)(nil)
)

// NewModule returns the module.
func NewModule(o ModuleOptions) *Module {
	if o.Outbound == nil {
		o.Outbound = netguard.New(nil) // the always-refused ranges stay refused
	}
	return &Module{o: o, open: map[string]*opened{}}
}

// Name implements provider.Module.
func (m *Module) Name() string { return Name }

// Title implements provider.Module.
func (m *Module) Title() string { return "AWS" }

// accountCredentials is the JSON a cloud account's credentials secret holds (see
// api/accounts.go).
type accountCredentials struct {
	AccessKeyID     string `json:"accessKeyId"`
	SecretAccessKey string `json:"secretAccessKey"`
	SessionToken    string `json:"sessionToken"`
	RoleARN         string `json:"roleArn"`
	ExternalID      string `json:"externalId"`
}

// accountConfig is what an AWS account's public config may say.
type accountConfig struct {
	RoleARN    string `json:"roleArn"`
	ExternalID string `json:"externalId"`
	// Endpoint overrides every service's endpoint (an AWS-compatible cloud); empty means
	// AWS_ENDPOINT_URL, else AWS itself.
	Endpoint string `json:"endpoint"`
}

// resolve opens (or reuses) the provider of j's space.
func (m *Module) resolve(ctx context.Context, j *job.Job) (*opened, error) {
	if j.Provider != Name {
		return nil, fault.UserAction(fmt.Errorf("job %s is on provider %q", j.ID, j.Provider), "WrongProvider",
			string(j.Family)+" jobs on this server run on AWS spaces only.", "")
	}
	sa, err := provider.OpenSpaceAccount(ctx, m.o.Records, m.o.Vault, j.OrgID, j.SpaceID, "an AWS cloud account")
	if err != nil {
		return nil, err
	}
	sp, acc, secretValue := sa.Space, sa.Account, sa.Credentials
	account := Account{AuthMethod: AuthMethod(acc.AuthMethod), Region: sp.Region, Tracer: m.o.Tracer, Outbound: m.o.Outbound}
	if account.Region == "" {
		account.Region = acc.Region
	}
	var cfg accountConfig
	if len(acc.Config) > 0 {
		_ = json.Unmarshal(acc.Config, &cfg) // unknown shapes mean "no overrides"
	}
	account.RoleARN, account.ExternalID, account.Endpoint = cfg.RoleARN, cfg.ExternalID, cfg.Endpoint
	if secretValue != "" {
		var c accountCredentials
		if err := json.Unmarshal([]byte(secretValue), &c); err != nil {
			return nil, fault.UserAction(fmt.Errorf("credentials of %s are not a JSON object", acc.ID), "CredentialsInvalid",
				"Store the account's credentials as accessKeyId/secretAccessKey (and sessionToken or roleArn).", "")
		}
		account.AccessKeyID, account.SecretAccessKey, account.SessionToken = c.AccessKeyID, c.SecretAccessKey, c.SessionToken
		if c.RoleARN != "" {
			account.RoleARN = c.RoleARN
		}
		if c.ExternalID != "" {
			account.ExternalID = c.ExternalID
		}
	}
	sum := sha256.Sum256([]byte(secretValue))
	key := acc.ID + "|" + account.Region + "|" + string(account.AuthMethod) + "|" + account.Endpoint + "|" + hex.EncodeToString(sum[:])
	m.mu.Lock()
	defer m.mu.Unlock()
	if o, ok := m.open[key]; ok {
		return o, nil
	}
	p, err := Open(ctx, account)
	if err != nil {
		return nil, err
	}
	o := &opened{p: p}
	if m.o.Probe != nil {
		o.probe = m.o.Probe(p)
	} else {
		o.probe = NewSSMProbe(p)
	}
	m.open[key] = o
	return o, nil
}

// opening resolves j's provider and makes what the caller wants of it.
func opening[T any](ctx context.Context, m *Module, j *job.Job, mk func(*opened) T) (T, error) {
	o, err := m.resolve(ctx, j)
	if err != nil {
		var zero T
		return zero, err
	}
	return mk(o), nil
}

// VMPoolDriver implements provider.VMPoolDrivers.
func (m *Module) VMPoolDriver(ctx context.Context, j *job.Job) (vmpool.Driver, error) {
	return opening(ctx, m, j, func(o *opened) vmpool.Driver { return VMPoolDriver{P: o.p, Probe: o.probe} })
}

// NetworkDriver implements provider.NetworkDrivers.
func (m *Module) NetworkDriver(ctx context.Context, j *job.Job) (network.Driver, error) {
	return opening(ctx, m, j, func(o *opened) network.Driver { return NetworkDriver{P: o.p} })
}

// RegistryDriver implements provider.RegistryDrivers.
func (m *Module) RegistryDriver(ctx context.Context, j *job.Job) (registry.Driver, error) {
	return opening(ctx, m, j, func(o *opened) registry.Driver { return RegistryDriver{P: o.p} })
}

// DNSZoneDriver implements provider.DNSZoneDrivers.
func (m *Module) DNSZoneDriver(ctx context.Context, j *job.Job) (dnszone.Driver, error) {
	return opening(ctx, m, j, func(o *opened) dnszone.Driver { return DNSZoneDriver{P: o.p} })
}

// KubernetesDriver implements provider.KubernetesDrivers.
func (m *Module) KubernetesDriver(ctx context.Context, j *job.Job) (kubernetes.Driver, error) {
	return opening(ctx, m, j, func(o *opened) kubernetes.Driver { return KubernetesDriver{P: o.p} })
}

// ClusterToken implements provider.KubernetesDrivers: a bearer token for an EKS cluster, in
// aws-iam-authenticator's format, from the space's cloud account.
func (m *Module) ClusterToken(ctx context.Context, orgID, spaceID, cluster string) (string, error) {
	o, err := m.resolve(ctx, &job.Job{OrgID: orgID, SpaceID: spaceID, Provider: Name})
	if err != nil {
		return "", err
	}
	tok, _, err := o.p.ClusterToken(ctx, cluster)
	return tok, err
}

// DatastoreDriver implements provider.DatastoreDrivers: RDS and ElastiCache in the account
// of the job's space.
func (m *Module) DatastoreDriver() dspipe.Driver {
	return DatastoreDriver{Resolve: func(ctx context.Context, jobID string) (Placement, error) {
		j, err := m.o.Records.GetJob(ctx, &store.GetJobParams{ID: jobID})
		if err != nil {
			return Placement{}, provider.LookupErr("job "+jobID, err)
		}
		o, err := m.resolve(ctx, j)
		if err != nil {
			return Placement{}, err
		}
		return Placement{P: o.p, Tags: JobTags(j)}, nil
	}}.Driver()
}

// Classify implements provider.ErrorClassifier.
func (m *Module) Classify(err error) error { return Classify(err, Op{}) }

// Lister implements provider.Listers: the space's account, opened as a job of the space
// would open it.
func (m *Module) Lister(ctx context.Context, sp *store.Space) (discovery.Lister, error) {
	if sp.CloudAccountID == "" {
		return nil, fmt.Errorf("%w: space %s names no cloud account", discovery.ErrUnsupported, sp.ID)
	}
	o, err := m.resolve(ctx, &job.Job{ID: "discovery", OrgID: sp.OrgID, SpaceID: sp.ID, Provider: Name})
	if err != nil {
		return nil, err
	}
	return Discoverer{P: o.p}, nil
}

// PlanSource implements provider.PlanSources.
func (m *Module) PlanSource() plan.Source { return PlanSource{} }

// UsageSource implements provider.PriceSources.
func (m *Module) UsageSource() pricing.UsageSource { return pricing.AWS{} }

// Executor implements provider.Remediators.
func (m *Module) Executor(ctx context.Context, j *job.Job) (remediation.Executor, error) {
	return opening(ctx, m, j, func(o *opened) remediation.Executor { return o.p.Remediator() })
}

// SecretStoreFor implements provider.SecretRoutes. The credentials of a datastore job on AWS
// (its admin password, its databases' owner passwords) live in the Secrets Manager of the
// job's cloud account; only the reference is stored.
//
// The datastore family names its secrets "<jobID>/..." (the pipeline's admin password, the
// service's owner passwords), so a name is routed by the job it starts with. A reference
// routes itself: a Secrets Manager ARN holds the name it was created under, hence the job and
// its account; any other reference is the server's own store's.
func (m *Module) SecretStoreFor(ctx context.Context, key string) (secrets.SecretStore, error) {
	name, isARN := secretsManagerName(key)
	if !isARN {
		if secrets.IsRef(key) {
			return nil, nil
		}
		name = key
	}
	jobID, _, ok := strings.Cut(name, "/")
	if !ok || !strings.HasPrefix(jobID, "job_") {
		if isARN {
			return nil, fmt.Errorf("secret %s was not made by a datastore job: %w", key, secrets.ErrNotFound)
		}
		return nil, nil
	}
	j, err := m.o.Records.GetJob(ctx, &store.GetJobParams{ID: jobID})
	switch {
	case errors.Is(err, store.ErrNotFound) && !isARN:
		// Not a stored job yet: an adopt request's password, moved out of the config before the
		// job is stored, stays in the server's store.
		return nil, nil
	case errors.Is(err, store.ErrNotFound):
		// Without its job the secret's account cannot be reached.
		return nil, fmt.Errorf("secret %s: job %s is gone: %w", key, jobID, errors.Join(secrets.ErrNotFound, err))
	case err != nil:
		return nil, provider.LookupErr("job "+jobID, err)
	}
	if !isARN && (j.Family != job.FamilyDatastore || j.Provider != Name) {
		return nil, nil
	}
	o, err := m.resolve(ctx, j)
	if err != nil {
		return nil, err
	}
	return o.p.Secrets(JobTags(j)), nil
}

// secretsManagerName returns the secret name inside a Secrets Manager ARN
// (arn:<partition>:secretsmanager:<region>:<account>:secret:<name>-<6 random characters>),
// suffix included: only its "<jobID>/" prefix is read.
func secretsManagerName(ref string) (string, bool) {
	parts := strings.SplitN(ref, ":", 7)
	if len(parts) != 7 || parts[0] != "arn" || parts[2] != "secretsmanager" || parts[5] != "secret" {
		return "", false
	}
	return parts[6], true
}
