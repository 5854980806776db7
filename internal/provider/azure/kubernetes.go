package azure

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
	"sigs.k8s.io/yaml"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
)

// AKSServerScope is the scope of a token for an AKS cluster's API server: the AKS AAD
// server application, the same for every Entra ID-integrated cluster.
const AKSServerScope = "6dae42f8-4368-4678-94ff-3960e28e3630/.default"

// Address blocks of the cluster's overlay: pods and services get addresses outside the
// VNet (10.0.0.0/16 by default), so the nodes' subnet holds nodes only.
const (
	podCIDR      = "192.168.0.0/16"
	serviceCIDR  = "172.16.0.0/16"
	dnsServiceIP = "172.16.0.10"
)

// KubernetesDriver makes a job's AKS cluster: its own VNet (as the network family's), a
// user-assigned managed identity for the control plane with Network Contributor on the
// nodes' subnet, and the managed cluster with Azure CNI (overlay) on that subnet, Entra ID
// and Azure RBAC for the API server, the OIDC issuer and workload identity, a system node
// pool from the first node group and a user pool for each further one.
type KubernetesDriver struct{ C *Client }

var _ kubernetes.Driver = KubernetesDriver{}

// KubernetesDriver implements provider.KubernetesDrivers.
func (m *Module) KubernetesDriver(ctx context.Context, j *job.Job) (kubernetes.Driver, error) {
	c, err := m.Client(ctx, j)
	if err != nil {
		return nil, err
	}
	return KubernetesDriver{C: c}, nil
}

// ClusterToken implements provider.KubernetesDrivers: a token of the space's cloud account
// for the AKS server application, which every Entra ID-integrated AKS API server accepts (it
// authorizes the account's principal by its Azure RBAC roles on the cluster).
func (m *Module) ClusterToken(ctx context.Context, orgID, spaceID, _ string) (string, error) {
	c, err := m.ClientFor(ctx, orgID, spaceID)
	if err != nil {
		return "", err
	}
	return c.ClusterToken(ctx)
}

// ClusterToken is a bearer token for AKS API servers from the account's credential.
func (c *Client) ClusterToken(ctx context.Context) (string, error) {
	tok, err := c.cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{AKSServerScope}})
	if err != nil {
		return "", c.Classify(fmt.Errorf("token for AKS: %w", err))
	}
	return tok.Token, nil
}

// EnsureNetwork implements kubernetes.Driver: the job's own VNet with its NAT gateway (the
// nodes' egress), or the adopted one named by vpcID. SubnetIDs are the nodes' subnets.
func (d KubernetesDriver) EnsureNetwork(ctx context.Context, j *job.Job, cfg kubernetes.Config) (kubernetes.Network, error) {
	if cfg.VPCID != "" {
		r, err := NetworkDriver(d).adopt(ctx, network.Config{VPCID: cfg.VPCID, SubnetIDs: cfg.SubnetIDs})
		if err != nil {
			return kubernetes.Network{}, err
		}
		subnets := cfg.SubnetIDs
		if len(subnets) == 0 {
			have, _ := r.Data["subnets"].(map[string]string)
			subnets = pickSubnet(have)
		}
		if len(subnets) == 0 {
			return kubernetes.Network{}, fault.UserAction(fmt.Errorf("virtual network %s has no subnet", cfg.VPCID), "NoSubnet",
				"The adopted virtual network needs a subnet for the nodes; add one or name it in subnetIDs.", d.C.PortalURL(cfg.VPCID))
		}
		return kubernetes.Network{VPCID: r.VPCID, SubnetIDs: subnets, Ready: true, Data: map[string]any{"adopted": true}}, nil
	}
	n, ops, ready, err := d.C.EnsureVNet(ctx, j, kubernetes.InfraNetwork, VNetRequest{NAT: true})
	out := kubernetes.Network{VPCID: n.VNetID, Ready: ready, Data: map[string]any{"ops": ops, "resourceGroup": n.ResourceGroup, "natGatewayID": n.NATGatewayID}}
	if ready {
		out.SubnetIDs = []string{n.Subnets[SubnetPrivate]}
	}
	return out, err
}

// pickSubnet chooses the nodes' subnet of an adopted network: one named private, else the
// first by name.
func pickSubnet(subnets map[string]string) []string {
	names := make([]string, 0, len(subnets))
	for n := range subnets {
		if strings.EqualFold(n, SubnetPrivate) {
			return []string{subnets[n]}
		}
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil
	}
	return []string{subnets[names[0]]}
}

