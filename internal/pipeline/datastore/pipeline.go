package datastore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"time"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/netguard"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/steps"
	"github.com/groundworkhq/groundwork/internal/secrets"
)

// Step names, stable across releases: they are stored in job step records.
const (
	StepValidate     = "validate"
	StepNetwork      = "network"
	StepCredentials  = "credentials"
	StepCreateServer = "create_server"
	StepWaitReady    = "wait_ready"
	StepRegister     = "register"
	StepFinalize     = "finalize"
)

// Infra keys this pipeline writes.
const (
	InfraDatastore   = "datastore"
	InfraNetwork     = "network"
	InfraCredentials = "credentials"
	InfraServer      = "server"
	InfraConnection  = ds.InfraConnectionKey
	InfraEndpoint    = "endpoint"
)

// Pipeline is the datastore family's pipeline.
type Pipeline struct {
	drivers  map[string]Driver
	secrets  ds.Vault
	outbound *netguard.Policy
	poll     time.Duration
	forget   func(ctx context.Context, j *job.Job) error
	records  RotationRecords
}

var _ pipeline.Pipeline = (*Pipeline)(nil)

// Options configure a Pipeline.
type Options struct {
	// Drivers by provider name (job.Provider), e.g. "local".
	Drivers map[string]Driver
	// Secrets is read and written as the job: a reference the job did not store is not found.
	Secrets ds.Vault
	// Poll is how long wait_ready asks the engine to wait between checks (default 2s).
	Poll time.Duration
	// Outbound is the address policy an adopted server's host is dialled through.
	Outbound *netguard.Policy
	// Forget, if set, removes what the server keeps about the job's databases (their records,
	// connections and owner passwords) when register is undone, before the server goes. It
	// must be harmless to run again.
	Forget func(ctx context.Context, j *job.Job) error
	// Records are the databases and connections a credential rotation moves to the new
	// secret version (see rotate.go); nil refuses database rotations.
	Records RotationRecords
}

// New returns the datastore pipeline.
func New(opts Options) *Pipeline {
	if opts.Poll <= 0 {
		opts.Poll = 2 * time.Second
	}
	return &Pipeline{drivers: opts.Drivers, secrets: opts.Secrets, outbound: opts.Outbound, poll: opts.Poll, forget: opts.Forget,
		records: opts.Records}
}

// Family implements pipeline.Pipeline.
func (p *Pipeline) Family() job.Family { return job.FamilyDatastore }

// LeaseTTL implements pipeline.Pipeline: initdb and a first MariaDB start take seconds, a
// cloud create call returns at once (readiness is waited for without a lease).
func (p *Pipeline) LeaseTTL() time.Duration { return 5 * time.Minute }

// Validate implements pipeline.Pipeline; errors are *ds.FieldError naming the field.
func (p *Pipeline) Validate(ctx context.Context, j *job.Job) error {
	c, err := decodeConfig(j.Config)
	if err != nil {
		return err
	}
	if err := validateConfig(c, j.Mode); err != nil {
		return err
	}
	if ip, err := netip.ParseAddr(c.Host); j.Mode == job.ModeAdopt && err == nil {
		// A name is checked when it is dialled; an address can be refused now.
		if err := p.outbound.Check(ip); err != nil {
			return &ds.FieldError{Field: "config.host", Rule: "outbound", Message: err.Error()}
		}
	}
	if _, ok := p.drivers[j.Provider]; !ok {
		return &ds.FieldError{Field: "provider", Rule: ds.RuleEnum, Message: fmt.Sprintf("provider %q cannot serve datastores", j.Provider)}
	}
	return nil
}

// Steps implements pipeline.Pipeline. The list is the same for both modes; each step branches
// on the mode so that step records line up across jobs.
func (p *Pipeline) Steps(j *job.Job) []pipeline.Step {
	steps := []pipeline.Step{
		{Name: StepValidate, Do: p.validate},
		{Name: StepNetwork, Do: p.network, Undo: p.undoNetwork},
		{Name: StepCredentials, Do: p.credentials, Undo: p.undoCredentials},
		{Name: StepCreateServer, Do: p.createServer, Undo: p.deleteServer},
		{Name: StepWaitReady, Do: p.waitReady},
		{Name: StepRegister, Do: p.register, Undo: p.unregister},
		{Name: StepFinalize, Do: p.finalize},
	}
	if _, ok, _ := rotationOf(j); ok {
		steps = append(steps, p.rotationSteps()...)
	}
	return steps
}

