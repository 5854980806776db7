package kube

import (
	"context"
	"fmt"
	"strings"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/groundworkhq/groundwork/internal/fault"
)

// Ready reads every object of the release's latest revision once and computes its status
// with kstatus, the same rules Helm's --wait uses (generation observed, replicas available,
// conditions). It never blocks: the caller decides when to look again.
func (in *Installer) Ready(ctx context.Context, name, namespace string) (Readiness, error) {
	if _, err := in.cluster.Ping(ctx); err != nil {
		return Readiness{}, err
	}
	cfg, err := in.actionConfig(namespace)
	if err != nil {
		return Readiness{}, err
	}
	last, err := lastRelease(cfg, name)
	if err != nil {
		return Readiness{}, classify("read release history", err)
	}
	if last == nil {
		return Readiness{}, fault.System(fmt.Errorf("release %s/%s not found", namespace, name))
	}
	resources, err := cfg.KubeClient.Build(strings.NewReader(last.Manifest), false)
	if err != nil {
		return Readiness{}, classify("read release objects", err)
	}
	dyn, err := dynamic.NewForConfig(in.cluster.RESTConfig())
	if err != nil {
		return Readiness{}, fault.System(fmt.Errorf("dynamic client: %w", err))
	}
	var r Readiness
	for _, info := range resources {
		res := dyn.Resource(info.Mapping.Resource)
		var ri dynamic.ResourceInterface = res
		if info.Namespaced() {
			ri = res.Namespace(info.Namespace)
		}
		id := info.Mapping.GroupVersionKind.Kind + "/" + info.Name
		u, err := ri.Get(ctx, info.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			r.Pending = append(r.Pending, id+": not found")
			continue
		}
		if err != nil {
			return Readiness{}, classify("read "+id, err)
		}
		st, err := status.Compute(u)
		if err != nil {
			return Readiness{}, fault.System(fmt.Errorf("status of %s: %w", id, err))
		}
		switch st.Status {
		case status.CurrentStatus:
		case status.FailedStatus:
			r.Failed = append(r.Failed, id+": "+st.Message)
		default:
			r.Pending = append(r.Pending, id+": "+st.Message)
		}
	}
	r.Ready = len(r.Pending) == 0 && len(r.Failed) == 0
	return r, nil
}