// DeleteNetwork implements kubernetes.Driver: the job's own VNet; an adopted one is not the
// job's and is never found under the job's names.
func (d KubernetesDriver) DeleteNetwork(ctx context.Context, j *job.Job) (bool, error) {
	return d.C.DeleteVNet(ctx, j)
}

// pool is a node group as an AKS agent pool.
type pool struct {
	name   string
	system bool
	ng     kubernetes.NodeGroup
}

// pools maps node groups to agent pools: the first is the system pool. AKS names a Linux
// pool with 1 to 12 lower-case letters and digits, starting with a letter; names that clash
// once shortened get their index.
func pools(groups []kubernetes.NodeGroup) []pool {
	out := make([]pool, 0, len(groups))
	seen := map[string]bool{}
	for i, ng := range groups {
		n := notAlnum.ReplaceAllString(strings.ToLower(ng.Name), "")
		if n == "" || n[0] < 'a' || n[0] > 'z' {
			n = "np" + n
		}
		if len(n) > 12 {
			n = n[:12]
		}
		if seen[n] {
			suffix := fmt.Sprint(i)
			n = n[:min(len(n), 12-len(suffix))] + suffix
		}
		seen[n] = true
		out = append(out, pool{name: n, system: i == 0, ng: ng})
	}
	return out
}

// sizes are an agent pool's node counts: autoscaled between min and max when they differ,
// else a fixed count. A system pool keeps at least one node, as AKS requires.
func (p pool) sizes() (count int32, auto bool, lo, hi *int32) {
	minN, maxN := p.ng.Min, p.ng.Max
	if p.system && minN < 1 {
		minN = 1
	}
	if minN >= maxN {
		return maxN, false, nil, nil
	}
	return minN, true, to.Ptr(minN), to.Ptr(maxN)
}

func (p pool) profile(j *job.Job, version, subnet string) armcontainerservice.ManagedClusterAgentPoolProfile {
	count, auto, lo, hi := p.sizes()
	prof := armcontainerservice.ManagedClusterAgentPoolProfile{Name: to.Ptr(p.name), Mode: to.Ptr(p.mode()), VMSize: to.Ptr(p.ng.InstanceType),
		Count: to.Ptr(count), EnableAutoScaling: to.Ptr(auto), MinCount: lo, MaxCount: hi, VnetSubnetID: to.Ptr(subnet),
		OSType: to.Ptr(armcontainerservice.OSTypeLinux), Type: to.Ptr(armcontainerservice.AgentPoolTypeVirtualMachineScaleSets),
		Tags: tags(j, "pool-"+p.name)}
	if version != "" {
		prof.OrchestratorVersion = to.Ptr(version)
	}
	return prof
}

// mode is the pool's AKS mode: the first node group's pool is the System pool (the cluster's
// own pods run there), the others are User pools. When the first group is removed by an
// update, the next one becomes the System pool before the old one is deleted (AKS keeps a
// cluster's last System pool).
func (p pool) mode() armcontainerservice.AgentPoolMode {
	if p.system {
		return armcontainerservice.AgentPoolModeSystem
	}
	return armcontainerservice.AgentPoolModeUser
}

// matches reports whether an agent pool Azure holds has p's sizes (its VM size cannot change
// in place, so it is not compared; a running autoscaler moves count, so that is not either).
func (p pool) matches(props *armcontainerservice.ManagedClusterAgentPoolProfileProperties) bool {
	if props == nil {
		return false
	}
	count, auto, lo, hi := p.sizes()
	if want := p.mode(); props.Mode == nil || *props.Mode != want {
		return false
	}
	if !auto {
		return !isTrue(props.EnableAutoScaling) && props.Count != nil && *props.Count == count
	}
	return isTrue(props.EnableAutoScaling) && eq32(props.MinCount, lo) && eq32(props.MaxCount, hi)
}

func isTrue(b *bool) bool { return b != nil && *b }

func eq32(a, b *int32) bool { return a != nil && b != nil && *a == *b }

func (d KubernetesDriver) clusterID(j *job.Job) string {
	return "/subscriptions/" + d.C.SubscriptionID + "/resourceGroups/" + d.C.ResourceGroup + "/providers/Microsoft.ContainerService/managedClusters/" + name(j, "aks")
}

