// Package api serves Groundwork's HTTP API under /api: JSON in and out, RFC 9457 problems with
// the offending field named, bearer-token auth, and one route table that names each route's
// policy so that no handler checks permissions on its own.
package api

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/jobs"
	"github.com/groundworkhq/groundwork/internal/netguard"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
	"github.com/groundworkhq/groundwork/internal/rbac"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
)

// Principal is who is calling.
type Principal struct {
	OrgID string
	Actor string // an email, or system:<component>
	// Perms is what the principal may do; nil (a StaticToken) means everything in its org.
	Perms *rbac.Permissions
	// TokenID is the API token used, when it was a stored one.
	TokenID string
}

// Authenticator turns a bearer token into a principal, or refuses it.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (*Principal, error)
}

// Authorizer decides whether p may use a route's policy (e.g. "provisioning:create").
type Authorizer interface {
	Authorize(ctx context.Context, p *Principal, policy string) error
}

// ErrUnauthenticated is returned by an Authenticator for a bad or missing token.
var ErrUnauthenticated = errors.New("unauthenticated")

// StaticToken accepts one token (the bootstrap admin token) as the admin of one org.
type StaticToken struct {
	Token string
	OrgID string
	Actor string
}

func (s StaticToken) Authenticate(_ context.Context, token string) (*Principal, error) {
	if s.Token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(s.Token)) != 1 {
		return nil, ErrUnauthenticated
	}
	actor := s.Actor
	if actor == "" {
		actor = "admin" // the audit log needs an actor for every change
	}
	return &Principal{OrgID: s.OrgID, Actor: actor}, nil
}

// AllowAll authorises every authenticated principal (a single admin token, before RBAC).
type AllowAll struct{}

func (AllowAll) Authorize(context.Context, *Principal, string) error { return nil }

// Config wires the server.
type Config struct {
	Store      store.Full
	Pipelines  *pipeline.Registry
	Catalog    *catalog.Catalog
	Auth       Authenticator
	Authorizer Authorizer
	Hub        *Hub
	Metrics    *prometheus.Registry
	Logger     *slog.Logger
	Now        func() time.Time
	// Ready reports whether this replica should receive traffic (e.g. false while draining).
	Ready func() bool
	// Secrets keeps credential material given in requests (a cloud account's credentials, a
	// cluster's token, an adopted server's password); every use names the owning object, so a
	// reference answers only to the organisation and object it was stored for.
	Secrets SecretVault
	// Outbound is the address policy for addresses users give (cluster endpoints, adopted
	// datastore hosts); nil refuses only link-local and metadata addresses.
	Outbound *netguard.Policy

	// Discovery answers GET /api/spaces/{id}/discovery/{kind} (nil: 404).
	Discovery Discovery
	// Planner answers POST /api/provisioning-jobs/plan (nil: steps only, no cloud operations).
	Planner Planner

	// MaxTokenTTL, if positive, caps the lifetime of the API tokens POST /api/tokens makes.
	MaxTokenTTL time.Duration

	// Provisioners is the provisioner registry behind /api/provisioners (nil: those routes 404).
	Provisioners Provisioners
	// Datastores serves databases, connections and secret reveal (nil: those routes are absent).
	Datastores *DatastoreConfig
	// Components serves the Helm component catalog, install-component and cluster
	// registration (nil: those routes are absent).
	Components *ComponentConfig
	// Remediation serves /api/remediation-jobs (nil: those routes are absent).
	Remediation *RemediationConfig
	// VMOps plans the VM operations of PATCH /api/provisioning-jobs/{id} (vmOp, resize) on
	// vm_pool jobs (nil: refused as not supported).
	VMOps vmpool.Operator
	// Drift serves inspect, drift and reconcile of provisioning jobs (nil: those routes are
	// absent).
	Drift *DriftConfig
}

// SecretVault is the secret store seen per owner (*secrets.Vault satisfies it).
type SecretVault interface {
	For(owner secrets.Owner) secrets.SecretStore
	Owner(ctx context.Context, ref string) (secrets.Owner, error)
	Forget(ctx context.Context, owner secrets.Owner) error
}

// Server is the HTTP API.
type Server struct {
	cfg     Config
	jobs    *jobs.Service
	log     *slog.Logger
	mux     *http.ServeMux
	handler http.Handler
	panics  prometheus.Counter

	openapiOnce sync.Once
	openapiDoc  []byte
	openapiErr  error
}

type handlerFunc func(w http.ResponseWriter, r *http.Request, p *Principal) error

// route names one endpoint and the policy it requires.
type route struct {
	method, path, policy string
	h                    handlerFunc
}

// allRoutes is every /api route the server mounts: the core table and the families' tables.
func (s *Server) allRoutes() []route {
	return append(append(append(append(append(append(s.routes(), s.datastoreRoutes()...), s.componentRoutes()...), s.remediationRoutes()...), s.driftRoutes()...), s.updateRoutes()...), s.approvalRoutes()...)
}