// run bundles what every step needs.
type run struct {
	cfg    Config
	driver Driver
	adopt  bool
	log    *slog.Logger
}

func (p *Pipeline) load(r *pipeline.Run) (run, error) {
	c, err := decodeConfig(r.Job.Config)
	if err != nil {
		return run{}, fault.UserAction(err, "InvalidConfig", err.Error(), "")
	}
	d, ok := p.drivers[r.Job.Provider]
	if !ok {
		return run{}, fault.UserAction(fmt.Errorf("provider %q cannot serve datastores", r.Job.Provider), "UnsupportedProvider", "Choose a provider that serves datastores.", "")
	}
	log := r.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return run{cfg: c, driver: d, adopt: r.Job.Mode == job.ModeAdopt, log: log.With("job", r.Job.ID, "step", r.Step)}, nil
}

// credentialsInfra is what the credentials step records: a reference, never a value.
type credentialsInfra struct {
	SecretRef string `json:"secretRef"`
	AdminUser string `json:"adminUser,omitempty"`
	Adopted   bool   `json:"adopted,omitempty"`
}

type serverInfra struct {
	ServerInfo
	Engine  ds.Engine `json:"engine"`
	Adopted bool      `json:"adopted,omitempty"`
}

// ConnectionInfra is the job's admin endpoint: {host, port, user, secretRef}; the database
// service reads it back from infra.
type ConnectionInfra = ds.Endpoint

func (p *Pipeline) validate(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	rn, err := p.load(r)
	if err != nil {
		return pipeline.Result{}, err
	}
	if err := validateConfig(rn.cfg, r.Job.Mode); err != nil {
		return pipeline.Result{}, fault.UserAction(err, "InvalidConfig", err.Error(), "")
	}
	info := map[string]any{"engine": rn.cfg.Engine, "mode": r.Job.Mode}
	if rn.adopt {
		// Adopt makes no provider calls at all, not even a capability check.
		return pipeline.Done(map[string]any{InfraDatastore: info}), nil
	}
	res, err := rn.driver.Servers.Check(ctx, CheckParams{Engine: rn.cfg.Engine, Version: rn.cfg.Version, Settings: rn.cfg.settings()})
	if err != nil {
		return pipeline.Result{}, err
	}
	info["version"] = res.Version
	if len(res.NotApplicable) > 0 {
		info["notApplicable"] = res.NotApplicable
		rn.log.InfoContext(ctx, "settings not applicable on this provider", "provider", r.Job.Provider, "settings", res.NotApplicable)
	}
	return pipeline.Done(map[string]any{InfraDatastore: info}), nil
}

func (p *Pipeline) network(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	rn, err := p.load(r)
	if err != nil {
		return pipeline.Result{}, err
	}
	if rn.adopt {
		return pipeline.Skip("adopted datastore: its network is the customer's"), nil
	}
	net, err := rn.driver.Network.Ensure(ctx, NetworkParams{JobID: r.Job.ID, Engine: rn.cfg.Engine})
	if err != nil {
		return pipeline.Result{}, err
	}
	return pipeline.Done(map[string]any{InfraNetwork: net}), nil
}

func (p *Pipeline) undoNetwork(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	rn, err := p.load(r)
	if err != nil {
		return pipeline.Result{}, err
	}
	if rn.adopt {
		return pipeline.Skip("adopted datastore: nothing to undo"), nil
	}
	gone, err := rn.driver.Network.Delete(ctx, NetworkParams{JobID: r.Job.ID, Engine: rn.cfg.Engine})
	if err != nil {
		return pipeline.Result{}, err
	}
	return steps.Gone(InfraNetwork, gone, p.poll, "waiting for the network to be deleted"), nil
}

// secretsOf is the secret store as the running job sees it.
func (p *Pipeline) secretsOf(r *pipeline.Run) secrets.SecretStore {
	return p.secrets.For(ds.JobSecrets(r.Job))
}