// EnsureCluster implements kubernetes.Driver, one call at a time: the managed cluster (with
// the system pool inline), then once it is up each agent pool at its node group's sizes,
// the account's admin assignment, then the endpoint and CA. Ready once the cluster and every
// pool have succeeded.
func (d KubernetesDriver) EnsureCluster(ctx context.Context, j *job.Job, cfg kubernetes.Config, n kubernetes.Network, r kubernetes.Roles) (kubernetes.Cluster, error) {
	ops := opsOf(j, kubernetes.InfraCluster)
	out := kubernetes.Cluster{Name: cfg.Name, ID: d.clusterID(j), Data: map[string]any{"ops": ops}}
	if len(n.SubnetIDs) == 0 || r.ClusterRole == "" {
		return out, fault.System(errors.New("the cluster step has no subnet or no control plane identity on record"))
	}
	if len(cfg.NodeGroups) == 0 {
		return out, fault.UserAction(errors.New("no node groups"), "InvalidConfig", "nodeGroups: at least one", "")
	}
	if err := d.C.EnsureGroup(ctx, j.SpaceID); err != nil {
		return out, err
	}
	f, err := armcontainerservice.NewClientFactory(d.C.SubscriptionID, d.C.cred, d.C.opts)
	if err != nil {
		return out, fault.System(err)
	}
	mcs, aps := f.NewManagedClustersClient(), f.NewAgentPoolsClient()
	rg, clName, subnet := d.C.ResourceGroup, name(j, "aks"), n.SubnetIDs[0]
	ps := pools(cfg.NodeGroups)
	// The job's own network sends the nodes' egress through its NAT gateway; an adopted one
	// is the user's, and AKS gives the cluster a load balancer for egress.
	outbound := armcontainerservice.OutboundTypeLoadBalancer
	if cfg.VPCID == "" {
		outbound = armcontainerservice.OutboundTypeUserAssignedNATGateway
	}
	system := ps[0].profile(j, cfg.Version, subnet)
	mc := armcontainerservice.ManagedCluster{
		Location: to.Ptr(d.C.Location), Tags: tags(j, "aks"),
		Identity: &armcontainerservice.ManagedClusterIdentity{Type: to.Ptr(armcontainerservice.ResourceIdentityTypeUserAssigned),
			UserAssignedIdentities: map[string]*armcontainerservice.ManagedServiceIdentityUserAssignedIdentitiesValue{r.ClusterRole: {}}},
		Properties: &armcontainerservice.ManagedClusterProperties{
			DNSPrefix:  to.Ptr(clName),
			EnableRBAC: to.Ptr(true),
			// Entra ID with Azure RBAC and no local accounts: the API server takes tokens of
			// the account (ClusterToken) and no static credential exists to leak.
			AADProfile:           &armcontainerservice.ManagedClusterAADProfile{Managed: to.Ptr(true), EnableAzureRBAC: to.Ptr(true)},
			DisableLocalAccounts: to.Ptr(true),
			OidcIssuerProfile:    &armcontainerservice.ManagedClusterOIDCIssuerProfile{Enabled: to.Ptr(true)},
			SecurityProfile: &armcontainerservice.ManagedClusterSecurityProfile{
				WorkloadIdentity: &armcontainerservice.ManagedClusterSecurityProfileWorkloadIdentity{Enabled: to.Ptr(true)}},
			NetworkProfile: &armcontainerservice.NetworkProfile{
				NetworkPlugin: to.Ptr(armcontainerservice.NetworkPluginAzure), NetworkPluginMode: to.Ptr(armcontainerservice.NetworkPluginModeOverlay),
				PodCidr: to.Ptr(podCIDR), ServiceCidr: to.Ptr(serviceCIDR), DNSServiceIP: to.Ptr(dnsServiceIP),
				LoadBalancerSKU: to.Ptr(armcontainerservice.LoadBalancerSKUStandard), OutboundType: to.Ptr(outbound)},
			AgentPoolProfiles: []*armcontainerservice.ManagedClusterAgentPoolProfile{&system},
		},
	}
	if cfg.Version != "" {
		mc.Properties.KubernetesVersion = to.Ptr(cfg.Version)
	}
	if cfg.PrivateCluster {
		// The API server gets a private endpoint in the cluster's VNet and a private FQDN in
		// AKS's private DNS zone, which only the cluster's VNet is linked to. The public FQDN
		// is kept: public DNS gives it the private endpoint's address, so a Groundwork in a
		// peered VNet resolves it without a link to that zone. The endpoint read below takes
		// it, and the private FQDN only when there is none.
		mc.Properties.APIServerAccessProfile = &armcontainerservice.ManagedClusterAPIServerAccessProfile{
			EnablePrivateCluster: to.Ptr(true), EnablePrivateClusterPublicFQDN: to.Ptr(true)}
	}
	ok, err := converge(ctx, d.C, ops, "create cluster", func(ctx context.Context) (State, error) {
		v, err := mcs.Get(ctx, rg, clName, nil)
		return stateOf(err, v.Tags, v.Properties, j)
	}, nil, func(ctx context.Context, tok string) (*runtime.Poller[armcontainerservice.ManagedClustersClientCreateOrUpdateResponse], error) {
		return mcs.BeginCreateOrUpdate(ctx, rg, clName, mc, &armcontainerservice.ManagedClustersClientBeginCreateOrUpdateOptions{ResumeToken: tok})
	})
	if !ok || err != nil {
		return out, err
	}
	// A config newer than the control plane (a config update) upgrades it first, alone: a
	// PUT of the cluster as AKS holds it with the new kubernetesVersion, its agent pools at
	// the versions they run, so the nodes keep theirs.
	if cfg.Version != "" {
		var cur armcontainerservice.ManagedCluster
		ok, err := converge(ctx, d.C, ops, "upgrade cluster", func(ctx context.Context) (State, error) {
			v, err := mcs.Get(ctx, rg, clName, nil)
			cur = v.ManagedCluster
			return stateOf(err, v.Tags, v.Properties, j)
		}, func() bool { return atLeast(cur, cfg.Version) }, func(ctx context.Context, tok string) (*runtime.Poller[armcontainerservice.ManagedClustersClientCreateOrUpdateResponse], error) {
			return mcs.BeginCreateOrUpdate(ctx, rg, clName, upgraded(cur, cfg.Version), &armcontainerservice.ManagedClustersClientBeginCreateOrUpdateOptions{ResumeToken: tok})
		})
		if !ok || err != nil {
			return out, err
		}
	}
	// Every pool, the system pool too, is then kept at its node group's sizes through the
	// agent pools API: a resize is a PUT of the pool, not of the whole cluster.
	for _, p := range ps {
		var have *armcontainerservice.ManagedClusterAgentPoolProfileProperties
		prof := p.profile(j, cfg.Version, subnet)
		ready, err := converge(ctx, d.C, ops, "create pool "+p.name, func(ctx context.Context) (State, error) {
			v, err := aps.Get(ctx, rg, clName, p.name, nil)
			have = v.Properties
			var t map[string]*string
			if v.Properties != nil {
				t = v.Properties.Tags
			}
			return stateOf(err, t, v.Properties, j)
		}, func() bool { return p.matches(have) }, func(ctx context.Context, tok string) (*runtime.Poller[armcontainerservice.AgentPoolsClientCreateOrUpdateResponse], error) {
			return aps.BeginCreateOrUpdate(ctx, rg, clName, p.name, armcontainerservice.AgentPool{Properties: resized(poolProperties(prof), have)},
				&armcontainerservice.AgentPoolsClientBeginCreateOrUpdateOptions{ResumeToken: tok})
		})
		if !ready || err != nil {
			// One pool at a time: AKS refuses an operation on a cluster while another
			// pool's is under way.
			return out, err
		}
	}
	// The job's pools the config no longer names go, one at a time; a pool someone else
	// added to the cluster (without the job's tags) is left alone.
	if gone, err := d.removePools(ctx, j, aps, ops, ps); !gone || err != nil {
		return out, err
	}
	// The account's principal administers the cluster it made: the components step and
	// every later use reach the API server with the account's tokens.
	caller, err := d.C.callerObjectID(ctx)
	if err != nil {
		return out, err
	}
	if err := d.ensureAssignment(ctx, j, grant{key: keyClusterAdmin, role: RoleAKSClusterAdmin, scope: out.ID, principal: caller}); err != nil {
		return out, err
	}
	got, err := mcs.Get(ctx, rg, clName, nil)
	if err != nil {
		return out, d.C.Classify(fmt.Errorf("read cluster %s: %w", clName, err))
	}
	host := ""
	if p := got.Properties; p != nil {
		host = firstOf(deref(p.Fqdn), deref(p.PrivateFQDN))
	}
	if host == "" {
		return out, fault.Transientf("cluster %s has no API server address yet", clName)
	}
	creds, err := mcs.ListClusterUserCredentials(ctx, rg, clName, nil)
	if err != nil {
		return out, d.C.Classify(fmt.Errorf("cluster %s user credentials: %w", clName, err))
	}
	ca, err := caOf(creds.Kubeconfigs)
	if err != nil {
		return out, err
	}
	out.Endpoint, out.CAData, out.Ready = "https://"+host, ca, true
	return out, nil
}

