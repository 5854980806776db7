package azurefake

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
	aksfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6/fake"
)

const (
	typeCluster   = "Microsoft.ContainerService/managedClusters"
	typeAgentPool = "Microsoft.ContainerService/managedClusters/agentPools"
	// DefaultKubernetesVersion is the version a cluster gets when its PUT names none.
	DefaultKubernetesVersion = "1.31.5"
	// aksServerApp is the AKS AAD server application a user kubeconfig's kubelogin asks a
	// token for.
	aksServerApp = "6dae42f8-4368-4678-94ff-3960e28e3630"
)

// clusterCAs holds each managed cluster's certificate authority (PEM), made with the cluster
// and dropped with it, as AKS makes one per cluster.
type clusterCAs struct {
	mu  sync.Mutex
	pem map[string][]byte // by lower-case cluster id
}

func (s *clusterCAs) get(id string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.pem[strings.ToLower(id)]; ok {
		return p, nil
	}
	p, err := selfSignedCA(id)
	if err != nil {
		return nil, err
	}
	s.pem[strings.ToLower(id)] = p
	return p, nil
}

func (s *clusterCAs) drop(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pem, strings.ToLower(id))
}

// selfSignedCA is a fresh CA certificate (ECDSA P-256) as PEM.
func selfSignedCA(cn string) ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "ca", Organization: []string{cn}},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(30 * 365 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// kubernetesServers keep AKS managed clusters (listed across the subscription, ListPageSize
// to a page) and their agent pools. A cluster's PUT makes
// its inline agent pool profiles as agent pools of their own (children of the cluster, which
// go with it); a GET of the cluster lists every pool it has, however made. A cluster gets an
// API server FQDN (private when asked), an OIDC issuer URL when enabled, and a CA of its own,
// which its user kubeconfig (ListClusterUserCredentials) carries.
func (c *Cloud) kubernetesServers() []route {
	cas := &clusterCAs{pem: map[string][]byte{}}
	f := &aksfake.ServerFactory{
		ManagedClustersServer: aksfake.ManagedClustersServer{
			BeginCreateOrUpdate: func(_ context.Context, rg, name string, p armcontainerservice.ManagedCluster, _ *armcontainerservice.ManagedClustersClientBeginCreateOrUpdateOptions) (resp azfake.PollerResponder[armcontainerservice.ManagedClustersClientCreateOrUpdateResponse], errResp azfake.ErrorResponder) {
				id := armID(rg, typeCluster, name)
				if code := c.invalidCluster(p); code != "" {
					errResp.SetResponseError(http.StatusBadRequest, code)
					return
				}
				if code := c.invalidUpgrade(id, p); code != "" {
					errResp.SetResponseError(http.StatusBadRequest, code)
					return
				}
				if _, err := cas.get(id); err != nil {
					errResp.SetResponseError(http.StatusInternalServerError, "InternalServerError")
					return
				}
				location := strings.ToLower(str(p.Location))
				return putter[armcontainerservice.ManagedClustersClientCreateOrUpdateResponse](c, rg, id, typeCluster, p, func(props map[string]any) {
					c.stampCluster(rg, id, name, location, props)
				})
			},
			Get: func(_ context.Context, rg, name string, _ *armcontainerservice.ManagedClustersClientGetOptions) (resp azfake.Responder[armcontainerservice.ManagedClustersClientGetResponse], errResp azfake.ErrorResponder) {
				id := armID(rg, typeCluster, name)
				v, ok := stored[armcontainerservice.ManagedClustersClientGetResponse](c, id)
				if !ok {
					errResp.SetResponseError(http.StatusNotFound, "ResourceNotFound")
					return
				}
				if v.Properties == nil {
					v.Properties = &armcontainerservice.ManagedClusterProperties{}
				}
				v.Properties.AgentPoolProfiles = c.poolProfiles(id)
				resp.SetResponse(http.StatusOK, v, nil)
				return
			},
			BeginDelete: func(_ context.Context, rg, name string, _ *armcontainerservice.ManagedClustersClientBeginDeleteOptions) (azfake.PollerResponder[armcontainerservice.ManagedClustersClientDeleteResponse], azfake.ErrorResponder) {
				id := armID(rg, typeCluster, name)
				cas.drop(id)
				return deleter[armcontainerservice.ManagedClustersClientDeleteResponse](c, id, "")
			},
			NewListPager: func(*armcontainerservice.ManagedClustersClientListOptions) azfake.PagerResponder[armcontainerservice.ManagedClustersClientListResponse] {
				all := ofType[*armcontainerservice.ManagedCluster](c, typeCluster)
				for _, mc := range all {
					if mc.Properties != nil && mc.ID != nil {
						mc.Properties.AgentPoolProfiles = c.poolProfiles(*mc.ID)
					}
				}
				return paged(all, func(ms []*armcontainerservice.ManagedCluster) armcontainerservice.ManagedClustersClientListResponse {
					return armcontainerservice.ManagedClustersClientListResponse{ManagedClusterListResult: armcontainerservice.ManagedClusterListResult{Value: ms}}
				})
			},
			ListClusterUserCredentials: func(_ context.Context, rg, name string, _ *armcontainerservice.ManagedClustersClientListClusterUserCredentialsOptions) (resp azfake.Responder[armcontainerservice.ManagedClustersClientListClusterUserCredentialsResponse], errResp azfake.ErrorResponder) {
				id := armID(rg, typeCluster, name)
				v, ok := stored[armcontainerservice.ManagedCluster](c, id)
				if !ok || v.Properties == nil {
					errResp.SetResponseError(http.StatusNotFound, "ResourceNotFound")
					return
				}
				ca, err := cas.get(id)
				if err != nil {
					errResp.SetResponseError(http.StatusInternalServerError, "InternalServerError")
					return
				}
				host := str(v.Properties.Fqdn)
				if host == "" {
					host = str(v.Properties.PrivateFQDN)
				}
				resp.SetResponse(http.StatusOK, armcontainerservice.ManagedClustersClientListClusterUserCredentialsResponse{
					CredentialResults: armcontainerservice.CredentialResults{Kubeconfigs: []*armcontainerservice.CredentialResult{
						{Name: to.Ptr("clusterUser"), Value: userKubeconfig(rg, name, host, ca)},
					}},
				}, nil)
				return
			},
		},
		AgentPoolsServer: aksfake.AgentPoolsServer{
			BeginCreateOrUpdate: func(_ context.Context, rg, cluster, name string, p armcontainerservice.AgentPool, _ *armcontainerservice.AgentPoolsClientBeginCreateOrUpdateOptions) (resp azfake.PollerResponder[armcontainerservice.AgentPoolsClientCreateOrUpdateResponse], errResp azfake.ErrorResponder) {
				mc, ok := stored[armcontainerservice.ManagedCluster](c, armID(rg, typeCluster, cluster))
				if !ok {
					errResp.SetResponseError(http.StatusNotFound, "ResourceNotFound")
					return
				}
				if p.Properties == nil || p.Properties.VMSize == nil || (p.Properties.VnetSubnetID != nil && !c.scopeExists(*p.Properties.VnetSubnetID)) {
					errResp.SetResponseError(http.StatusBadRequest, "InvalidParameter")
					return
				}
				version := ""
				if mc.Properties != nil {
					version = str(mc.Properties.CurrentKubernetesVersion)
				}
				return putter[armcontainerservice.AgentPoolsClientCreateOrUpdateResponse](c, rg, armID(rg, typeAgentPool, cluster, name), typeAgentPool, p, func(props map[string]any) {
					stampPool(props, version)
				})
			},
			Get: func(_ context.Context, rg, cluster, name string, _ *armcontainerservice.AgentPoolsClientGetOptions) (azfake.Responder[armcontainerservice.AgentPoolsClientGetResponse], azfake.ErrorResponder) {
				return getter[armcontainerservice.AgentPoolsClientGetResponse](c, armID(rg, typeAgentPool, cluster, name))
			},
			BeginDelete: func(_ context.Context, rg, cluster, name string, _ *armcontainerservice.AgentPoolsClientBeginDeleteOptions) (resp azfake.PollerResponder[armcontainerservice.AgentPoolsClientDeleteResponse], errResp azfake.ErrorResponder) {
				if c.lastSystemPool(armID(rg, typeCluster, cluster), name) {
					// AKS keeps a cluster's last System pool: the cluster's own pods run there.
					errResp.SetResponseError(http.StatusBadRequest, "OperationNotAllowed")
					return
				}
				return deleter[armcontainerservice.AgentPoolsClientDeleteResponse](c, armID(rg, typeAgentPool, cluster, name), "")
			},
			NewListPager: func(rg, cluster string, _ *armcontainerservice.AgentPoolsClientListOptions) azfake.PagerResponder[armcontainerservice.AgentPoolsClientListResponse] {
				all := children[*armcontainerservice.AgentPool](c, armID(rg, typeCluster, cluster), typeAgentPool)
				sort.Slice(all, func(i, j int) bool { return str(all[i].ID) < str(all[j].ID) })
				return paged(all, func(ps []*armcontainerservice.AgentPool) armcontainerservice.AgentPoolsClientListResponse {
					return armcontainerservice.AgentPoolsClientListResponse{AgentPoolListResult: armcontainerservice.AgentPoolListResult{Value: ps}}
				})
			},
		},
	}
	tr := aksfake.NewServerFactoryTransport(f)
	return []route{{prefix: "ManagedClustersClient", tr: tr}, {prefix: "AgentPoolsClient", tr: tr}}
}

// poolProfiles are the agent pools of the cluster at id as a cluster lists them.
func (c *Cloud) poolProfiles(id string) []*armcontainerservice.ManagedClusterAgentPoolProfile {
	var out []*armcontainerservice.ManagedClusterAgentPoolProfile
	for _, pool := range children[armcontainerservice.AgentPool](c, id, typeAgentPool) {
		var prof armcontainerservice.ManagedClusterAgentPoolProfile
		raw, _ := json.Marshal(pool.Properties)
		_ = json.Unmarshal(raw, &prof)
		prof.Name = pool.Name
		out = append(out, &prof)
	}
	return out
}

// invalidCluster is AKS's refusal of a cluster request: it needs a system pool, its
// user-assigned identity must exist, and its pools' subnets too.
func (c *Cloud) invalidCluster(p armcontainerservice.ManagedCluster) string {
	if p.Properties == nil || p.Location == nil {
		return "InvalidParameter"
	}
	system := false
	for _, ap := range p.Properties.AgentPoolProfiles {
		if ap == nil || ap.Name == nil || ap.VMSize == nil {
			return "InvalidParameter"
		}
		system = system || (ap.Mode != nil && *ap.Mode == armcontainerservice.AgentPoolModeSystem)
		if ap.VnetSubnetID != nil && !c.scopeExists(*ap.VnetSubnetID) {
			return "InvalidParameter"
		}
	}
	if !system {
		return "InvalidParameter"
	}
	if p.Identity != nil {
		for idID := range p.Identity.UserAssignedIdentities {
			if _, ok := c.Raw(idID); !ok {
				return "InvalidParameter"
			}
		}
	}
	return ""
}

// invalidUpgrade is AKS's refusal of a version change of a cluster that exists: never down,
// and up one minor version at a time.
func (c *Cloud) invalidUpgrade(id string, p armcontainerservice.ManagedCluster) string {
	cur, ok := stored[armcontainerservice.ManagedCluster](c, id)
	if !ok || cur.Properties == nil || p.Properties == nil || p.Properties.KubernetesVersion == nil {
		return ""
	}
	from, okFrom := minorOf(str(cur.Properties.CurrentKubernetesVersion))
	to, okTo := minorOf(*p.Properties.KubernetesVersion)
	if !okFrom || !okTo || from == to {
		return ""
	}
	if to[0] != from[0] || to[1] < from[1] || to[1] > from[1]+1 {
		return "UpgradeNotAllowed"
	}
	return ""
}

func minorOf(v string) ([2]int, bool) {
	var a, b int
	if _, err := fmt.Sscanf(v, "%d.%d", &a, &b); err != nil {
		return [2]int{}, false
	}
	return [2]int{a, b}, true
}

// lastSystemPool reports whether name is the only System pool of the cluster at id.
func (c *Cloud) lastSystemPool(id, name string) bool {
	pools := children[armcontainerservice.AgentPool](c, id, typeAgentPool)
	this, others := false, false
	for _, p := range pools {
		system := p.Properties != nil && p.Properties.Mode != nil && *p.Properties.Mode == armcontainerservice.AgentPoolModeSystem
		if strings.EqualFold(str(p.Name), name) {
			this = system
		} else if system {
			others = true
		}
	}
	return this && !others
}

// stampCluster fills in what AKS reports of a cluster it made; it runs under c.mu, inside
// store. What a cluster was given once (its FQDN, issuer URL, kubelet identity) stays.
func (c *Cloud) stampCluster(rg, id, name, location string, props map[string]any) {
	var prev struct {
		Properties map[string]any `json:"properties"`
	}
	_ = json.Unmarshal(c.objs[strings.ToLower(id)], &prev)
	keep := func(k string, v any) {
		if old, ok := prev.Properties[k]; ok {
			props[k] = old
			return
		}
		props[k] = v
	}
	sum := sha256.Sum256([]byte(strings.ToLower(id)))
	tag := hex.EncodeToString(sum[:4])
	prefix, _ := props["dnsPrefix"].(string)
	if prefix == "" {
		prefix = name
	}
	// A private cluster gets a private FQDN (in AKS's private DNS zone) and, unless
	// enablePrivateClusterPublicFQDN is false, the public FQDN as well: AKS publishes it in
	// public DNS with the private endpoint's address.
	private, publicFQDN := false, true
	if ap, ok := props["apiServerAccessProfile"].(map[string]any); ok {
		private, _ = ap["enablePrivateCluster"].(bool)
		if v, ok := ap["enablePrivateClusterPublicFQDN"].(bool); ok && private {
			publicFQDN = v
		}
	}
	if private {
		keep("privateFQDN", fmt.Sprintf("%s-%s.%s.privatelink.%s.azmk8s.io", prefix, tag, newGUID(), location))
	}
	if publicFQDN {
		keep("fqdn", fmt.Sprintf("%s-%s.hcp.%s.azmk8s.io", prefix, tag, location))
		keep("azurePortalFQDN", fmt.Sprintf("%s-%s.portal.hcp.%s.azmk8s.io", prefix, tag, location))
	}
	version, _ := props["kubernetesVersion"].(string)
	if version == "" {
		version = DefaultKubernetesVersion
		props["kubernetesVersion"] = version
	}
	props["currentKubernetesVersion"] = version
	if oidc, ok := props["oidcIssuerProfile"].(map[string]any); ok && oidc["enabled"] == true {
		issuer := fmt.Sprintf("https://%s.oic.prod-aks.azure.com/%s/%s/", location, Tenant, newGUID())
		if po, ok := prev.Properties["oidcIssuerProfile"].(map[string]any); ok && po["issuerURL"] != nil {
			issuer, _ = po["issuerURL"].(string)
		}
		oidc["issuerURL"] = issuer
	}
	if props["nodeResourceGroup"] == nil {
		props["nodeResourceGroup"] = fmt.Sprintf("MC_%s_%s_%s", rg, name, location)
	}
	keep("identityProfile", map[string]any{"kubeletidentity": map[string]any{
		"resourceId": fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/%s/%s-agentpool", Subscription, props["nodeResourceGroup"], typeIdentity, name),
		"clientId":   newGUID(), "objectId": newGUID()}})
	props["powerState"] = map[string]any{"code": "Running"}
	props["maxAgentPools"] = 100
	// The inline profiles become the cluster's agent pools; the cluster's record keeps none,
	// as a GET lists the pools themselves.
	profiles, _ := props["agentPoolProfiles"].([]any)
	for _, p := range profiles {
		prof, ok := p.(map[string]any)
		if !ok {
			continue
		}
		poolName, _ := prof["name"].(string)
		delete(prof, "name")
		stampPool(prof, version)
		poolID := id + "/agentPools/" + poolName
		raw, _ := json.Marshal(map[string]any{"id": poolID, "name": poolName, "type": typeAgentPool, "properties": prof})
		c.objs[strings.ToLower(poolID)] = raw
	}
	delete(props, "agentPoolProfiles")
}

// stampPool fills in what AKS reports of an agent pool.
func stampPool(props map[string]any, clusterVersion string) {
	props["provisioningState"] = "Succeeded"
	version, _ := props["orchestratorVersion"].(string)
	if version == "" {
		version = clusterVersion
		props["orchestratorVersion"] = version
	}
	props["currentOrchestratorVersion"] = version
	props["powerState"] = map[string]any{"code": "Running"}
	if props["osType"] == nil {
		props["osType"] = "Linux"
	}
	if props["type"] == nil {
		props["type"] = "VirtualMachineScaleSets"
	}
	props["nodeImageVersion"] = "AKSUbuntu-2204gen2containerd-202411.12.0"
}

// userKubeconfig is the kubeconfig AKS gives a cluster user of an Entra ID (AAD) cluster: the
// server, its CA, and kubelogin to get a token for the AKS server app.
func userKubeconfig(rg, name, host string, caPEM []byte) []byte {
	user := "clusterUser_" + rg + "_" + name
	return []byte(fmt.Sprintf(`apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: %s
    server: https://%s:443
  name: %s
contexts:
- context:
    cluster: %s
    user: %s
  name: %s
current-context: %s
kind: Config
preferences: {}
users:
- name: %s
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      args:
      - get-token
      - --environment
      - AzurePublicCloud
      - --server-id
      - %s
      - --login
      - devicecode
      command: kubelogin
      env: null
      interactiveMode: IfNeeded
      provideClusterInfo: false
`, base64.StdEncoding.EncodeToString(caPEM), host, name, name, user, name, name, user, aksServerApp))
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
