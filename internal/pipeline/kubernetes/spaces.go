package kubernetes

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/groundworkhq/groundwork/internal/audit"
	"github.com/groundworkhq/groundwork/internal/cluster"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/store"
)

// StoreSpaces is the register-space step of the cluster pipeline over the server's store: a cluster Groundwork
// created becomes a space with the same cluster record a registered cluster has, except that
// no credential is stored (tokens are minted from the cloud account for each use).
type StoreSpaces struct{ Store store.Store }

var _ SpaceRegistrar = StoreSpaces{}

// spaceIDFor derives the space's ID from the job, so a re-run finds the space it made.
func spaceIDFor(j *job.Job) string { return "spc_" + strings.TrimPrefix(j.ID, "job_") }

func (c StoreSpaces) RegisterSpace(ctx context.Context, j *job.Job, cl Cluster) (string, error) {
	id := spaceIDFor(j)
	if _, err := c.Store.GetSpace(ctx, j.OrgID, id); err == nil {
		return id, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return "", fault.Transient(fmt.Errorf("read space %s: %w", id, err))
	}
	parent, err := c.Store.GetSpace(ctx, j.OrgID, j.SpaceID)
	if err != nil {
		return "", fault.Transient(fmt.Errorf("read the job's space %s: %w", j.SpaceID, err))
	}
	ca, err := ClusterCA(cl.CAData)
	if err != nil {
		return "", err
	}
	cfg, err := json.Marshal(map[string]any{"cluster": cluster.SpaceCluster{
		Endpoint: cl.Endpoint, CAData: ca, Auth: cluster.AuthCloudToken, ClusterName: cl.Name,
	}})
	if err != nil {
		return "", fault.System(err)
	}
	sp := &store.Space{ID: id, OrgID: j.OrgID, Name: cl.Name, Provider: parent.Provider, Region: parent.Region,
		SpaceType: "kubernetes", CloudAccountID: parent.CloudAccountID, Status: cluster.SpaceReady, Config: cfg,
		CreatedAt: time.Now()}
	e := audit.New(j.OrgID, audit.ScopeProvisioning, "space.register_cluster", "system:engine", "space", id,
		map[string]any{"jobID": j.ID, "cluster": cl.Name})
	e.CreatedAt = sp.CreatedAt
	if err := c.Store.Audited(ctx, e, func(tx store.Tx) error { return tx.CreateSpace(ctx, sp) }); err != nil {
		return "", fault.Transient(fmt.Errorf("create space %s: %w", id, err))
	}
	return id, nil
}

func (c StoreSpaces) UnregisterSpace(ctx context.Context, j *job.Job, spaceID string) error {
	e := audit.New(j.OrgID, audit.ScopeProvisioning, "space.delete", "system:engine", "space", spaceID,
		map[string]any{"jobID": j.ID})
	e.CreatedAt = time.Now()
	err := c.Store.Audited(ctx, e, func(tx store.Tx) error { return tx.DeleteSpace(ctx, j.OrgID, spaceID) })
	switch {
	case err == nil, errors.Is(err, store.ErrNotFound):
		return nil
	case errors.Is(err, store.ErrInUse):
		return fault.UserAction(err, "SpaceInUse",
			"delete the jobs in the cluster's space "+spaceID+" (its components) first, then retry the teardown", "")
	}
	return fault.Transient(fmt.Errorf("delete space %s: %w", spaceID, err))
}

// ClusterCA accepts the CA as PEM or, as EKS and GKE return it, base64 of the PEM.
func ClusterCA(s string) ([]byte, error) {
	if strings.HasPrefix(strings.TrimSpace(s), "-----BEGIN") {
		return []byte(s), nil
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fault.System(fmt.Errorf("the cluster's CA is neither PEM nor base64 of PEM: %w", err))
	}
	return b, nil
}
