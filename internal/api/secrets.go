package api

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/groundworkhq/groundwork/internal/audit"
	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
)

type revealRequest struct {
	Ref string `json:"ref"`
}

type revealAnswer struct {
	Value string `json:"value"`
}

// revealSecret answers the value behind a reference that one of the caller's org's databases
// or connections holds. The secret store itself knows no orgs, so the reference is resolved to
// its job first: a reference of another org, or one nothing names, is 404 whatever the caller
// may do. The reveal is audited (the reference, never the value) in the transaction that
// resolved it, and the value is read once that has committed, so no value leaves without its
// entry on the record. Reading it outside the transaction matters: a secret store may need the
// job store itself (Secrets Manager of the job's cloud account), which SQLite's one connection,
// held by the transaction, would never give it.
func (s *Server) revealSecret(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var req revealRequest
	if pr := decode(r, &req); pr != nil {
		return pr
	}
	if !secrets.IsRef(req.Ref) {
		return badRequest("bad reference", FieldError{Field: "ref", Rule: "format", Message: "must be a secret reference such as local:sec_…"})
	}
	if s.cfg.Secrets == nil {
		return errors.New("secret reveal needs a secret store")
	}
	ctx := r.Context()
	var value string
	e := entry(audit.ScopeProvisioning, "secret.reveal", "secret", req.Ref, nil)
	err := s.audited(ctx, p, e, func(tx store.Store) error {
		recs, err := s.records(tx)
		if err != nil {
			return err
		}
		jobID, err := recs.SecretJob(ctx, req.Ref)
		if err != nil {
			return err
		}
		chain, err := newScopes(tx, p.OrgID).of(ctx, "provisioning", jobID)
		if err != nil {
			return err
		}
		if !p.Can("secret:reveal", append(chain, "secret:"+req.Ref)...) {
			return problem(http.StatusForbidden, "this needs the secret:reveal permission on job "+jobID)
		}
		e.Metadata, _ = json.Marshal(map[string]any{"jobID": jobID})
		return nil
	})
	if err == nil {
		value, err = s.cfg.Secrets.Get(ctx, req.Ref)
	}
	switch {
	case errors.Is(err, datastore.ErrNotFound), errors.Is(err, store.ErrNotFound), errors.Is(err, secrets.ErrNotFound):
		return problem(http.StatusNotFound, "secret not found", FieldError{Field: "ref", Rule: "exists", Message: "no secret " + req.Ref + " in your organisation"})
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusOK, revealAnswer{Value: value})
	return nil
}
