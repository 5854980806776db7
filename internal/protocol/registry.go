package protocol

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/netguard"
	"github.com/groundworkhq/groundwork/internal/store"
)

// Provisioner is a registered provisioner: who holds which pairs. The store keeps
// registrations, so the type is declared there.
type Provisioner = store.Provisioner

// ErrProvisionerNotFound is returned for an unknown provisioner id, or a pair nobody holds.
var ErrProvisionerNotFound = store.ErrProvisionerNotFound

// PairConflictError refuses a registration claiming a pair another provisioner holds (HTTP 409).
type PairConflictError = store.PairConflictError

// InvalidRegistrationError refuses a registration whose fields are wrong (HTTP 422).
type InvalidRegistrationError struct{ Fields []catalog.FieldError }

func (e *InvalidRegistrationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Message
	}
	return "invalid registration: " + strings.Join(parts, "; ")
}

// UnreachableError refuses a registration whose remote did not answer GET /healthz properly
// (HTTP 422: the URL given is wrong or the provisioner is not up).
type UnreachableError struct {
	URL string
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("provisioner at %s did not answer: %v", e.URL, e.Err)
}
func (e *UnreachableError) Unwrap() error { return e.Err }

// ProvisionerStore persists registrations, each in its organisation (p.OrgID). InsertProvisioner
// must refuse, atomically, a provisioner claiming a pair another one of the same organisation
// holds, returning *PairConflictError: the registry checks first for a good message, but two
// replicas may register at once, and only the store can settle that (a unique index on
// (org, kind, type)). Every read and delete names the organisation: another one's registration
// is not found.
type ProvisionerStore interface {
	InsertProvisioner(ctx context.Context, p Provisioner) error
	ListProvisioners(ctx context.Context, orgID string) ([]Provisioner, error)
	// GetProvisioner and DeleteProvisioner return ErrProvisionerNotFound for an unknown id.
	GetProvisioner(ctx context.Context, orgID, id string) (Provisioner, error)
	DeleteProvisioner(ctx context.Context, orgID, id string) error
	// ProvisionerForPair returns the holder of pair in orgID, or ErrProvisionerNotFound.
	ProvisionerForPair(ctx context.Context, orgID string, pair catalog.Pair) (Provisioner, error)
}

// HealthChecker checks that a remote provisioner answers before it is registered.
type HealthChecker interface {
	Check(ctx context.Context, baseURL string, pairs []catalog.Pair) error
}

// RegistryOptions configure NewRegistry.
type RegistryOptions struct {
	// BuiltIn is Groundwork's own provisioner; it holds its pairs from start-up and cannot be
	// removed. Its ID defaults to "builtin".
	BuiltIn Provisioner
	// Catalog, when set, refuses registrations for pairs it does not hold.
	Catalog *catalog.Catalog
	// Health checks the remote (default: GET /healthz through a Client with a 10s timeout,
	// dialling through Outbound).
	Health HealthChecker
	// Outbound is the address policy a registration's URL must pass (nil: only the
	// always-refused ranges).
	Outbound *netguard.Policy
	Now      func() time.Time
}

// Registry decides which provisioner holds each pair: each pair has exactly one.
type Registry struct {
	store   ProvisionerStore
	builtin Provisioner
	opts    RegistryOptions
}