// adminSecretName is the deterministic name the admin password is stored under: a re-run of
// the credentials step after a crash lands on the same reference instead of an orphan.
func adminSecretName(jobID string) string { return jobID + "/admin" }

func (p *Pipeline) credentials(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	rn, err := p.load(r)
	if err != nil {
		return pipeline.Result{}, err
	}
	if rn.adopt {
		if _, err := p.secretsOf(r).Get(ctx, rn.cfg.AdminSecretRef); err != nil {
			return pipeline.Result{}, fault.UserAction(fmt.Errorf("adopted admin password: %w", err), "SecretMissing",
				"Adopt the datastore again, giving its admin password.", "")
		}
		return pipeline.Done(map[string]any{InfraCredentials: credentialsInfra{SecretRef: rn.cfg.AdminSecretRef, AdminUser: adoptUser(rn.cfg), Adopted: true}}), nil
	}
	var have credentialsInfra
	if ok, err := r.Infra(InfraCredentials, &have); err != nil {
		return pipeline.Result{}, fault.System(err)
	} else if ok && have.SecretRef != "" {
		return pipeline.Done(nil), nil
	}
	ref, err := p.secretsOf(r).Put(ctx, adminSecretName(r.Job.ID), ds.GeneratePassword())
	if err != nil {
		return pipeline.Result{}, fault.Transient(fmt.Errorf("store admin password: %w", err))
	}
	return pipeline.Done(map[string]any{InfraCredentials: credentialsInfra{SecretRef: ref}}), nil
}

func (p *Pipeline) undoCredentials(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	var have credentialsInfra
	if _, err := r.Infra(InfraCredentials, &have); err != nil {
		return pipeline.Result{}, fault.System(err)
	}
	// For an adopted datastore this removes only Groundwork's own copy of the password; the
	// server is not touched.
	if have.SecretRef != "" {
		if err := p.secretsOf(r).Delete(ctx, have.SecretRef); err != nil {
			return pipeline.Result{}, fault.Transient(fmt.Errorf("delete admin password: %w", err))
		}
	}
	return pipeline.Done(map[string]any{InfraCredentials: nil}), nil
}

func adoptUser(c Config) string {
	if c.AdminUser == "" && c.Engine == ds.EngineRedis {
		return "default"
	}
	return c.AdminUser
}

func (p *Pipeline) adminPassword(ctx context.Context, r *pipeline.Run) (string, credentialsInfra, error) {
	var cr credentialsInfra
	ok, err := r.Infra(InfraCredentials, &cr)
	if err != nil {
		return "", cr, fault.System(err)
	}
	if !ok || cr.SecretRef == "" {
		return "", cr, fault.System(errors.New("no admin credentials recorded: the credentials step has not run"))
	}
	pw, err := p.secretsOf(r).Get(ctx, cr.SecretRef)
	if err != nil {
		if errors.Is(err, secrets.ErrNotFound) {
			return "", cr, fault.System(fmt.Errorf("admin password: %w", err))
		}
		return "", cr, fault.Transient(fmt.Errorf("admin password: %w", err))
	}
	return pw, cr, nil
}

func (p *Pipeline) createServer(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	rn, err := p.load(r)
	if err != nil {
		return pipeline.Result{}, err
	}
	if rn.adopt {
		// Record-only: the server exists; nothing is created.
		info := serverInfra{Engine: rn.cfg.Engine, Adopted: true,
			ServerInfo: ServerInfo{Host: rn.cfg.Host, Port: rn.cfg.Port, AdminUser: adoptUser(rn.cfg), Version: rn.cfg.Version}}
		return pipeline.Done(map[string]any{InfraServer: info}), nil
	}
	var have serverInfra
	if ok, err := r.Infra(InfraServer, &have); err != nil {
		return pipeline.Result{}, fault.System(err)
	} else if ok && have.ID != "" && rn.cfg.ApplyImmediately != nil {
		// The server is on record only once this step finished, and only a config update
		// writes applyImmediately: the update re-opened this step.
		return p.modifyServer(ctx, rn, r)
	}
	pw, _, err := p.adminPassword(ctx, r)
	if err != nil {
		return pipeline.Result{}, err
	}
	si, err := rn.driver.Servers.Create(ctx, CreateParams{JobID: r.Job.ID, Engine: rn.cfg.Engine, Version: rn.cfg.Version,
		Name: rn.cfg.Name, AdminPassword: pw, Settings: rn.cfg.settings()})
	if err != nil {
		return pipeline.Result{}, err
	}
	return pipeline.Done(map[string]any{InfraServer: serverInfra{ServerInfo: si, Engine: rn.cfg.Engine}}), nil
}

