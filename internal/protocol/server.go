package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"

	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
)

// Handler does the work for one pair. Implementations answer a failure of the work inside the
// answer (Outcome failed); a returned error is for the handler's own trouble. An error
// classified user_action is still answered as outcome failed; a transient one as 503 so that
// the caller retries; anything else as 500.
//
// Apply must be idempotent on req.Key(). Slow work answers Outcome accepted with an
// OperationID that Backend.Operation can read; Groundwork's own backend maps an apply to a job
// (keyed by req.Key()) and an operation to the job's status.
type Handler interface {
	Plan(ctx context.Context, req *Request) (PlanAnswer, error)
	Apply(ctx context.Context, req *Request) (ApplyAnswer, error)
	Inspect(ctx context.Context, req *Request) (InspectAnswer, error)
}

// ErrUnknownOperation is returned by Backend.Operation for an id it never issued (a 404).
var ErrUnknownOperation = errors.New("unknown operation")

// Backend is what the server dispatches to: the handler of each pair it serves and the
// operations they started.
type Backend interface {
	// Handler returns the handler of p, or false when this server does not handle p.
	Handler(ctx context.Context, p catalog.Pair) (Handler, bool)
	// Operation reads an operation; ErrUnknownOperation when there is none with that id.
	Operation(ctx context.Context, id string) (Operation, error)
	// Pairs lists the pairs served, for GET /healthz.
	Pairs(ctx context.Context) []catalog.Pair
}

// ServerOptions configure NewServer.
type ServerOptions struct {
	// Name is reported by GET /healthz.
	Name string
	// Catalog, when set, validates settings before a handler sees them: refused settings are
	// answered outcome failed with code InvalidSettings and the field errors, and handlers
	// receive the settings with the catalog's defaults filled in. Pairs missing from the
	// catalog pass through unchecked.
	Catalog *catalog.Catalog
	Logger  *slog.Logger
}

// Server serves the protocol. Mount it under a prefix with http.StripPrefix, e.g.
// mux.Handle("/provisioner/", http.StripPrefix("/provisioner", srv)).
type Server struct {
	backend Backend
	opts    ServerOptions
	mux     *http.ServeMux
}

var _ http.Handler = (*Server)(nil)

// maxBody bounds a request body; settings are small documents.
const maxBody = 1 << 20

// NewServer returns the protocol's HTTP handler over backend.
func NewServer(backend Backend, opts ServerOptions) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{backend: backend, opts: opts, mux: http.NewServeMux()}
	s.mux.HandleFunc("POST /plan", s.plan)
	s.mux.HandleFunc("POST /apply", s.apply)
	s.mux.HandleFunc("POST /inspect", s.inspect)
	s.mux.HandleFunc("GET /operations/{operationId}", s.operation)
	s.mux.HandleFunc("GET /healthz", s.health)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		WriteProblem(w, http.StatusNotFound, "unknown call", fmt.Sprintf("%s %s is not a call of the provisioner protocol", r.Method, r.URL.Path))
	})
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// prepare decodes and checks a request and finds its handler. ok is false when an answer was
// already written (a broken call, a wrong pair, refused settings).
func (s *Server) prepare(w http.ResponseWriter, r *http.Request, wrong func(Failure) any) (*Request, Handler, bool) {
	req := &Request{}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	if err := dec.Decode(req); err != nil {
		WriteProblem(w, http.StatusBadRequest, "malformed request", "the body is not a valid request: "+err.Error())
		return nil, nil, false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		WriteProblem(w, http.StatusBadRequest, "malformed request", "the body holds more than one JSON value")
		return nil, nil, false
	}
	if err := req.Check(); err != nil {
		WriteProblem(w, http.StatusBadRequest, "malformed request", err.Error())
		return nil, nil, false
	}
	h, ok := s.backend.Handler(r.Context(), req.Pair())
	if !ok {
		writeJSON(w, http.StatusOK, wrong(WrongPairFailure(req.Pair())))
		return nil, nil, false
	}
	if s.opts.Catalog != nil && req.Desired() == EnsurePresent {
		settings, err := s.opts.Catalog.Validate(req.Pair(), req.Settings)
		var ve *catalog.ValidationError
		switch {
		case errors.As(err, &ve):
			writeJSON(w, http.StatusOK, wrong(Failure{Code: "InvalidSettings", Reason: ve.Error(), Fields: ve.Fields, FixHint: "correct the settings named in fields"}))
			return nil, nil, false
		case errors.Is(err, catalog.ErrUnknownType):
		case err != nil:
			s.internal(w, r, err)
			return nil, nil, false
		default:
			req.Settings = settings
		}
	}
	return req, h, true
}

func (s *Server) plan(w http.ResponseWriter, r *http.Request) {
	req, h, ok := s.prepare(w, r, func(f Failure) any { return PlanAnswer{Outcome: OutcomeFailed, Changes: []Change{}, Failure: f} })
	if !ok {
		return
	}
	ans, err := h.Plan(r.Context(), req)
	if f, handled := s.failure(w, r, err); handled {
		if f != nil {
			writeJSON(w, http.StatusOK, PlanAnswer{Outcome: OutcomeFailed, Changes: []Change{}, Failure: *f})
		}
		return
	}
	if ans.Changes == nil {
		ans.Changes = []Change{}
	}
	writeJSON(w, http.StatusOK, ans)
}

