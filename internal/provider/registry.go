package provider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/groundworkhq/groundwork/internal/discovery"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/remediation"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// Registry holds the modules of one server by name. It is built in the server's wiring and
// read-only once the server serves.
type Registry struct {
	mods  map[string]Module
	names []string // in registration order, for stable messages and listings
}

// NewRegistry registers mods.
func NewRegistry(mods ...Module) (*Registry, error) {
	r := &Registry{mods: map[string]Module{}}
	for _, m := range mods {
		if err := r.Register(m); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Register adds m under its name; a name is registered once.
func (r *Registry) Register(m Module) error {
	name := m.Name()
	if name == "" {
		return errors.New("provider module without a name")
	}
	if _, dup := r.mods[name]; dup {
		return fmt.Errorf("provider %q registered twice", name)
	}
	r.mods[name] = m
	r.names = append(r.names, name)
	return nil
}

// Get returns the module named name.
func (r *Registry) Get(name string) (Module, bool) {
	m, ok := r.mods[name]
	return m, ok
}

// Ability returns the module named name as A, if it has that ability.
func Ability[A any](r *Registry, name string) (A, bool) {
	a, ok := r.mods[name].(A)
	return a, ok
}

// Offering returns the modules that have ability A, in registration order.
func Offering[A any](r *Registry) []Module {
	var out []Module
	for _, n := range r.names {
		if _, ok := r.mods[n].(A); ok {
			out = append(out, r.mods[n])
		}
	}
	return out
}

// Names returns the modules' names.
func Names(mods []Module) []string {
	out := make([]string, len(mods))
	for i, m := range mods {
		out[i] = m.Name()
	}
	return out
}

// Titles names mods to people: "AWS", "AWS or GCP".
func Titles(mods []Module) string {
	t := make([]string, len(mods))
	for i, m := range mods {
		t[i] = m.Title()
	}
	return strings.Join(t, " or ")
}

// Loader returns a family's driver resolver: the driver of the module the job's provider
// names, from get (a method expression such as VMPoolDrivers.VMPoolDriver).
func Loader[A, D any](r *Registry, family job.Family, get func(A, context.Context, *job.Job) (D, error)) func(context.Context, *job.Job) (D, error) {
	return func(ctx context.Context, j *job.Job) (D, error) {
		a, ok := Ability[A](r, j.Provider)
		if !ok {
			var zero D
			return zero, fault.UserAction(fmt.Errorf("job %s is on provider %q", j.ID, j.Provider), "WrongProvider",
				fmt.Sprintf("%s jobs on this server run on %s spaces only.", family, Titles(Offering[A](r))), "")
		}
		return get(a, ctx, j)
	}
}

// ClusterToken mints a token for a cluster a module created, from the cloud account of the
// space the cluster belongs to.
func (r *Registry) ClusterToken(ctx context.Context, provider, orgID, spaceID, cluster string) (string, error) {
	k, ok := Ability[KubernetesDrivers](r, provider)
	if !ok {
		return "", fault.UserAction(fmt.Errorf("space %s: provider %q mints no cluster tokens", spaceID, provider), "NoTokenMinter",
			"run Groundwork with the cloud provider that created this cluster", "")
	}
	return k.ClusterToken(ctx, orgID, spaceID, cluster)
}

// Lister lists a space's account through its module.
func (r *Registry) Lister(ctx context.Context, sp *store.Space) (discovery.Lister, error) {
	l, ok := Ability[Listers](r, sp.Provider)
	if !ok {
		return nil, fmt.Errorf("%w: provider %s lists nothing yet", discovery.ErrUnsupported, sp.Provider)
	}
	return l.Lister(ctx, sp)
}

// Executor returns the remediation executor of the job's provider.
func (r *Registry) Executor(ctx context.Context, j *job.Job) (remediation.Executor, error) {
	x, ok := Ability[Remediators](r, j.Provider)
	if !ok {
		return nil, fault.UserAction(fmt.Errorf("no remediation executor for provider %q", j.Provider), "NoExecutor",
			"Remediation runs on "+Titles(Offering[Remediators](r))+" spaces today.", "")
	}
	return x.Executor(ctx, j)
}

// Secrets is the server's secret store: each key in the store of the module that claims it
// (SecretRoutes), else in Local. The registry is read at each call, so the store may be made
// before the modules that read credentials through it are registered.
type Secrets struct {
	Local   secrets.SecretStore
	Modules *Registry
}

var _ secrets.SecretStore = Secrets{}

func (s Secrets) route(ctx context.Context, key string) (secrets.SecretStore, error) {
	for _, m := range Offering[SecretRoutes](s.Modules) {
		st, err := m.(SecretRoutes).SecretStoreFor(ctx, key)
		if err != nil || st != nil {
			return st, err
		}
	}
	return s.Local, nil
}

// Put implements secrets.SecretStore.
func (s Secrets) Put(ctx context.Context, key, value string) (string, error) {
	st, err := s.route(ctx, key)
	if err != nil {
		return "", err
	}
	return st.Put(ctx, key, value)
}

// Get implements secrets.SecretStore.
func (s Secrets) Get(ctx context.Context, ref string) (string, error) {
	st, err := s.route(ctx, ref)
	if err != nil {
		return "", err
	}
	return st.Get(ctx, ref)
}

// Delete implements secrets.SecretStore.
func (s Secrets) Delete(ctx context.Context, ref string) error {
	st, err := s.route(ctx, ref)
	if err != nil {
		return err
	}
	return st.Delete(ctx, ref)
}

// Family is a cloud family's pipeline as the server runs it: a job on a provider whose module
// lacks the family's drivers is refused at Validate with a 400 naming the space, never failed
// at run time; a pipeline's plain refusal is answered as a refusal of the config.
type Family struct {
	pipeline.Pipeline
	// Providers are the modules offering the family's drivers.
	Providers []Module
	// All, if set, is every module, so that one not offering the family can say why.
	All *Registry
}

// FamilyNotes is a module that explains, in the refusal, why it does not offer a family (a
// family the cloud will get later, and when).
type FamilyNotes interface {
	// NotOffered is the reason, or "" for the generic refusal.
	NotOffered(f job.Family) string
}

// Unwrap returns the family's own pipeline, so that a caller can ask it for abilities beyond
// pipeline.Pipeline (a config updater).
func (p Family) Unwrap() pipeline.Pipeline { return p.Pipeline }

// Validate implements pipeline.Pipeline.
func (p Family) Validate(ctx context.Context, j *job.Job) error {
	if !slices.Contains(Names(p.Providers), j.Provider) {
		if p.All != nil {
			if n, ok := Ability[FamilyNotes](p.All, j.Provider); ok {
				if why := n.NotOffered(p.Family()); why != "" {
					return validation.New("spaceID", "provider", why)
				}
			}
		}
		titles := Titles(p.Providers)
		article := "a"
		if titles != "" && strings.ContainsRune("AEIOU", rune(titles[0])) {
			article = "an"
		}
		return validation.New("spaceID", "provider", fmt.Sprintf("%s is not available on the %s provider; use a space on %s %s cloud account",
			p.Family(), j.Provider, article, titles))
	}
	if err := p.Pipeline.Validate(ctx, j); err != nil {
		if _, ok := validation.Fields(err); ok {
			return err
		}
		return validation.New("config", "valid", err.Error())
	}
	return nil
}
