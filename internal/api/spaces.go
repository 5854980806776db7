package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/oklog/ulid/v2"

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
	if len(fields) > 0 {
		return badRequest("the space request is invalid", fields...)
	}
	if req.CloudAccountID != "" {
		acc, err := s.cfg.Store.GetCloudAccount(r.Context(), p.OrgID, req.CloudAccountID)
		if errors.Is(err, store.ErrNotFound) {
			return problem(http.StatusNotFound, "cloud account not found",
				FieldError{Field: "cloudAccountID", Rule: "exists", Message: "no cloud account " + req.CloudAccountID})
		}
		if err != nil {
			return err
		}
		if acc.Provider != req.Provider {
			return badRequest("provider mismatch", FieldError{Field: "cloudAccountID", Rule: "provider",
				Message: "the account is for " + acc.Provider + ", the space for " + req.Provider})
		}
	}
	sp := &store.Space{ID: "spc_" + ulid.Make().String(), OrgID: p.OrgID, Name: req.Name, Provider: req.Provider,
		Region: req.Region, SpaceType: req.SpaceType, CloudAccountID: req.CloudAccountID, Status: "ready",
		Config: req.Config, CreatedAt: s.cfg.Now()}
	if err := s.cfg.Store.CreateSpace(r.Context(), sp); err != nil {
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
	writeJSON(w, http.StatusOK, map[string]any{"data": list})
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
	if err := s.cfg.Store.DeleteSpace(r.Context(), p.OrgID, r.PathValue("id")); err != nil {
		return storeErr(err, "space")
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type createAccountRequest struct {
	Name            string          `json:"name"`
	Provider        string          `json:"provider"`
	Region          string          `json:"region"`
	AuthMethod      string          `json:"authMethod"`
	CredentialsRef  string          `json:"credentialsRef"`
	PermissionLevel string          `json:"permissionLevel"`
	Config          json.RawMessage `json:"config"`
}

func (s *Server) createAccount(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var req createAccountRequest
	if pr := decode(r, &req); pr != nil {
		return pr
	}
	var fields []FieldError
	if strings.TrimSpace(req.Name) == "" {
		fields = append(fields, FieldError{Field: "name", Rule: "required", Message: "is required"})
	}
	if !validProvider(req.Provider) {
		fields = append(fields, FieldError{Field: "provider", Rule: "enum", Message: "must be one of " + strings.Join(providers, ", ")})
	}
	if req.AuthMethod == "" {
		req.AuthMethod = "default"
	}
	if req.PermissionLevel == "" {
		req.PermissionLevel = "read_write"
	}
	if req.PermissionLevel != "read_write" && req.PermissionLevel != "read_only" {
		fields = append(fields, FieldError{Field: "permissionLevel", Rule: "enum", Message: "must be read_only or read_write"})
	}
	if len(fields) > 0 {
		return badRequest("the cloud account request is invalid", fields...)
	}
	a := &store.CloudAccount{ID: "acc_" + ulid.Make().String(), OrgID: p.OrgID, Name: req.Name, Provider: req.Provider,
		Region: req.Region, AuthMethod: req.AuthMethod, CredentialsRef: req.CredentialsRef,
		PermissionLevel: req.PermissionLevel, Config: req.Config, CreatedAt: s.cfg.Now()}
	if err := s.cfg.Store.CreateCloudAccount(r.Context(), a); err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, a)
	return nil
}

func (s *Server) listAccounts(w http.ResponseWriter, r *http.Request, p *Principal) error {
	list, err := s.cfg.Store.ListCloudAccounts(r.Context(), p.OrgID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": list})
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
		writeJSON(w, http.StatusOK, map[string]any{"data": []any{}})
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": s.cfg.Catalog.Types()})
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
