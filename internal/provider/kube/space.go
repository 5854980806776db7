package kube

import (
	"context"
	"errors"
	"fmt"

	"github.com/groundworkhq/groundwork/internal/fault"
)

// SpaceCluster is what a space stores about its cluster: where it is and a reference to the
// credential in the secret store, never the credential itself.
type SpaceCluster struct {
	Endpoint string `json:"endpoint,omitempty"`
	CAData   []byte `json:"caData,omitempty"`
	// CredentialRef is a secret-store reference to the bearer token, or to the whole
	// kubeconfig when Kubeconfig is true.
	CredentialRef string `json:"credentialRef"`
	Kubeconfig    bool   `json:"kubeconfig,omitempty"`
	ServerVersion string `json:"serverVersion,omitempty"`
	// Auth is AuthCloudToken for a cluster Groundwork created: no credential is stored, a token
	// is minted from the space's cloud account for each use. Empty means CredentialRef.
	Auth        string `json:"auth,omitempty"`
	ClusterName string `json:"clusterName,omitempty"`
}

// AuthCloudToken marks a cluster whose tokens are minted from its cloud account.
const AuthCloudToken = "cloud-token"

// SecretPutter stores a secret under a deterministic name (secrets.SecretStore).
type SecretPutter interface {
	Put(ctx context.Context, key, value string) (string, error)
}

// SecretGetter reads a secret by reference (secrets.SecretStore).
type SecretGetter interface {
	Get(ctx context.Context, ref string) (string, error)
}

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

// Credentials reads the stored credential back.
func (s SpaceCluster) Credentials(ctx context.Context, store SecretGetter) (Credentials, error) {
	if s.CredentialRef == "" {
		return Credentials{}, fault.UserAction(errors.New("space has no cluster credential"), "InvalidClusterCredentials", "register the cluster again", "")
	}
	v, err := store.Get(ctx, s.CredentialRef)
	if err != nil {
		return Credentials{}, fault.System(fmt.Errorf("read cluster credential: %w", err))
	}
	if s.Kubeconfig {
		return Credentials{Kubeconfig: []byte(v)}, nil
	}
	return Credentials{Endpoint: s.Endpoint, CAData: s.CAData, Token: v}, nil
}
