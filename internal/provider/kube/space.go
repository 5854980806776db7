package kube

import (
	"context"
	"fmt"

	"github.com/groundworkhq/groundwork/internal/cluster"
)

// The shapes kube implements; they live in package cluster so that the layers above the
// providers can speak them without importing client-go.
type (
	SpaceCluster  = cluster.SpaceCluster
	SecretPutter  = cluster.SecretPutter
	SecretGetter  = cluster.SecretGetter
	Credentials   = cluster.Credentials
	ChartSource   = cluster.ChartSource
	Release       = cluster.Release
	ReleaseStatus = cluster.ReleaseStatus
	Readiness     = cluster.Readiness
)

// AuthCloudToken marks a cluster whose tokens are minted from its cloud account.
const AuthCloudToken = cluster.AuthCloudToken

// Register checks that creds reach a cluster (a server-version call) and stores the credential
// under secretName, returning what the space keeps. Registering again under the same name
// replaces the stored credential, so a re-run or a re-registration leaves no orphans.
func Register(ctx context.Context, store SecretPutter, secretName string, creds Credentials) (SpaceCluster, error) {
	c, err := Connect(creds)
	if err != nil {
		return SpaceCluster{}, err
	}
	version, err := c.Ping(ctx)
	if err != nil {
		return SpaceCluster{}, err
	}
	sc := SpaceCluster{Endpoint: creds.Endpoint, CAData: creds.CAData, ServerVersion: version}
	secret := creds.Token
	if len(creds.Kubeconfig) > 0 {
		sc.Kubeconfig = true
		sc.Endpoint = c.rest.Host
		secret = string(creds.Kubeconfig)
	}
	ref, err := store.Put(ctx, secretName, secret)
	if err != nil {
		return SpaceCluster{}, fmt.Errorf("store cluster credential: %w", err)
	}
	sc.CredentialRef = ref
	return sc, nil
}

// Registrar checks and registers clusters for the API (api.ClusterRegistrar).
type Registrar struct{}

// Validate checks that creds are complete; errors name the field.
func (Registrar) Validate(creds Credentials) error { return ValidateCredentials(creds) }

// Register implements api.ClusterRegistrar (see Register).
func (Registrar) Register(ctx context.Context, store SecretPutter, secretName string, creds Credentials) (SpaceCluster, error) {
	return Register(ctx, store, secretName, creds)
}