// NewRegistry returns a registry over store.
func NewRegistry(store ProvisionerStore, opts RegistryOptions) *Registry {
	b := opts.BuiltIn
	b.BuiltIn = true
	b.URL = ""
	if b.ID == "" {
		b.ID = "builtin"
	}
	if b.Name == "" {
		b.Name = "groundwork"
	}
	b.Pairs = slices.Clone(b.Pairs)
	if opts.Health == nil {
		opts.Health = HTTPHealthChecker{Timeout: 10 * time.Second, Outbound: opts.Outbound}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Registry{store: store, builtin: b, opts: opts}
}

// RegisterInput is the body of POST /api/provisioners.
type RegisterInput struct {
	Name  string         `json:"name"`
	URL   string         `json:"url"`
	Pairs []catalog.Pair `json:"pairs"`
}

// Register records a remote provisioner. It refuses invalid input (*InvalidRegistrationError),
// a pair already held (*PairConflictError, naming the pair and its holder) and a remote that
// does not answer (*UnreachableError).
func (r *Registry) Register(ctx context.Context, orgID string, in RegisterInput) (Provisioner, error) {
	return r.RegisterWithin(ctx, orgID, in, func(_ Provisioner, insert func(ProvisionerStore) error) error {
		return insert(r.store)
	})
}

// RegisterWithin is Register with the final store write handed to within, which runs insert on
// the store of its choice: the API runs it in the transaction that also writes the audit entry.
// Every check, including the call to the remote, happens before, outside any transaction.
func (r *Registry) RegisterWithin(ctx context.Context, orgID string, in RegisterInput, within func(p Provisioner, insert func(ProvisionerStore) error) error) (Provisioner, error) {
	if err := r.check(in); err != nil {
		return Provisioner{}, err
	}
	for _, p := range in.Pairs {
		if h, err := r.Lookup(ctx, orgID, p); err == nil {
			return Provisioner{}, &PairConflictError{Pair: p, HolderID: h.ID, HolderName: h.Name}
		} else if !errors.Is(err, ErrProvisionerNotFound) {
			return Provisioner{}, err
		}
	}
	if err := r.opts.Health.Check(ctx, in.URL, in.Pairs); err != nil {
		return Provisioner{}, &UnreachableError{URL: in.URL, Err: err}
	}
	p := Provisioner{
		ID: newID("prv_"), OrgID: orgID, Name: in.Name, URL: strings.TrimRight(in.URL, "/"),
		Pairs: slices.Clone(in.Pairs), CreatedAt: r.opts.Now().UTC(),
	}
	err := within(p, func(st ProvisionerStore) error { return st.InsertProvisioner(ctx, p) })
	if err != nil {
		return Provisioner{}, fmt.Errorf("register provisioner %q: %w", in.Name, err)
	}
	return p, nil
}

func (r *Registry) check(in RegisterInput) error {
	var fields []catalog.FieldError
	if strings.TrimSpace(in.Name) == "" {
		fields = append(fields, catalog.FieldError{Field: "name", Rule: "required", Message: "is required"})
	}
	if u, err := url.Parse(in.URL); in.URL == "" {
		fields = append(fields, catalog.FieldError{Field: "url", Rule: "required", Message: "is required"})
	} else if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fields = append(fields, catalog.FieldError{Field: "url", Rule: "format", Message: "must be an http(s) URL"})
	}
	if len(in.Pairs) == 0 {
		fields = append(fields, catalog.FieldError{Field: "pairs", Rule: "minItems", Message: "must name at least one pair"})
	}
	for i, p := range in.Pairs {
		f := fmt.Sprintf("pairs[%d]", i)
		if err := p.Validate(); err != nil {
			fields = append(fields, catalog.FieldError{Field: f, Rule: "enum", Message: err.Error()})
			continue
		}
		if slices.Contains(in.Pairs[:i], p) {
			fields = append(fields, catalog.FieldError{Field: f, Rule: "uniqueItems", Message: fmt.Sprintf("%s is listed twice", p)})
		}
		if r.opts.Catalog != nil {
			if _, ok := r.opts.Catalog.Get(p); !ok {
				fields = append(fields, catalog.FieldError{Field: f, Rule: "catalog", Message: fmt.Sprintf("%s is not a type of the catalog", p)})
			}
		}
	}
	if len(fields) > 0 {
		return &InvalidRegistrationError{Fields: fields}
	}
	return nil
}

// Lookup returns the provisioner holding pair for orgID, or ErrProvisionerNotFound.
func (r *Registry) Lookup(ctx context.Context, orgID string, pair catalog.Pair) (Provisioner, error) {
	if r.builtin.Holds(pair) {
		return r.builtin, nil
	}
	p, err := r.store.ProvisionerForPair(ctx, orgID, pair)
	if err != nil {
		return Provisioner{}, fmt.Errorf("holder of %s: %w", pair, err)
	}
	return p, nil
}

// List returns the built-in provisioner first, then orgID's registered ones.
func (r *Registry) List(ctx context.Context, orgID string) ([]Provisioner, error) {
	ps, err := r.store.ListProvisioners(ctx, orgID)
	if err != nil {
		return nil, fmt.Errorf("list provisioners: %w", err)
	}
	return append([]Provisioner{r.builtin}, ps...), nil
}

// Get returns one provisioner of orgID (or the built-in one).
func (r *Registry) Get(ctx context.Context, orgID, id string) (Provisioner, error) {
	if id == r.builtin.ID {
		return r.builtin, nil
	}
	p, err := r.store.GetProvisioner(ctx, orgID, id)
	if err != nil {
		return Provisioner{}, fmt.Errorf("provisioner %q: %w", id, err)
	}
	return p, nil
}