func (p *Pipeline) deleteServer(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	rn, err := p.load(r)
	if err != nil {
		return pipeline.Result{}, err
	}
	if rn.adopt {
		return pipeline.Done(map[string]any{InfraServer: nil}), nil
	}
	gone, err := rn.driver.Servers.Delete(ctx, DeleteParams{JobID: r.Job.ID, Engine: rn.cfg.Engine})
	if err != nil {
		return pipeline.Result{}, err
	}
	return steps.Gone(InfraServer, gone, p.poll, "waiting for the server to be deleted"), nil
}

func (p *Pipeline) server(r *pipeline.Run) (serverInfra, error) {
	var s serverInfra
	ok, err := r.Infra(InfraServer, &s)
	if err != nil {
		return s, fault.System(err)
	}
	if !ok {
		return s, fault.System(errors.New("no server recorded: the create_server step has not run"))
	}
	return s, nil
}

func (p *Pipeline) waitReady(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	rn, err := p.load(r)
	if err != nil {
		return pipeline.Result{}, err
	}
	pw, cr, err := p.adminPassword(ctx, r)
	if err != nil {
		return pipeline.Result{}, err
	}
	s, err := p.server(r)
	if err != nil {
		return pipeline.Result{}, err
	}
	if rn.adopt {
		// The only thing adoption does to the server: log in once to prove the details work.
		// An unreachable server is transient (the engine retries with backoff, then fails the
		// job as retryable); refused credentials need the user.
		if err := ds.Check(ctx, ds.Conn{Engine: s.Engine, Host: s.Host, Port: s.Port, User: s.AdminUser, Password: pw,
			Dial: p.outbound.DialContext}); err != nil {
			return pipeline.Result{}, err
		}
		return pipeline.Done(nil), nil
	}
	st, err := rn.driver.Servers.Status(ctx, StatusParams{JobID: r.Job.ID, Engine: s.Engine, AdminPassword: pw})
	if err != nil {
		return pipeline.Result{}, err
	}
	if !st.Ready {
		msg := st.Message
		if msg == "" {
			msg = "waiting for the server to accept connections"
		}
		return steps.CloudWait(p.poll, msg, nil), nil
	}
	if st.AdminPassword != "" && st.AdminPassword != pw {
		// The cloud made the credential; the reference register records stays the same, so
		// only the value changes. A crash after this Put finds the values equal and goes on.
		if _, err := p.secretsOf(r).Put(ctx, cr.SecretRef, st.AdminPassword); err != nil {
			return pipeline.Result{}, fault.Transient(fmt.Errorf("store the admin password the cloud made: %w", err))
		}
	}
	return pipeline.Done(nil), nil
}

func (p *Pipeline) register(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	s, err := p.server(r)
	if err != nil {
		return pipeline.Result{}, err
	}
	_, cr, err := p.adminPassword(ctx, r)
	if err != nil {
		return pipeline.Result{}, err
	}
	conn := ConnectionInfra{Engine: s.Engine, Host: s.Host, Port: s.Port, User: s.AdminUser, SecretRef: cr.SecretRef}
	return pipeline.Done(map[string]any{InfraConnection: conn}), nil
}

func (p *Pipeline) unregister(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	if p.forget != nil {
		if err := p.forget(ctx, r.Job); err != nil {
			// The job store or the secret store did not answer; both are worth retrying.
			return pipeline.Result{}, fault.Transient(fmt.Errorf("forget the databases of %s: %w", r.Job.ID, err))
		}
	}
	return pipeline.Done(map[string]any{InfraConnection: nil}), nil
}

func (p *Pipeline) finalize(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	s, err := p.server(r)
	if err != nil {
		return pipeline.Result{}, err
	}
	return pipeline.Done(map[string]any{InfraEndpoint: net.JoinHostPort(s.Host, strconv.Itoa(s.Port))}), nil
}
