package api

import (
	"context"
	"errors"
	"fmt"
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
// or connections holds. The reference is resolved to its recorded owner first: a reference of
// another org, or one nothing names, is 404 whatever the caller may do. The value is read first and answered only once the reveal's audit entry (the
// reference, never the value) has committed: no value leaves without its entry, and a reveal
// that fails leaves none. The secret store is read outside any transaction because it may need
// the job store itself (Secrets Manager of the job's cloud account), which SQLite's one
// connection, held by a transaction, would never give it.
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
	value, jobID, err := s.readSecret(ctx, p, req.Ref)
	if err == nil {
		e := entry(audit.ScopeProvisioning, "secret.reveal", "secret", req.Ref, map[string]any{"jobID": jobID})
		err = s.audited(ctx, p, e, func(store.Tx) error { return nil })
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

// readSecret resolves ref to its owner, which must be a job of the caller's org that one of
// its databases or connections names, checks the caller may reveal it, and reads it as that job.
func (s *Server) readSecret(ctx context.Context, p *Principal, ref string) (value, jobID string, err error) {
	owner, err := s.cfg.Secrets.Owner(ctx, ref)
	if err != nil {
		return "", "", err
	}
	if owner.OrgID != p.OrgID || owner.Kind != secrets.OwnerJob {
		return "", "", fmt.Errorf("secret %s is not a datastore secret of %s: %w", ref, p.OrgID, secrets.ErrNotFound)
	}
	if jobID, err = s.cfg.Store.SecretJob(ctx, ref); err != nil {
		return "", "", err
	}
	if jobID != owner.ID {
		return "", "", fmt.Errorf("secret %s: %w", ref, secrets.ErrNotFound)
	}
	chain, err := newScopes(s.cfg.Store, p.OrgID).of(ctx, "provisioning", jobID)
	if err != nil {
		return "", "", err
	}
	if !p.Can("secret:reveal", append(chain, "secret:"+ref)...) {
		return "", "", problem(http.StatusForbidden, "this needs the secret:reveal permission on job "+jobID)
	}
	value, err = s.cfg.Secrets.For(owner).Get(ctx, ref)
	return value, jobID, err
}
