package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/oklog/ulid/v2"

	"github.com/groundworkhq/groundwork/internal/audit"
	"github.com/groundworkhq/groundwork/internal/cluster"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
)

// registerClusterRequest registers an existing cluster as a space. The credential is given
// once, either as a kubeconfig (text) or as endpoint, CA (PEM) and bearer token.
type registerClusterRequest struct {
	Name           string             `json:"name"`
	Provider       string             `json:"provider"`
	Region         string             `json:"region"`
	CloudAccountID string             `json:"cloudAccountID"`
	ClusterName    string             `json:"clusterName"`
	Cluster        clusterCredentials `json:"cluster"`
}

type clusterCredentials struct {
	Kubeconfig string `json:"kubeconfig"`
	Endpoint   string `json:"endpoint"`
	// CAData is the PEM bundle of the API server's CA (base64 of the PEM is accepted too, as
	// kubeconfigs carry it).
	CAData string `json:"caData"`
	Token  string `json:"token"`
}

func (c clusterCredentials) credentials() cluster.Credentials {
	ca := []byte(c.CAData)
	if c.CAData != "" && !strings.Contains(c.CAData, "-----BEGIN") {
		if b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(c.CAData)); err == nil {
			ca = b
		}
	}
	return cluster.Credentials{Kubeconfig: []byte(c.Kubeconfig), Endpoint: c.Endpoint, CAData: ca, Token: c.Token}
}

// spaceConfig is what a registered cluster's space keeps in its config: where the cluster is
// and a reference to its credential, never the credential.
type spaceConfig struct {
	ClusterName string               `json:"clusterName,omitempty"`
	Cluster     cluster.SpaceCluster `json:"cluster"`
}

// ClusterSecrets is the owner of the credential of the cluster registered as space spaceID.
func ClusterSecrets(orgID, spaceID string) secrets.Owner {
	return secrets.Owner{OrgID: orgID, Kind: secrets.OwnerCluster, ID: spaceID}
}

// ClusterSecretName is the secret-store name of a space's cluster credential. Registering the
// same space again replaces the value under the same name.
func ClusterSecretName(spaceID string) string { return "space-" + spaceID }

// registerCluster checks that the credential reaches the API server (a version call), stores
// it in the secret store and creates the space with status ready. The reachability checker
// keeps the status current afterwards.
func (s *Server) registerCluster(w http.ResponseWriter, r *http.Request, p *Principal) error {
	if s.cfg.Components.Clusters == nil {
		return errors.New("register cluster: the server has no cluster registrar")
	}
	var req registerClusterRequest
	if pr := decode(r, &req); pr != nil {
		return pr
	}
	if req.Provider == "" {
		req.Provider = "local"
	}
	if req.Region == "" && req.Provider == "local" {
		req.Region = "local"
	}
	var fields []FieldError
	if strings.TrimSpace(req.Name) == "" || len(req.Name) > 100 {
		fields = append(fields, FieldError{Field: "name", Rule: "required", Message: "is required, at most 100 characters"})
	}
	if !validProvider(req.Provider) {
		fields = append(fields, FieldError{Field: "provider", Rule: "enum", Message: "must be one of " + strings.Join(providers, ", ")})
	}
	if req.Region == "" {
		fields = append(fields, FieldError{Field: "region", Rule: "required", Message: "is required"})
	}
	creds := req.Cluster.credentials()
	creds.Dial = s.cfg.Outbound.DialContext
	if err := s.cfg.Components.Clusters.Validate(creds); err != nil {
		fields = append(fields, credentialField(err))
	}
	if len(fields) > 0 {
		return badRequest("the cluster registration is invalid", fields...)
	}
	if s.cfg.Secrets == nil {
		return errors.New("register cluster: the server has no secret store")
	}
	if err := s.checkSpaceAccount(r.Context(), p, req.CloudAccountID, req.Provider); err != nil {
		return err
	}
	id := "spc_" + ulid.Make().String()
	sc, err := s.cfg.Components.Clusters.Register(r.Context(), s.cfg.Secrets.For(ClusterSecrets(p.OrgID, id)), ClusterSecretName(id), creds)
	if err != nil {
		return registrationProblem(err)
	}
	cfg, err := json.Marshal(spaceConfig{ClusterName: req.ClusterName, Cluster: sc})
	if err != nil {
		return err
	}
	sp := &store.Space{ID: id, OrgID: p.OrgID, Name: req.Name, Provider: req.Provider, Region: req.Region,
		SpaceType: "kubernetes", CloudAccountID: req.CloudAccountID, Status: SpaceReady, Config: cfg, CreatedAt: s.cfg.Now()}
	err = s.audited(r.Context(), p, entry(audit.ScopeProvisioning, "space.register_cluster", "space", sp.ID,
		map[string]any{"name": sp.Name, "provider": sp.Provider, "region": sp.Region, "endpoint": sc.Endpoint,
			"serverVersion": sc.ServerVersion}),
		func(tx store.Tx) error { return tx.CreateSpace(r.Context(), sp) })
	if err != nil {
		// No space refers to the stored credential: take it back rather than leave it behind.
		if derr := s.cfg.Secrets.For(ClusterSecrets(p.OrgID, id)).Delete(context.WithoutCancel(r.Context()), sc.CredentialRef); derr != nil {
			s.log.Warn("could not remove the credential of a cluster registration that failed", "ref", sc.CredentialRef, "error", derr)
		}
		return err
	}
	w.Header().Set("Location", "/api/spaces/"+sp.ID)
	writeJSON(w, http.StatusCreated, sp)
	return nil
}

// Space statuses of a registered cluster.
const (
	SpaceReady       = cluster.SpaceReady
	SpaceUnreachable = cluster.SpaceUnreachable
)

// credentialField names the field a credential error is about; kube's messages start with it.
func credentialField(err error) FieldError {
	msg := err.Error()
	field := "cluster"
	if name, _, ok := strings.Cut(msg, ":"); ok {
		switch name {
		case "kubeconfig", "endpoint", "token":
			field = "cluster." + name
		}
	}
	return FieldError{Field: field, Rule: "credentials", Message: msg}
}

// registrationProblem turns a failed check of the cluster into an answer: credentials the
// cluster refuses are 400, a cluster that does not answer is 422 (nothing was stored either
// way); anything unclassified is ours.
func registrationProblem(err error) error {
	fe := fault.As(err)
	if fe == nil {
		return err
	}
	var pr *Problem
	switch {
	case fe.Code == "OutboundRefused":
		// Said without the remote's answer: there was none, and a refused address is not probed.
		pr = badRequest("the cluster's address is refused by the server's outbound policy",
			FieldError{Field: "cluster.endpoint", Rule: "outbound", Message: "link-local and metadata addresses are refused, and addresses outside the operator's allowlist"})
	case fe.Class == job.ClassUserAction:
		pr = badRequest("the cluster refused the credentials: "+err.Error(),
			FieldError{Field: "cluster", Rule: "credentials", Message: fe.Code})
	case fe.Class == job.ClassTransient:
		pr = problem(http.StatusUnprocessableEntity, "the cluster did not answer: "+err.Error(),
			FieldError{Field: "cluster.endpoint", Rule: "reachable", Message: fe.Code})
	default:
		return err
	}
	pr.FixHint = fe.FixHint
	if pr.FixHint == "" && fe.Class == job.ClassTransient {
		pr.FixHint = "check that the API server is up and reachable from the Groundwork server, then register again"
	}
	return pr
}