// poolProperties is an agent pool's request from the profile the cluster's PUT would carry.
func poolProperties(p armcontainerservice.ManagedClusterAgentPoolProfile) *armcontainerservice.ManagedClusterAgentPoolProfileProperties {
	return &armcontainerservice.ManagedClusterAgentPoolProfileProperties{Mode: p.Mode, VMSize: p.VMSize, Count: p.Count,
		EnableAutoScaling: p.EnableAutoScaling, MinCount: p.MinCount, MaxCount: p.MaxCount, VnetSubnetID: p.VnetSubnetID,
		OSType: p.OSType, Type: p.Type, OrchestratorVersion: p.OrchestratorVersion, Tags: p.Tags}
}

// caOf reads the cluster's CA from the user kubeconfig AKS gives: base64 of the PEM, as the
// kubeconfig and EKS carry it. It must be a certificate, or no client could trust the server.
func caOf(kubeconfigs []*armcontainerservice.CredentialResult) (string, error) {
	for _, kc := range kubeconfigs {
		if kc == nil || len(kc.Value) == 0 {
			continue
		}
		var cfg struct {
			Clusters []struct {
				Cluster struct {
					CAData string `json:"certificate-authority-data"`
				} `json:"cluster"`
			} `json:"clusters"`
		}
		if err := yaml.Unmarshal(kc.Value, &cfg); err != nil {
			return "", fault.System(fmt.Errorf("the cluster's kubeconfig: %w", err))
		}
		for _, cl := range cfg.Clusters {
			if cl.Cluster.CAData == "" {
				continue
			}
			raw, err := base64.StdEncoding.DecodeString(cl.Cluster.CAData)
			if err != nil {
				return "", fault.System(fmt.Errorf("the cluster's CA is not base64: %w", err))
			}
			block, _ := pem.Decode(raw)
			if block == nil || block.Type != "CERTIFICATE" {
				return "", fault.System(errors.New("the cluster's CA is not a PEM certificate"))
			}
			if _, err := x509.ParseCertificate(block.Bytes); err != nil {
				return "", fault.System(fmt.Errorf("the cluster's CA: %w", err))
			}
			return cl.Cluster.CAData, nil
		}
	}
	return "", fault.Transientf("the cluster's kubeconfig carries no CA yet")
}

