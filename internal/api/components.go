package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/groundworkhq/groundwork/internal/audit"
	"github.com/groundworkhq/groundwork/internal/catalog/components"
	"github.com/groundworkhq/groundwork/internal/cluster"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/store"
)

// ComponentConfig turns on the Helm component catalog, install-component and the registration
// of existing Kubernetes clusters as spaces. Config.Secrets must be set: cluster credentials
// go there, and a space keeps only the reference.
type ComponentConfig struct {
	Catalog *components.Catalog
	// Clusters checks and registers the clusters of POST /api/spaces/register-cluster
	// (kube.Registrar in the server).
	Clusters ClusterRegistrar
}

// ClusterRegistrar checks a cluster's credentials and registers the cluster: it reaches the
// cluster once and keeps the credential in store under secretName.
type ClusterRegistrar interface {
	Validate(creds cluster.Credentials) error
	Register(ctx context.Context, store cluster.SecretPutter, secretName string, creds cluster.Credentials) (cluster.SpaceCluster, error)
}

func (s *Server) componentRoutes() []route {
	if s.cfg.Components == nil {
		return nil
	}
	return []route{
		{"GET", "/api/catalog/components", "catalog:view", s.listComponents},
		{"POST", "/api/provisioning-jobs/install-component", "service:create", s.installComponent},
		{"POST", "/api/spaces/register-cluster", "space:create", s.registerCluster},
	}
}

func (s *Server) listComponents(w http.ResponseWriter, r *http.Request, _ *Principal) error {
	s.cfg.Components.Catalog.ListHandler().ServeHTTP(w, r)
	return nil
}

// installComponentRequest is the reference's body plus the optional namespace and the job's
// name and tags (as on POST /api/provisioning-jobs).
type installComponentRequest struct {
	SpaceID     string            `json:"spaceID"`
	ComponentID string            `json:"componentID"`
	Values      map[string]any    `json:"values"`
	Namespace   string            `json:"namespace"`
	Name        string            `json:"name"`
	Tags        map[string]string `json:"tags"`
}

// SpaceClusterOf reads the cluster a space registered, if any. The space's config holds it
// under "cluster" (see registerCluster).
func SpaceClusterOf(sp *store.Space) (cluster.SpaceCluster, bool, error) {
	var cfg struct {
		Cluster *cluster.SpaceCluster `json:"cluster"`
	}
	if len(sp.Config) == 0 {
		return cluster.SpaceCluster{}, false, nil
	}
	if err := json.Unmarshal(sp.Config, &cfg); err != nil {
		return cluster.SpaceCluster{}, false, err
	}
	// A cluster is reachable with a stored credential, or, for one Groundwork created, with
	// tokens minted from its cloud account.
	if cfg.Cluster == nil || (cfg.Cluster.CredentialRef == "" && cfg.Cluster.Auth != cluster.AuthCloudToken) {
		return cluster.SpaceCluster{}, false, nil
	}
	return *cfg.Cluster, true, nil
}

// installComponent creates a job of the component family that installs the component into the
// space's cluster, or upgrades the release when an earlier job installed it (the release
// belongs to the space and component, not to the job; the newest job owns it and its DELETE
// uninstalls). Values are checked against the component's schema before anything is stored.
func (s *Server) installComponent(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var req installComponentRequest
	if pr := decode(r, &req); pr != nil {
		return pr
	}
	var fields []FieldError
	if req.SpaceID == "" {
		fields = append(fields, FieldError{Field: "spaceID", Rule: "required", Message: "is required"})
	}
	comp, ok := s.cfg.Components.Catalog.Get(req.ComponentID)
	switch {
	case req.ComponentID == "":
		fields = append(fields, FieldError{Field: "componentID", Rule: "required", Message: "is required; GET /api/catalog/components lists them"})
	case !ok:
		fields = append(fields, FieldError{Field: "componentID", Rule: "enum", Message: "no component " + req.ComponentID + " in the catalog"})
	default:
		if _, err := comp.Values(req.Values); err != nil {
			var ve *components.ValuesError
			if !errors.As(err, &ve) {
				return err
			}
			fields = append(fields, valuesFields(ve)...)
		}
	}
	if req.Namespace != "" {
		if msgs := validation.IsDNS1123Label(req.Namespace); len(msgs) > 0 {
			fields = append(fields, FieldError{Field: "namespace", Rule: "pattern", Message: strings.Join(msgs, "; ")})
		}
	}
	if len(fields) > 0 {
		return badRequest("the component request is invalid", fields...)
	}
	sp, err := s.cfg.Store.GetSpace(r.Context(), p.OrgID, req.SpaceID)
	if errors.Is(err, store.ErrNotFound) {
		return problem(http.StatusNotFound, "space not found",
			FieldError{Field: "spaceID", Rule: "exists", Message: "no space " + req.SpaceID + " in your organisation"})
	}
	if err != nil {
		return err
	}
	if p.Perms != nil && !p.Perms.OrgWide("service:create") {
		chain, err := newScopes(s.cfg.Store, p.OrgID).space(r.Context(), sp.ID)
		if err != nil {
			return err
		}
		if !p.Can("service:create", chain...) {
			return problem(http.StatusForbidden, "this needs the service:create permission on space "+sp.ID)
		}
	}
	if _, ok, err := SpaceClusterOf(sp); err != nil {
		return err
	} else if !ok {
		return badRequest("the space has no registered cluster",
			FieldError{Field: "spaceID", Rule: "cluster", Message: "register a cluster with POST /api/spaces/register-cluster first"})
	}
	config, err := json.Marshal(map[string]any{"componentID": req.ComponentID, "values": req.Values, "namespace": req.Namespace})
	if err != nil {
		return err
	}
	j, err := s.NewJob(r.Context(), p, &createJobRequest{SpaceID: sp.ID, Kind: string(job.FamilyComponent),
		Name: req.Name, Tags: req.Tags, Config: config})
	if err != nil {
		return err
	}
	var created *job.Job
	err = s.audited(r.Context(), p, entry(audit.ScopeProvisioning, "component.install", "provisioning-job", j.ID,
		map[string]any{"componentID": req.ComponentID, "spaceID": sp.ID, "namespace": req.Namespace}),
		func(tx store.Tx) (err error) {
			created, err = tx.CreateJob(r.Context(), &store.CreateJobParams{Job: j, Now: s.cfg.Now()})
			return err
		})
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/provisioning-jobs/"+created.ID)
	writeJSON(w, http.StatusCreated, created)
	return nil
}

// valuesFields names each wrong value as values.<dotted path>.
func valuesFields(ve *components.ValuesError) []FieldError {
	out := make([]FieldError, 0, len(ve.Errors))
	for _, fe := range ve.Errors {
		name := "values"
		if fe.Field != "" {
			name += "." + fe.Field
		}
		out = append(out, FieldError{Field: name, Rule: "schema", Message: fe.Message})
	}
	return out
}