func (s *Server) apply(w http.ResponseWriter, r *http.Request) {
	req, h, ok := s.prepare(w, r, func(f Failure) any { return ApplyAnswer{Outcome: OutcomeFailed, Failure: f} })
	if !ok {
		return
	}
	ans, err := h.Apply(r.Context(), req)
	if f, handled := s.failure(w, r, err); handled {
		if f != nil {
			writeJSON(w, http.StatusOK, ApplyAnswer{Outcome: OutcomeFailed, Failure: *f})
		}
		return
	}
	status := http.StatusOK
	if ans.Outcome == OutcomeAccepted || ans.Outcome == OutcomeInProgress {
		// An apply repeated while its work goes on answers the same operation, still 202.
		ans.Outcome = OutcomeAccepted
		status = http.StatusAccepted
		w.Header().Set("Location", "operations/"+ans.OperationID)
	}
	writeJSON(w, status, ans)
}

func (s *Server) inspect(w http.ResponseWriter, r *http.Request) {
	req, h, ok := s.prepare(w, r, func(f Failure) any {
		return InspectAnswer{Outcome: OutcomeFailed, Resources: []Resource{}, Drift: []Drift{}, Failure: f}
	})
	if !ok {
		return
	}
	ans, err := h.Inspect(r.Context(), req)
	if f, handled := s.failure(w, r, err); handled {
		if f != nil {
			writeJSON(w, http.StatusOK, InspectAnswer{Outcome: OutcomeFailed, Resources: []Resource{}, Drift: []Drift{}, Failure: *f})
		}
		return
	}
	if ans.Resources == nil {
		ans.Resources = []Resource{}
	}
	if ans.Drift == nil {
		ans.Drift = []Drift{}
	}
	writeJSON(w, http.StatusOK, ans)
}

func (s *Server) operation(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("operationId")
	op, err := s.backend.Operation(r.Context(), id)
	if errors.Is(err, ErrUnknownOperation) {
		WriteProblem(w, http.StatusNotFound, "unknown operation", fmt.Sprintf("no operation %q", id))
		return
	}
	if f, handled := s.failure(w, r, err); handled {
		if f != nil {
			writeJSON(w, http.StatusOK, Operation{OperationID: id, Outcome: OutcomeFailed, Failure: *f})
		}
		return
	}
	writeJSON(w, http.StatusOK, op)
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	pairs := s.backend.Pairs(r.Context())
	if pairs == nil {
		pairs = []catalog.Pair{}
	}
	writeJSON(w, http.StatusOK, Health{Status: "ok", Name: s.opts.Name, Pairs: pairs})
}

// failure maps a handler's error. handled is false when there was none. A user_action error
// becomes a failed outcome (returned for the caller to write); others are written as problems.
func (s *Server) failure(w http.ResponseWriter, r *http.Request, err error) (*Failure, bool) {
	if err == nil {
		return nil, false
	}
	fe := fault.As(err)
	switch fe.Class {
	case job.ClassUserAction:
		return &Failure{Code: fe.Code, Reason: err.Error(), FixHint: fe.FixHint}, true
	case job.ClassTransient:
		s.opts.Logger.WarnContext(r.Context(), "provisioner call failed transiently", "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", "5")
		WriteProblem(w, http.StatusServiceUnavailable, "try again", err.Error())
		return nil, true
	default:
		s.internal(w, r, err)
		return nil, true
	}
}

func (s *Server) internal(w http.ResponseWriter, r *http.Request, err error) {
	s.opts.Logger.ErrorContext(r.Context(), "provisioner call failed", "path", r.URL.Path, "err", err)
	WriteProblem(w, http.StatusInternalServerError, "internal error", "the provisioner could not answer; see its log")
}

// Problem is an RFC 9457 problem document, the body of every HTTP error of the protocol.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// WriteProblem writes a problem+json answer.
func WriteProblem(w http.ResponseWriter, status int, title, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(Problem{Type: "about:blank", Title: title, Status: status, Detail: detail})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// OperationReader is implemented by handlers that start operations; Mux asks each in turn.
type OperationReader interface {
	Operation(ctx context.Context, id string) (Operation, error)
}

// Mux is a Backend built from one handler per pair. Handlers that implement OperationReader
// serve GET operations/{id}.
type Mux struct {
	mu       sync.RWMutex
	handlers map[catalog.Pair]Handler
	order    []catalog.Pair
}

var _ Backend = (*Mux)(nil)

// NewMux returns an empty Mux.
func NewMux() *Mux { return &Mux{handlers: map[catalog.Pair]Handler{}} }

// Handle makes h the handler of p; a pair handled twice is a programming error.
func (m *Mux) Handle(p catalog.Pair, h Handler) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.handlers[p]; dup {
		return fmt.Errorf("protocol: %s handled twice", p)
	}
	m.handlers[p] = h
	m.order = append(m.order, p)
	return nil
}

func (m *Mux) Handler(_ context.Context, p catalog.Pair) (Handler, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	h, ok := m.handlers[p]
	return h, ok
}

func (m *Mux) Pairs(context.Context) []catalog.Pair {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Clone(m.order)
}

func (m *Mux) Operation(ctx context.Context, id string) (Operation, error) {
	m.mu.RLock()
	// One handler may serve several pairs and be asked more than once; that is harmless, and
	// handlers need not be comparable.
	var readers []OperationReader
	for _, p := range m.order {
		if r, ok := m.handlers[p].(OperationReader); ok {
			readers = append(readers, r)
		}
	}
	m.mu.RUnlock()
	for _, r := range readers {
		op, err := r.Operation(ctx, id)
		if errors.Is(err, ErrUnknownOperation) {
			continue
		}
		return op, err
	}
	return Operation{}, fmt.Errorf("%q: %w", id, ErrUnknownOperation)
}
