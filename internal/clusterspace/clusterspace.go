// Package clusterspace reaches the cluster a space registered: it resolves the cluster and
// its credential for the component pipeline, and keeps every cluster space's status (ready or
// unreachable) current.
package clusterspace

import (
	"context"
	"errors"
	"fmt"

	"github.com/groundworkhq/groundwork/internal/api"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/provider/kube"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
)

// Secrets is the secret store seen per owner (secrets.Vault satisfies it): a cluster's
// credential belongs to the cluster's space.
type Secrets interface {
	For(owner secrets.Owner) secrets.SecretStore
}

// Spaces reads a space by ID, in any org when orgID is empty.
type Spaces interface {
	GetSpace(ctx context.Context, orgID, id string) (*store.Space, error)
}

// Minter mints a token for a cluster space whose credential is not stored (a cluster
// Groundwork created). Token is set once the cloud providers are wired, nil where none is; a
// nil *Minter mints nothing either.
type Minter struct {
	Token func(ctx context.Context, sp *store.Space, sc kube.SpaceCluster) (string, error)
}

// credentials returns how to reach sp's cluster: the stored credential, or a freshly minted
// token for a created cluster.
func (m *Minter) credentials(ctx context.Context, sec Secrets, sp *store.Space, sc kube.SpaceCluster) (kube.Credentials, error) {
	if sc.Auth != kube.AuthCloudToken {
		return sc.Credentials(ctx, sec.For(api.ClusterSecrets(sp.OrgID, sp.ID)))
	}
	if m == nil || m.Token == nil {
		return kube.Credentials{}, fault.UserAction(fmt.Errorf("space %s: no provider here can mint tokens for its cluster", sp.ID),
			"NoTokenMinter", "run Groundwork with the cloud provider that created this cluster", "")
	}
	tok, err := m.Token(ctx, sp, sc)
	if err != nil {
		return kube.Credentials{}, err
	}
	return kube.Credentials{Endpoint: sc.Endpoint, CAData: sc.CAData, Token: tok}, nil
}

// Resolver finds a space's registered cluster for the component pipeline. A job names its
// space by ID; the job already belongs to the space's org, so the lookup is install-wide.
type Resolver struct {
	Spaces  Spaces
	Secrets Secrets
	Mint    *Minter
}

// Cluster returns the cluster registered as space spaceID, with its faults classified: a
// missing space or cluster is the user's to fix, a store that does not answer is transient.
func (r Resolver) Cluster(ctx context.Context, spaceID string) (kube.SpaceCluster, error) {
	sp, err := r.Spaces.GetSpace(ctx, "", spaceID)
	if errors.Is(err, store.ErrNotFound) {
		return kube.SpaceCluster{}, fault.UserAction(fmt.Errorf("space %s not found", spaceID), "SpaceNotFound",
			"the space was deleted; register the cluster again and install into the new space", "")
	}
	if err != nil {
		// The store being briefly away is no reason to give the job up.
		return kube.SpaceCluster{}, fault.Transient(fmt.Errorf("read space %s: %w", spaceID, err))
	}
	sc, ok, err := api.SpaceClusterOf(sp)
	if err != nil {
		return kube.SpaceCluster{}, fault.System(fmt.Errorf("space %s config: %w", spaceID, err))
	}
	if !ok {
		return kube.SpaceCluster{}, fault.UserAction(fmt.Errorf("space %s has no registered cluster", spaceID), "SpaceHasNoCluster",
			"register a cluster with POST /api/spaces/register-cluster and install into that space", "")
	}
	if sc.Auth == kube.AuthCloudToken {
		// The installer reads credentials by reference: a minted, short-lived token is kept
		// under the space's name and replaced on every use.
		creds, err := r.Mint.credentials(ctx, r.Secrets, sp, sc)
		if err != nil {
			return kube.SpaceCluster{}, err
		}
		ref, err := r.Secrets.For(api.ClusterSecrets(sp.OrgID, sp.ID)).Put(ctx, api.ClusterSecretName(sp.ID)+"-minted", creds.Token)
		if err != nil {
			return kube.SpaceCluster{}, fault.Transient(fmt.Errorf("keep minted token: %w", err))
		}
		sc.CredentialRef, sc.Auth = ref, ""
	}
	return sc, nil
}
