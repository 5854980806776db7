// Package cluster holds the shapes a Kubernetes cluster is known by across layers — how to
// reach it, what a space keeps about it, a Helm release and its status — without any client.
// The API and the component pipeline speak these; provider/kube implements them with
// client-go and the Helm SDK.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/groundworkhq/groundwork/internal/fault"
)

// Credentials name a cluster and how to authenticate to it. Either Kubeconfig is set, or
// Endpoint and Token (with CAData unless the endpoint's certificate is publicly trusted).
type Credentials struct {
	Endpoint   string `json:"endpoint,omitempty"`
	CAData     []byte `json:"caData,omitempty"`
	Token      string `json:"token,omitempty"`
	Kubeconfig []byte `json:"kubeconfig,omitempty"`
	// Dial, when set, makes every connection to the API server (a registered cluster's
	// endpoint is the user's; netguard's policy checks the address dialled).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error) `json:"-"`
}

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

// Statuses of a space that holds a cluster: whether its API server answers.
const (
	SpaceReady       = "ready"
	SpaceUnreachable = "unreachable"
)

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

// LabelJobID ties a release, the objects its chart renders and the namespace Groundwork
// creates for it to the job that installed it.
const LabelJobID = "groundwork.io/job-id"

// CodeInvalidValues is the user_action code of values a chart refuses.
const CodeInvalidValues = "InvalidValues"

// ChartSource says where a chart comes from. Exactly one of Path, RepoURL (with Name) or OCI
// is set.
type ChartSource struct {
	// Path is a local chart directory or packaged .tgz (tests, air-gapped installs).
	Path string `json:"path,omitempty"`
	// RepoURL is an HTTP chart repository; Name is the chart in it.
	RepoURL string `json:"repoURL,omitempty"`
	Name    string `json:"name,omitempty"`
	// OCI is an oci:// chart reference.
	OCI string `json:"oci,omitempty"`
	// Version is the chart version (required for repositories, checked against local charts).
	Version string `json:"version,omitempty"`
}

// Release is what an installer's InstallOrUpgrade makes true.
type Release struct {
	Name      string
	Namespace string
	Chart     ChartSource
	// Values are the complete values (catalog defaults merged with the user's), nested.
	Values map[string]any
	// Labels go on the release record, on every object the chart renders and on the namespace
	// when Groundwork creates it. LabelJobID ties them to the job.
	Labels map[string]string
}

// ReleaseStatus describes a release as stored by Helm.
type ReleaseStatus struct {
	Name         string `json:"name"`
	Namespace    string `json:"namespace"`
	Revision     int    `json:"revision"`
	Status       string `json:"status"`
	Chart        string `json:"chart"`
	ChartVersion string `json:"chartVersion"`
	JobID        string `json:"jobID,omitempty"`
	// Changed is true when the call installed or upgraded; false when the release already
	// matched.
	Changed bool `json:"changed"`
}

// Readiness reports whether a release's objects have reached their desired state.
type Readiness struct {
	Ready bool `json:"ready"`
	// Pending lists "Kind/name: reason" for each object that is not ready yet.
	Pending []string `json:"pending,omitempty"`
	// Failed lists objects whose controllers report a failure (kstatus Failed).
	Failed []string `json:"failed,omitempty"`
}