// DeleteCluster implements kubernetes.Driver: the managed cluster, whose agent pools (and
// node resource group) Azure deletes with it.
func (d KubernetesDriver) DeleteCluster(ctx context.Context, j *job.Job, _ string) (bool, error) {
	f, err := armcontainerservice.NewClientFactory(d.C.SubscriptionID, d.C.cred, d.C.opts)
	if err != nil {
		return false, fault.System(err)
	}
	mcs, rg, clName := f.NewManagedClustersClient(), d.C.ResourceGroup, name(j, "aks")
	// The account's admin assignment is removed before the cluster, so that none is left
	// behind whether or not Azure removes a deleted resource's assignments with it.
	v, err := mcs.Get(ctx, rg, clName, nil)
	if _, err := stateOf(err, v.Tags, v.Properties, j); err != nil {
		return false, d.C.Classify(err)
	}
	if err == nil {
		if err := d.deleteAssignment(ctx, j, keyClusterAdmin, d.clusterID(j)); err != nil {
			return false, err
		}
	}
	return remove(ctx, d.C, Ops{}, "cluster", func(ctx context.Context) (State, error) {
		v, err := mcs.Get(ctx, rg, clName, nil)
		return stateOf(err, v.Tags, v.Properties, j)
	}, func(ctx context.Context, tok string) (*runtime.Poller[armcontainerservice.ManagedClustersClientDeleteResponse], error) {
		return mcs.BeginDelete(ctx, rg, clName, &armcontainerservice.ManagedClustersClientBeginDeleteOptions{ResumeToken: tok})
	})
}