func (s *Server) routes() []route {
	return []route{
		{"GET", "/api/spaces", "space:view", s.listSpaces},
		{"POST", "/api/spaces", "space:create", s.createSpace},
		{"GET", "/api/spaces/{id}", "space:view", s.getSpace},
		{"DELETE", "/api/spaces/{id}", "space:delete", s.deleteSpace},
		{"GET", "/api/spaces/{id}/discovery/{kind}", "space:view", s.discover},
		{"GET", "/api/cloud-accounts", "cloud-account:view", s.listAccounts},
		{"POST", "/api/cloud-accounts", "cloud-account:create", s.createAccount},
		{"GET", "/api/cloud-accounts/{id}", "cloud-account:view", s.getAccount},
		{"GET", "/api/provisioning-jobs", "provisioning:view", s.listJobs},
		{"POST", "/api/provisioning-jobs", "provisioning:create", s.createJob},
		{"POST", "/api/provisioning-jobs/plan", "provisioning:create", s.planJob},
		{"GET", "/api/provisioning-jobs/{id}/plan", "provisioning:view", s.jobPlan},
		{"GET", "/api/provisioning-jobs/{id}", "provisioning:view", s.getJob},
		{"PATCH", "/api/provisioning-jobs/{id}", "provisioning:update", s.patchJob},
		{"DELETE", "/api/provisioning-jobs/{id}", "provisioning:delete", s.deleteJob},
		{"POST", "/api/provisioning-jobs/{id}/retry", "provisioning:update", s.retryJob},
		{"GET", "/api/provisioning-jobs/{id}/events", "provisioning:view", s.jobEvents},
		{"GET", "/api/catalog/types", "catalog:view", s.listTypes},
		{"GET", "/api/catalog/types/{category}/{type}", "catalog:view", s.getType},
		{"POST", "/api/provisioners", "provisioner:create", s.createProvisioner},
		{"GET", "/api/provisioners", "provisioner:view", s.listProvisioners},
		{"GET", "/api/provisioners/{id}", "provisioner:view", s.getProvisioner},
		{"DELETE", "/api/provisioners/{id}", "provisioner:delete", s.deleteProvisioner},
		{"GET", "/api/policies", "role:view", s.listPolicies},
		{"GET", "/api/roles", "role:view", s.listRoles},
		{"POST", "/api/roles", "role:create", s.createRole},
		{"GET", "/api/roles/{id}", "role:view", s.getRole},
		{"DELETE", "/api/roles/{id}", "role:delete", s.deleteRole},
		{"GET", "/api/role-assignments", "role:view", s.listAssignments},
		{"POST", "/api/role-assignments", "role:create", s.createAssignment},
		{"DELETE", "/api/role-assignments/{id}", "role:delete", s.deleteAssignment},
		{"GET", "/api/users", "user:view", s.listUsers},
		{"POST", "/api/users", "user:create", s.createUser},
		{"DELETE", "/api/users/{email}", "user:delete", s.deleteUser},
		{"GET", "/api/users/{email}/permissions", "user:view", s.userPermissions},
		{"GET", "/api/teams", "team:view", s.listTeams},
		{"POST", "/api/teams", "team:create", s.createTeam},
		{"GET", "/api/teams/{id}", "team:view", s.getTeam},
		{"DELETE", "/api/teams/{id}", "team:delete", s.deleteTeam},
		{"GET", "/api/tokens", "token:view", s.listTokens},
		{"POST", "/api/tokens", "token:create", s.createToken},
		{"DELETE", "/api/tokens/{id}", "token:delete", s.revokeToken},
		{"GET", "/api/audit-logs", "audit-log:view", s.listAudit},
		{"PATCH", "/api/cloud-accounts/{id}", "cloud-account:update", s.patchAccount},
		{"DELETE", "/api/cloud-accounts/{id}", "cloud-account:delete", s.deleteAccount},
		{"GET", "/api/cloud-accounts/{id}/upgrade-policy", "cloud-account:view", s.accountUpgradePolicy},
		{"PATCH", "/api/teams/{id}", "team:update", s.patchTeam},
	}
}

