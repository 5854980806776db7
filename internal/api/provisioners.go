package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/groundworkhq/groundwork/internal/audit"
	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/protocol"
	"github.com/groundworkhq/groundwork/internal/store"
)

// Provisioners is the provisioner registry the /api/provisioners routes manage, per
// organisation; *protocol.Registry satisfies it.
type Provisioners interface {
	List(ctx context.Context, orgID string) ([]protocol.Provisioner, error)
	Get(ctx context.Context, orgID, id string) (protocol.Provisioner, error)
	RegisterWithin(ctx context.Context, orgID string, in protocol.RegisterInput, within func(p protocol.Provisioner, insert func(protocol.ProvisionerStore) error) error) (protocol.Provisioner, error)
	RemoveWithin(ctx context.Context, orgID, id string, within func(del func(protocol.ProvisionerStore) error) error) error
}

type provisionerList struct {
	Data []protocol.Provisioner `json:"data"`
}

func (s *Server) provisioners() (Provisioners, error) {
	if s.cfg.Provisioners == nil {
		return nil, problem(http.StatusNotFound, "this server has no provisioner registry")
	}
	return s.cfg.Provisioners, nil
}

func (s *Server) createProvisioner(w http.ResponseWriter, r *http.Request, pr *Principal) error {
	reg, err := s.provisioners()
	if err != nil {
		return err
	}
	var in protocol.RegisterInput
	if pr := decode(r, &in); pr != nil {
		return pr
	}
	// The registration and its audit entry commit together; the remote is checked before.
	p, err := reg.RegisterWithin(r.Context(), pr.OrgID, in, func(p protocol.Provisioner, insert func(protocol.ProvisionerStore) error) error {
		meta := map[string]any{"name": p.Name, "url": p.URL, "pairs": p.Pairs}
		return s.audited(r.Context(), pr, entry(audit.ScopePlatform, "provisioner.register", "provisioner", p.ID, meta),
			func(tx store.Tx) error { return insert(tx) })
	})
	if err != nil {
		return registryErr(err)
	}
	w.Header().Set("Location", "/api/provisioners/"+p.ID)
	writeJSON(w, http.StatusCreated, p)
	return nil
}

func (s *Server) listProvisioners(w http.ResponseWriter, r *http.Request, pr *Principal) error {
	reg, err := s.provisioners()
	if err != nil {
		return err
	}
	ps, err := reg.List(r.Context(), pr.OrgID)
	if err != nil {
		return err
	}
	if ps == nil {
		ps = []protocol.Provisioner{}
	}
	writeJSON(w, http.StatusOK, provisionerList{Data: ps})
	return nil
}

