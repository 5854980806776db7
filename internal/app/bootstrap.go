package app

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/component"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/provider/kube"
)

// clusterBootstrap is the cluster pipeline's bootstrap-components step: it installs a new
// cluster's default components through the component family's own installer (the same
// catalog, values validation, Helm installer and job labels as install-component), with a
// token minted for the new cluster from the cloud account.
type clusterBootstrap struct {
	comp    *component.Pipeline
	connect component.Connector
	token   func(ctx context.Context, j *job.Job, cl kubernetes.Cluster) (string, error)
}

var _ kubernetes.ComponentInstaller = clusterBootstrap{}

func (b clusterBootstrap) Install(ctx context.Context, j *job.Job, cl kubernetes.Cluster, ids []string) error {
	ca, err := clusterCA(cl.CAData)
	if err != nil {
		return err
	}
	tok, err := b.token(ctx, j, cl)
	if err != nil {
		return fmt.Errorf("mint a token for cluster %s: %w", cl.Name, err)
	}
	in, _, err := b.connect(ctx, kube.Credentials{Endpoint: cl.Endpoint, CAData: ca, Token: tok})
	if err != nil {
		return err
	}
	_, err = b.comp.Bootstrap(ctx, in, j.ID, ids, nil)
	return err
}

// clusterCA accepts the CA as PEM or, as EKS and GKE return it, base64 of the PEM.
func clusterCA(s string) ([]byte, error) {
	if strings.HasPrefix(strings.TrimSpace(s), "-----BEGIN") {
		return []byte(s), nil
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fault.System(fmt.Errorf("the cluster's CA is neither PEM nor base64 of PEM: %w", err))
	}
	return b, nil
}