// New builds the server.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Authorizer == nil {
		cfg.Authorizer = Permitted{}
	}
	if cfg.Hub == nil {
		cfg.Hub = NewHub()
	}
	if cfg.Store != nil {
		cfg.Hub.useStore(cfg.Store)
	}
	if cfg.Ready == nil {
		cfg.Ready = func() bool { return true }
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("component", "api"), mux: http.NewServeMux(),
		panics: prometheus.NewCounter(prometheus.CounterOpts{Name: "groundwork_http_handler_panics_total",
			Help: "HTTP handlers that panicked (answered 500, logged with the request id)."})}
	s.jobs = &jobs.Service{Store: cfg.Store, Pipelines: cfg.Pipelines, Catalog: cfg.Catalog, Planner: cfg.Planner,
		VMOps: cfg.VMOps, Secrets: cfg.Secrets, Log: s.log, Now: cfg.Now}
	if cfg.Metrics != nil {
		cfg.Metrics.MustRegister(s.panics)
	}
	s.handler = s.guard(s.mux)
	for _, rt := range s.allRoutes() {
		s.mux.Handle(rt.method+" "+rt.path, s.wrap(rt))
	}
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.mux.HandleFunc("GET /readyz", s.readyz)
	// The contract is public: clients and gateways read it before they hold a token.
	s.mux.HandleFunc("GET "+openapiPath, s.serveOpenAPI)
	if cfg.Metrics != nil {
		s.mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Metrics, promhttp.HandlerOpts{}))
	}
	s.mux.HandleFunc("/api/", s.noRoute)
	return s
}

// Handle mounts an extra handler (the provisioner protocol, the web wizard) on the server's mux.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// wrap authenticates, authorises by the route's policy, runs the handler and turns its error
// into a problem. Errors that are not problems are ours: logged, answered 500 without detail.
func (s *Server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || tok == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="groundwork"`)
			writeProblem(w, r, problem(http.StatusUnauthorized, "send Authorization: Bearer <token>"))
			return
		}
		p, err := s.cfg.Auth.Authenticate(r.Context(), tok)
		if errors.Is(err, ErrUnauthenticated) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="groundwork", error="invalid_token"`)
			writeProblem(w, r, problem(http.StatusUnauthorized, "the token is not valid (unknown, expired or revoked)"))
			return
		}
		if err == nil {
			if aerr := s.cfg.Authorizer.Authorize(r.Context(), p, rt.policy); aerr != nil {
				writeProblem(w, r, problem(http.StatusForbidden, "this needs the "+rt.policy+" permission"))
				return
			}
			err = s.authorizeObject(r, p, rt.policy)
		}
		if err == nil {
			err = wellFormedQuery(r)
		}
		if err == nil {
			err = rt.h(w, r, p)
		}
		if err != nil {
			var pr *Problem
			if errors.As(err, &pr) {
				writeProblem(w, r, pr)
				return
			}
			s.log.Error("request failed", "request_id", requestID(r.Context()), "method", r.Method, "path", r.URL.Path, "error", err)
			writeProblem(w, r, problem(http.StatusInternalServerError, "internal error; the server log has details"))
		}
	})
}

// wellFormedQuery refuses a query parameter given more than once or given empty. Every
// parameter of the API is single-valued and optional: a handler reads the first value and
// treats "" as absent, so "page=&page=x" or "limit=" would otherwise be answered as if the
// invalid part had not been sent, and "spaceID=$UNSET" would list every space's jobs. Leaving
// a parameter out is how to not filter. An empty cursor is the first page, so that a script
// can loop on "cursor=$next" from the start.
func wellFormedQuery(r *http.Request) error {
	var fields []FieldError
	for name, values := range r.URL.Query() {
		switch {
		case len(values) > 1:
			fields = append(fields, FieldError{Field: name, Rule: "single", Message: "is given more than once; give it once"})
		case values[0] == "" && name != "cursor":
			fields = append(fields, FieldError{Field: name, Rule: "required", Message: "is empty; give a value or leave the parameter out"})
		}
	}
	if len(fields) == 0 {
		return nil
	}
	sort.Slice(fields, func(i, j int) bool { return fields[i].Field < fields[j].Field })
	return badRequest("a query parameter is repeated or empty", fields...)
}

// noRoute answers what no route matched: 405 with Allow when the path exists under other
// methods (the catch-all would otherwise shadow the mux's own 405), else 404.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	// Only the most specific path counts: POST /api/spaces/register-cluster is its own
	// resource, not a space whose id is "register-cluster".
	var allow []string
	best := -1
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		_, pattern := s.mux.Handler(probe)
		if pattern == "" || pattern == "/api/" {
			continue
		}
		switch wild := strings.Count(pattern, "{"); {
		case best < 0 || wild < best:
			best, allow = wild, []string{m}
		case wild == best:
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeProblem(w, r, problem(http.StatusMethodNotAllowed, r.Method+" is not allowed on "+r.URL.Path+"; use "+strings.Join(allow, ", ")))
		return
	}
	writeProblem(w, r, problem(http.StatusNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path))
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.cfg.Store.Ping(ctx); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "store unreachable"})
		return
	}
	if !s.cfg.Ready() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "draining"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// storeErr maps the store's sentinel errors to problems; anything else stays an internal error.
func storeErr(err error, what string) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return notFound(what)
	case errors.Is(err, store.ErrVersionConflict):
		return problem(http.StatusConflict, what+" changed since you read it; read it again and retry")
	case errors.Is(err, store.ErrInUse):
		return problem(http.StatusConflict, err.Error())
	}
	return err
}