func (s *Server) getProvisioner(w http.ResponseWriter, r *http.Request, pr *Principal) error {
	reg, err := s.provisioners()
	if err != nil {
		return err
	}
	p, err := reg.Get(r.Context(), pr.OrgID, r.PathValue("id"))
	if err != nil {
		return registryErr(err)
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

func (s *Server) deleteProvisioner(w http.ResponseWriter, r *http.Request, pr *Principal) error {
	reg, err := s.provisioners()
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	force, err := forceParam(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	p, err := reg.Get(ctx, pr.OrgID, id)
	if err != nil {
		return registryErr(err)
	}
	live, err := s.liveJobsOf(ctx, pr.OrgID, p)
	if err != nil {
		return err
	}
	if len(live) > 0 && !force {
		// Without its provisioner, the teardown of these jobs has nobody to call.
		shown := live
		if len(shown) > 20 {
			shown = shown[:20]
		}
		pb := problem(http.StatusConflict, fmt.Sprintf("provisioner %s has %d live jobs: %s; tear them down first, or remove with ?force=true",
			id, len(live), strings.Join(shown, ", ")))
		pb.FixHint = "delete the jobs (DELETE /api/provisioning-jobs/{id}) and remove the provisioner once they are deleted; force leaves them unable to tear down"
		return pb
	}
	meta := map[string]any{}
	if len(live) > 0 {
		meta["forced"], meta["liveJobs"] = true, live
	}
	err = reg.RemoveWithin(ctx, pr.OrgID, id, func(del func(protocol.ProvisionerStore) error) error {
		return s.audited(ctx, pr, entry(audit.ScopePlatform, "provisioner.remove", "provisioner", id, meta),
			func(tx store.Tx) error { return del(tx) })
	})
	if err != nil {
		return registryErr(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// forceParam reads the optional force=true|false query parameter.
func forceParam(r *http.Request) (bool, error) {
	v := r.URL.Query().Get("force")
	if v == "" {
		return false, nil
	}
	force, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest("bad force", FieldError{Field: "force", Rule: "type", Message: "must be true or false"})
	}
	return force, nil
}

// liveJobsOf lists the jobs of org, on one of p's pairs, that are not yet gone (deleted or
// cancelled): their teardown still needs p.
func (s *Server) liveJobsOf(ctx context.Context, org string, p protocol.Provisioner) ([]string, error) {
	var ids []string
	for _, pair := range p.Pairs {
		params := &store.ListJobsParams{OrgID: org, Family: catalog.FamilyForPair(pair), Limit: 200}
		for {
			page, err := s.cfg.Store.ListJobs(ctx, params)
			if err != nil {
				return nil, err
			}
			for _, j := range page.Jobs {
				if !j.Status.Terminal() {
					ids = append(ids, j.ID)
				}
			}
			if page.Next == "" {
				break
			}
			params.After = page.Next
		}
	}
	return ids, nil
}

// registryErr turns the registry's refusals into problems; the status comes from
// protocol.HTTPStatus so that the API and the registry's own documentation agree.
func registryErr(err error) error {
	var (
		ce *protocol.PairConflictError
		ie *protocol.InvalidRegistrationError
		ue *protocol.UnreachableError
	)
	status := protocol.HTTPStatus(err)
	switch {
	case errors.As(err, &ce):
		return problem(status, ce.Error(), FieldError{Field: "pairs", Rule: "unique",
			Message: fmt.Sprintf("%s is held by provisioner %q (%s)", ce.Pair, ce.HolderName, ce.HolderID)})
	case errors.As(err, &ie):
		fields := make([]FieldError, len(ie.Fields))
		for i, f := range ie.Fields {
			fields[i] = FieldError{Field: f.Field, Rule: f.Rule, Message: f.Message}
		}
		return problem(status, "the registration is invalid", fields...)
	case errors.As(err, &ue):
		return problem(status, ue.Error(), FieldError{Field: "url", Rule: "reachable",
			Message: "must answer GET healthz with status ok, listing the pairs being registered"})
	case errors.Is(err, protocol.ErrBuiltIn):
		return problem(status, err.Error())
	case errors.Is(err, protocol.ErrProvisionerNotFound):
		return notFound("provisioner")
	}
	return err
}

// SpaceHeader names the space a provisioner-protocol call on Groundwork works in: the protocol
// names a pair and an application, and Groundwork also needs to know where to provision.
const SpaceHeader = "Groundwork-Space"

type protocolCallKey struct{}

// ProtocolCall is who makes a provisioner-protocol call on Groundwork, and in which space.
type ProtocolCall struct {
	Principal *Principal
	SpaceID   string
}

// ProtocolCallFrom returns the call that ProtocolAuth admitted.
func ProtocolCallFrom(ctx context.Context) (ProtocolCall, bool) {
	c, ok := ctx.Value(protocolCallKey{}).(ProtocolCall)
	return c, ok
}

// protocolPolicy is the policy a provisioner-protocol call needs: an apply creates (or tears
// down) a job, the other calls only read.
func protocolPolicy(r *http.Request) string {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/apply") {
		return "provisioning:create"
	}
	return "provisioning:view"
}

// ProtocolAuth guards Groundwork's own provisioner-protocol server (mounted at /provisioner/)
// with the API's tokens and policies: an apply creates jobs, so it may not be anonymous. plan,
// apply and inspect must name their space in the Groundwork-Space header; GET healthz is open,
// as registration checks of other provisioners expect.
func (s *Server) ProtocolAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/healthz") {
			next.ServeHTTP(w, r)
			return
		}
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
		if err != nil {
			s.log.Error("provisioner call: authentication failed", "path", r.URL.Path, "error", err)
			writeProblem(w, r, problem(http.StatusInternalServerError, "internal error; the server log has details"))
			return
		}
		policy := protocolPolicy(r)
		if err := s.cfg.Authorizer.Authorize(r.Context(), p, policy); err != nil {
			writeProblem(w, r, problem(http.StatusForbidden, "this needs the "+policy+" permission"))
			return
		}
		call := ProtocolCall{Principal: p, SpaceID: strings.TrimSpace(r.Header.Get(SpaceHeader))}
		if r.Method == http.MethodPost && call.SpaceID == "" {
			writeProblem(w, r, badRequest("name the space to work in with the "+SpaceHeader+" header",
				FieldError{Field: SpaceHeader, Rule: "required", Message: "is required"}))
			return
		}
		if err := s.authorizeProtocolObject(r, p, policy, call.SpaceID); err != nil {
			var pr *Problem
			if !errors.As(err, &pr) {
				s.log.Error("provisioner call: authorisation failed", "path", r.URL.Path, "error", err)
				pr = problem(http.StatusInternalServerError, "internal error; the server log has details")
			}
			writeProblem(w, r, pr)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), protocolCallKey{}, call)))
	})
}