// ErrBuiltIn refuses removing the built-in provisioner (HTTP 409).
var ErrBuiltIn = errors.New("the built-in provisioner cannot be removed")

// Remove deletes a registration of orgID; its pairs become free in that organisation.
func (r *Registry) Remove(ctx context.Context, orgID, id string) error {
	return r.RemoveWithin(ctx, orgID, id, func(del func(ProvisionerStore) error) error { return del(r.store) })
}

// RemoveWithin is Remove with the store write handed to within (see RegisterWithin).
func (r *Registry) RemoveWithin(ctx context.Context, orgID, id string, within func(del func(ProvisionerStore) error) error) error {
	if id == r.builtin.ID {
		return ErrBuiltIn
	}
	if err := within(func(st ProvisionerStore) error { return st.DeleteProvisioner(ctx, orgID, id) }); err != nil {
		return fmt.Errorf("remove provisioner %q: %w", id, err)
	}
	return nil
}

// HTTPHealthChecker checks a remote with GET /healthz: it must answer status ok and, when it
// lists pairs, list every pair being registered.
type HTTPHealthChecker struct {
	Timeout  time.Duration
	Outbound *netguard.Policy
}

func (h HTTPHealthChecker) Check(ctx context.Context, baseURL string, pairs []catalog.Pair) error {
	c, err := NewClient(baseURL, ClientOptions{Timeout: h.Timeout, Outbound: h.Outbound})
	if err != nil {
		return err
	}
	hl, err := c.Health(ctx)
	if err != nil {
		return err
	}
	if len(hl.Pairs) == 0 {
		return nil
	}
	for _, p := range pairs {
		if !slices.Contains(hl.Pairs, p) {
			return fmt.Errorf("its /healthz does not list %s", p)
		}
	}
	return nil
}

// newID spells ids as every other Groundwork id: a prefix and a ULID.
func newID(prefix string) string { return prefix + ulid.Make().String() }

// MemoryStore is an in-memory ProvisionerStore for tests and single-process tools.
type MemoryStore struct {
	mu    sync.Mutex
	byID  map[string]Provisioner
	order []string
}

var _ ProvisionerStore = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{byID: map[string]Provisioner{}} }

func (m *MemoryStore) InsertProvisioner(_ context.Context, p Provisioner) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.byID[p.ID]; dup {
		return fmt.Errorf("provisioner id %q already used", p.ID)
	}
	for _, id := range m.order {
		h := m.byID[id]
		if h.OrgID != p.OrgID {
			continue
		}
		for _, pair := range p.Pairs {
			if h.Holds(pair) {
				return &PairConflictError{Pair: pair, HolderID: h.ID, HolderName: h.Name}
			}
		}
	}
	p.Pairs = slices.Clone(p.Pairs)
	m.byID[p.ID] = p
	m.order = append(m.order, p.ID)
	return nil
}

func (m *MemoryStore) ListProvisioners(_ context.Context, orgID string) ([]Provisioner, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Provisioner, 0, len(m.order))
	for _, id := range m.order {
		if m.byID[id].OrgID == orgID {
			out = append(out, m.byID[id])
		}
	}
	return out, nil
}

func (m *MemoryStore) GetProvisioner(_ context.Context, orgID, id string) (Provisioner, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.byID[id]
	if !ok || p.OrgID != orgID {
		return Provisioner{}, ErrProvisionerNotFound
	}
	return p, nil
}

func (m *MemoryStore) DeleteProvisioner(_ context.Context, orgID, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.byID[id]; !ok || p.OrgID != orgID {
		return ErrProvisionerNotFound
	}
	delete(m.byID, id)
	m.order = slices.DeleteFunc(m.order, func(s string) bool { return s == id })
	return nil
}

func (m *MemoryStore) ProvisionerForPair(_ context.Context, orgID string, pair catalog.Pair) (Provisioner, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range m.order {
		if p := m.byID[id]; p.OrgID == orgID && p.Holds(pair) {
			return p, nil
		}
	}
	return Provisioner{}, ErrProvisionerNotFound
}

// HTTPStatus is the status the API answers for an error from the Registry.
func HTTPStatus(err error) int {
	var (
		ce *PairConflictError
		ie *InvalidRegistrationError
		ue *UnreachableError
	)
	switch {
	case err == nil:
		return 200
	case errors.As(err, &ce), errors.Is(err, ErrBuiltIn):
		return 409
	case errors.As(err, &ie), errors.As(err, &ue):
		return 422
	case errors.Is(err, ErrProvisionerNotFound):
		return 404
	default:
		return 500
	}
}
