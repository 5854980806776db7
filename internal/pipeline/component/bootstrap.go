package component

import (
	"context"
	"fmt"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/provider/kube"
)

// Bootstrap installs the platform's default components into a cluster that a cluster job has
// just created (the bootstrap-components step), through the same catalog, values validation
// and installer as an install-component job. values holds per-component user values (dotted
// keys allowed). It is idempotent: a re-run leaves releases that already match untouched.
func (p *Pipeline) Bootstrap(ctx context.Context, in Installer, jobID string, ids []string, values map[string]map[string]any) ([]kube.ReleaseStatus, error) {
	out := make([]kube.ReleaseStatus, 0, len(ids))
	for _, id := range ids {
		comp, ok := p.o.Catalog.Get(id)
		if !ok {
			return out, fault.System(fmt.Errorf("bootstrap: component %q is not in the catalog", id))
		}
		vals, err := comp.Values(values[id])
		if err != nil {
			return out, fault.UserAction(err, kube.CodeInvalidValues, "fix the named values", "")
		}
		st, err := in.InstallOrUpgrade(ctx, kube.Release{
			Name: comp.ReleaseName, Namespace: comp.Namespace, Chart: p.chartSource(comp), Values: vals,
			Labels: map[string]string{kube.LabelJobID: jobID},
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