// authorizeProtocolObject checks a principal whose grant of policy is narrower than the org
// against what the call touches: the space it names, or the job behind an operation id. A
// space or job of another org answers 404, as on the API's own routes.
func (s *Server) authorizeProtocolObject(r *http.Request, p *Principal, policy, spaceID string) error {
	if p.Perms == nil || p.Perms.OrgWide(policy) {
		return nil
	}
	res, id := "space", spaceID
	if i := strings.LastIndex(r.URL.Path, "/operations/"); r.Method == http.MethodGet && i >= 0 {
		res, id = "provisioning", r.URL.Path[i+len("/operations/"):]
	}
	if id == "" {
		return problem(http.StatusForbidden, "this needs the "+policy+" permission")
	}
	chain, err := newScopes(s.cfg.Store, p.OrgID).of(r.Context(), res, id)
	if errors.Is(err, store.ErrNotFound) && res == "provisioning" {
		return problem(http.StatusNotFound, "unknown operation "+id)
	}
	if err != nil {
		return storeErr(err, res)
	}
	if !p.Perms.Allows(policy, chain...) {
		return problem(http.StatusForbidden, "this needs the "+policy+" permission on "+res+" "+id)
	}
	return nil
}

// AuditedJobChange runs fn, a change to job jobID made on behalf of p outside the jobs API
// (the provisioner protocol), in one transaction with its audit entry, as the jobs API records
// its own changes. action is e.g. "provisioning-job.create".
func (s *Server) AuditedJobChange(ctx context.Context, p *Principal, action, jobID string, meta map[string]any, fn func(tx store.Tx) error) error {
	return s.audited(ctx, p, entry(audit.ScopeProvisioning, action, "provisioning-job", jobID, meta), fn)
}

// PrepareJob validates a job and lays it out, without storing it, exactly as
// POST /api/provisioning-jobs would: the provisioner protocol creates its jobs through it. A
// refusal is a *Problem naming the fields.
func (s *Server) PrepareJob(ctx context.Context, p *Principal, spaceID string, family job.Family, name string, config json.RawMessage) (*job.Job, error) {
	return s.NewJob(ctx, p, &createJobRequest{SpaceID: spaceID, Kind: string(family), Name: name, Config: config})
}
