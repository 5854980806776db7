package component

import (
	"context"
	"fmt"

	"github.com/groundworkhq/groundwork/internal/cluster"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
)

// Bootstrap installs the platform's default components into a cluster that a cluster job has
// just created (the bootstrap-components step), through the same catalog, values validation
// and installer as an install-component job. values holds per-component user values (dotted
// keys allowed). It is idempotent: a re-run leaves releases that already match untouched.
func (p *Pipeline) Bootstrap(ctx context.Context, in Installer, jobID string, ids []string, values map[string]map[string]any) ([]cluster.ReleaseStatus, error) {
	out := make([]cluster.ReleaseStatus, 0, len(ids))
	for _, id := range ids {
		comp, ok := p.o.Catalog.Get(id)
		if !ok {
			return out, fault.System(fmt.Errorf("bootstrap: component %q is not in the catalog", id))
		}
		vals, err := comp.Values(values[id])
		if err != nil {
			return out, fault.UserAction(err, cluster.CodeInvalidValues, "fix the named values", "")
		}
		st, err := in.InstallOrUpgrade(ctx, cluster.Release{
			Name: comp.ReleaseName, Namespace: comp.Namespace, Chart: p.chartSource(comp), Values: vals,
			Labels: map[string]string{cluster.LabelJobID: jobID},
		})
		if err != nil {
			return out, fmt.Errorf("bootstrap %s: %w", id, err)
		}
		out = append(out, st)
	}
	return out, nil
}

// Teardown uninstalls what Bootstrap installed for jobID, in reverse order.
func (p *Pipeline) Teardown(ctx context.Context, in Installer, jobID string, ids []string) error {
	for i := len(ids) - 1; i >= 0; i-- {
		comp, ok := p.o.Catalog.Get(ids[i])
		if !ok {
			continue
		}
		if _, err := in.Uninstall(ctx, comp.ReleaseName, comp.Namespace, jobID); err != nil {
			return fmt.Errorf("teardown %s: %w", ids[i], err)
		}
	}
	return nil
}

// ClusterBootstrap is the cluster pipeline's bootstrap-components step: it installs a new
// cluster's default components through the component family's own installer (the same
// catalog, values validation, Helm installer and job labels as install-component), with a
// token minted for the new cluster from the cloud account.
type ClusterBootstrap struct {
	Components *Pipeline
	Connect    Connector
	// Token mints a token for the new cluster from its cloud account.
	Token func(ctx context.Context, j *job.Job, cl kubernetes.Cluster) (string, error)
}

var _ kubernetes.ComponentInstaller = ClusterBootstrap{}

func (b ClusterBootstrap) Install(ctx context.Context, j *job.Job, cl kubernetes.Cluster, ids []string) error {
	ca, err := kubernetes.ClusterCA(cl.CAData)
	if err != nil {
		return err
	}
	tok, err := b.Token(ctx, j, cl)
	if err != nil {
		return fmt.Errorf("mint a token for cluster %s: %w", cl.Name, err)
	}
	in, _, err := b.Connect(ctx, cluster.Credentials{Endpoint: cl.Endpoint, CAData: ca, Token: tok})
	if err != nil {
		return err
	}
	_, err = b.Components.Bootstrap(ctx, in, j.ID, ids, nil)
	return err
}
