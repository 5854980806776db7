package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/groundworkhq/groundwork/internal/api"
	"github.com/groundworkhq/groundwork/internal/audit"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/provider/kube"
	"github.com/groundworkhq/groundwork/internal/store"
)

// createdClusterSpaces is the register-space step of the cluster pipeline: a cluster Groundwork
// created becomes a space with the same cluster record a registered cluster has, except that
// no credential is stored (tokens are minted from the cloud account for each use).
type createdClusterSpaces struct{ st store.Store }

var _ kubernetes.SpaceRegistrar = createdClusterSpaces{}

// spaceIDFor derives the space's ID from the job, so a re-run finds the space it made.
func spaceIDFor(j *job.Job) string { return "spc_" + strings.TrimPrefix(j.ID, "job_") }

func (c createdClusterSpaces) RegisterSpace(ctx context.Context, j *job.Job, cl kubernetes.Cluster) (string, error) {
	id := spaceIDFor(j)
	if _, err := c.st.GetSpace(ctx, j.OrgID, id); err == nil {
		return id, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return "", fault.Transient(fmt.Errorf("read space %s: %w", id, err))
	}
	parent, err := c.st.GetSpace(ctx, j.OrgID, j.SpaceID)
	if err != nil {
		return "", fault.Transient(fmt.Errorf("read the job's space %s: %w", j.SpaceID, err))
	}
	ca, err := clusterCA(cl.CAData)
	if err != nil {
		return "", err
	}
	cfg, err := json.Marshal(map[string]any{"cluster": kube.SpaceCluster{
		Endpoint: cl.Endpoint, CAData: ca, Auth: kube.AuthCloudToken, ClusterName: cl.Name,
	}})
	if err != nil {
		return "", fault.System(err)
	}
	sp := &store.Space{ID: id, OrgID: j.OrgID, Name: cl.Name, Provider: parent.Provider, Region: parent.Region,
		SpaceType: "kubernetes", CloudAccountID: parent.CloudAccountID, Status: api.SpaceReady, Config: cfg,
		CreatedAt: time.Now()}
	e := audit.New(j.OrgID, audit.ScopeProvisioning, "space.register_cluster", "system:engine", "space", id,
		map[string]any{"jobID": j.ID, "cluster": cl.Name})
	e.CreatedAt = sp.CreatedAt
	if err := c.st.Audited(ctx, e, func(tx store.Store) error { return tx.CreateSpace(ctx, sp) }); err != nil {
		return "", fault.Transient(fmt.Errorf("create space %s: %w", id, err))
	}
	return id, nil
}

func (c createdClusterSpaces) UnregisterSpace(ctx context.Context, j *job.Job, spaceID string) error {
	e := audit.New(j.OrgID, audit.ScopeProvisioning, "space.delete", "system:engine", "space", spaceID,
		map[string]any{"jobID": j.ID})
	e.CreatedAt = time.Now()
	err := c.st.Audited(ctx, e, func(tx store.Store) error { return tx.DeleteSpace(ctx, j.OrgID, spaceID) })
	switch {
	case err == nil, errors.Is(err, store.ErrNotFound):
		return nil
	case errors.Is(err, store.ErrInUse):
		return fault.UserAction(err, "SpaceInUse",
			"delete the jobs in the cluster's space "+spaceID+" (its components) first, then retry the teardown", "")
	}
	return fault.Transient(fmt.Errorf("delete space %s: %w", spaceID, err))
}

// spaceToken mints a token for a cluster space that Groundwork created, from the space's cloud
// account.
func (a *awsParts) spaceToken(ctx context.Context, sp *store.Space, sc kube.SpaceCluster) (string, error) {
	o, err := a.resolve(ctx, &job.Job{OrgID: sp.OrgID, SpaceID: sp.ID, Provider: sp.Provider})
	if err != nil {
		return "", err
	}
	tok, _, err := o.p.ClusterToken(ctx, sc.ClusterName)
	return tok, err
}
