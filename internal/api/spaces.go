package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/oklog/ulid/v2"

	"github.com/groundworkhq/groundwork/internal/audit"
	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/store"
)

var providers = []string{"aws", "gcp", "azure", "local"}

func validProvider(p string) bool {
	for _, x := range providers {
		if x == p {
			return true
		}
	}
	return false
}

type createSpaceRequest struct {
	Name           string          `json:"name"`
	Provider       string          `json:"provider"`
	Region         string          `json:"region"`
	SpaceType      string          `json:"spaceType"`
	CloudAccountID string          `json:"cloudAccountID"`
	Config         json.RawMessage `json:"config"`
}

func (s *Server) createSpace(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var req createSpaceRequest
	if pr := decode(r, &req); pr != nil {
		return pr
	}
	var fields []FieldError
	if strings.TrimSpace(req.Name) == "" || len(req.Name) > 100 {
		fields = append(fields, FieldError{Field: "name", Rule: "required", Message: "is required, at most 100 characters"})
	}
	if !validProvider(req.Provider) {
		fields = append(fields, FieldError{Field: "provider", Rule: "enum", Message: "must be one of " + strings.Join(providers, ", ")})
	}
	if req.Region == "" {
		fields = append(fields, FieldError{Field: "region", Rule: "required", Message: "is required (\"local\" for the local provider)"})
	}
	if req.Provider != "local" && req.Provider != "" && req.CloudAccountID == "" {
		fields = append(fields, FieldError{Field: "cloudAccountID", Rule: "required", Message: "a " + req.Provider + " space needs a cloud account"})
	}
	if req.SpaceType == "" {
		req.SpaceType = "kubernetes"
	}
	fields = append(fields, inspectIntervalFields(req.Config)...)
	if len(fields) > 0 {
		return badRequest("the space request is invalid", fields...)
	}
	if err := s.checkSpaceAccount(r.Context(), p, req.CloudAccountID, req.Provider); err != nil {
		return err
	}
	sp := &store.Space{ID: "spc_" + ulid.Make().String(), OrgID: p.OrgID, Name: req.Name, Provider: req.Provider,
		Region: req.Region, SpaceType: req.SpaceType, CloudAccountID: req.CloudAccountID, Status: "ready",
		Config: req.Config, CreatedAt: s.cfg.Now()}
	err := s.audited(r.Context(), p, entry(audit.ScopeProvisioning, "space.create", "space", sp.ID,
		map[string]any{"name": sp.Name, "provider": sp.Provider, "region": sp.Region, "cloudAccountID": sp.CloudAccountID}),
		func(tx store.Tx) error { return tx.CreateSpace(r.Context(), sp) })
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/spaces/"+sp.ID)
	writeJSON(w, http.StatusCreated, sp)
	return nil
}

func (s *Server) listSpaces(w http.ResponseWriter, r *http.Request, p *Principal) error {
	list, err := s.cfg.Store.ListSpaces(r.Context(), p.OrgID)
	if err != nil {
		return err
	}
	if p.Perms != nil && !p.Perms.OrgWide("space:view") {
		sc := newScopes(s.cfg.Store, p.OrgID)
		visible := []*store.Space{}
		for _, sp := range list {
			chain, err := sc.space(r.Context(), sp.ID)
			if err != nil {
				return err
			}
			if p.Can("space:view", chain...) {
				visible = append(visible, sp)
			}
		}
		list = visible
	}
	writeJSON(w, http.StatusOK, spaceList{Data: list})
	return nil
}

func (s *Server) getSpace(w http.ResponseWriter, r *http.Request, p *Principal) error {
	sp, err := s.cfg.Store.GetSpace(r.Context(), p.OrgID, r.PathValue("id"))
	if err != nil {
		return storeErr(err, "space")
	}
	writeJSON(w, http.StatusOK, sp)
	return nil
}

func (s *Server) deleteSpace(w http.ResponseWriter, r *http.Request, p *Principal) error {
	id := r.PathValue("id")
	sp, err := s.cfg.Store.GetSpace(r.Context(), p.OrgID, id)
	if err != nil {
		return storeErr(err, "space")
	}
	err = s.audited(r.Context(), p, entry(audit.ScopeProvisioning, "space.delete", "space", id, nil),
		func(tx store.Tx) error { return tx.DeleteSpace(r.Context(), p.OrgID, id) })
	if err != nil {
		return storeErr(err, "space")
	}
	// A registered cluster's credential lives in the secret store; with the space gone nothing
	// may use it, so it goes too. A failure here leaves an orphan secret, not a broken space.
	if cl, ok, cerr := SpaceClusterOf(sp); cerr == nil && ok && cl.CredentialRef != "" && s.cfg.Secrets != nil {
		if derr := s.cfg.Secrets.For(ClusterSecrets(sp.OrgID, sp.ID)).Delete(r.Context(), cl.CredentialRef); derr != nil {
			s.log.Warn("could not delete a deleted space's cluster credential", "space", id, "error", derr)
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listAccounts(w http.ResponseWriter, r *http.Request, p *Principal) error {
	list, err := s.cfg.Store.ListCloudAccounts(r.Context(), p.OrgID)
	if err != nil {
		return err
	}
	visible := []*store.CloudAccount{}
	for _, a := range list {
		if p.Can("cloud-account:view", "cloud-account:"+a.ID) {
			visible = append(visible, a)
		}
	}
	list = visible
	writeJSON(w, http.StatusOK, accountList{Data: list})
	return nil
}

func (s *Server) getAccount(w http.ResponseWriter, r *http.Request, p *Principal) error {
	a, err := s.cfg.Store.GetCloudAccount(r.Context(), p.OrgID, r.PathValue("id"))
	if err != nil {
		return storeErr(err, "cloud account")
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

func (s *Server) listTypes(w http.ResponseWriter, r *http.Request, p *Principal) error {
	if s.cfg.Catalog == nil {
		writeJSON(w, http.StatusOK, typeList{Data: []catalog.Type{}})
		return nil
	}
	writeJSON(w, http.StatusOK, typeList{Data: s.cfg.Catalog.Types()})
	return nil
}

func (s *Server) getType(w http.ResponseWriter, r *http.Request, p *Principal) error {
	pair := catalog.Pair{Kind: catalog.Category(r.PathValue("category")), Type: r.PathValue("type")}
	if s.cfg.Catalog == nil {
		return notFound("type " + pair.String())
	}
	t, ok := s.cfg.Catalog.Get(pair)
	if !ok {
		return notFound("type " + pair.String())
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

// checkSpaceAccount checks that a space's cloud account, when it names one, is the caller's
// org's (404 otherwise, as for any other org's object) and is for the space's provider.
func (s *Server) checkSpaceAccount(ctx context.Context, p *Principal, accountID, provider string) error {
	if accountID == "" {
		return nil
	}
	acc, err := s.cfg.Store.GetCloudAccount(ctx, p.OrgID, accountID)
	if errors.Is(err, store.ErrNotFound) {
		return problem(http.StatusNotFound, "cloud account not found",
			FieldError{Field: "cloudAccountID", Rule: "exists", Message: "no cloud account " + accountID})
	}
	if err != nil {
		return err
	}
	if acc.Provider != provider {
		return badRequest("provider mismatch", FieldError{Field: "cloudAccountID", Rule: "provider",
			Message: "the account is for " + acc.Provider + ", the space for " + provider})
	}
	return nil
}
