package azure

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/provider/azure/azurefake"
	"github.com/groundworkhq/groundwork/internal/provider/drivertest"
	"github.com/groundworkhq/groundwork/internal/store"
)

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func k8sJob(id string, cfg kubernetes.Config) *job.Job {
	raw, _ := json.Marshal(cfg)
	return &job.Job{ID: id, OrgID: "org_k8s", SpaceID: "spc_k8s", Family: job.FamilyKubernetes, Provider: Name, Config: raw}
}

// A subscription that has not registered Microsoft.ContainerService refuses the cluster; the
// user is told the exact command that registers it.
func TestClusterRefusedUnregisteredNamesTheCommand(t *testing.T) {
	t.Parallel()
	c, cloud := testClient(t)
	cloud.Unregister("Microsoft.ContainerService")
	cfg := kubernetes.Config{Name: "refused", NodeGroups: []kubernetes.NodeGroup{{Name: "system", InstanceType: "Standard_D2s_v5", Min: 1, Max: 1}}}
	err := drivertest.EnsureCluster(testCtx(t), KubernetesDriver{C: c}, k8sJob("job_refused01", cfg), cfg)
	fe := fault.As(err)
	if fe == nil || fe.Class != job.ClassUserAction || fe.Code != "MissingSubscriptionRegistration" {
		t.Fatalf("error %v; want user_action MissingSubscriptionRegistration", err)
	}
	want := "az provider register --namespace Microsoft.ContainerService --subscription " + azurefake.Subscription
	if !strings.Contains(fe.FixHint, want) {
		t.Fatalf("hint %q does not name %q", fe.FixHint, want)
	}
}

// runSteps runs steps as the engine does (drivertest.RunSteps).
func runSteps(ctx context.Context, t *testing.T, j *job.Job, steps []pipeline.Step, undo bool, seen func(json.RawMessage)) {
	t.Helper()
	drivertest.RunSteps(ctx, t, j, steps, undo, seen)
}

// The kubernetes pipeline on the Azure driver makes an AKS cluster as asked, records the
// operations in flight with the steps (and resumes them rather than sending the PUT again),
// hands the register step an https endpoint and a CA certificate, and its undo leaves nothing.
func TestKubernetesPipelineMakesTheAKSClusterAndRemovesIt(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c, cloud := testClient(t)
	cfg := kubernetes.Config{Name: "plat", Version: "1.30", NodeGroups: []kubernetes.NodeGroup{
		{Name: "system", InstanceType: "Standard_D2s_v5", Min: 1, Max: 3},
		{Name: "gpu-workers", InstanceType: "Standard_NC6s_v3", Min: 0, Max: 4}}}
	j := k8sJob("job_pipeline01", cfg)
	j.Infra = json.RawMessage(`{}`)
	p := kubernetes.New(func(context.Context, *job.Job) (kubernetes.Driver, error) { return KubernetesDriver{C: c}, nil }, nil, time.Millisecond)
	if err := p.Validate(ctx, j); err != nil {
		t.Fatal(err)
	}
	opsSeen := map[string]bool{}
	runSteps(ctx, t, j, p.Steps(j), false, func(infra json.RawMessage) {
		var m map[string]struct {
			Data struct {
				Ops Ops `json:"ops"`
			} `json:"data"`
		}
		_ = json.Unmarshal(infra, &m)
		for key, v := range m {
			for op, tok := range v.Data.Ops {
				if tok != "" {
					opsSeen[key+": "+op] = true
				}
			}
		}
	})
	for _, want := range []string{"network: create vnet", "cluster: create cluster", "cluster: create pool gpuworkers"} {
		if !opsSeen[want] {
			t.Errorf("no resume token recorded for %q; saw %v", want, opsSeen)
		}
	}
	var puts int
	for _, call := range cloud.Calls() {
		if strings.HasPrefix(call, "PUT ") && strings.HasSuffix(strings.ToLower(call), "/managedclusters/"+name(j, "aks")) {
			puts++
		}
	}
	if puts != 1 {
		t.Errorf("the cluster was PUT %d times; want once, the rest resumed from the token", puts)
	}

	var infra struct {
		Cluster kubernetes.Cluster `json:"cluster"`
		IAM     kubernetes.Roles   `json:"iam"`
		Network kubernetes.Network `json:"network"`
		Space   map[string]string  `json:"space"`
	}
	if err := json.Unmarshal(j.Infra, &infra); err != nil {
		t.Fatal(err)
	}
	cl := infra.Cluster
	if !cl.Ready || cl.Name != "plat" || !regexp.MustCompile(`^https://gw-[a-z0-9]+-aks-[0-9a-f]+\.hcp\.westeurope\.azmk8s\.io$`).MatchString(cl.Endpoint) {
		t.Fatalf("cluster on record %+v", cl)
	}
	if infra.Space["caData"] != cl.CAData || infra.Space["endpoint"] != cl.Endpoint {
		t.Errorf("register step recorded %v, want the cluster's endpoint and CA", infra.Space)
	}
	caPEM, err := kubernetes.ClusterCA(cl.CAData)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(caPEM)
	if block == nil {
		t.Fatalf("CA %q is not PEM", cl.CAData)
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil || !ca.IsCA {
		t.Fatalf("CA certificate: %v (IsCA %v)", err, ca != nil && ca.IsCA)
	}

	// The cluster as Azure holds it.
	f, err := armcontainerservice.NewClientFactory(c.SubscriptionID, c.cred, c.opts)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := f.NewManagedClustersClient().Get(ctx, c.ResourceGroup, name(j, "aks"), nil)
	if err != nil {
		t.Fatal(err)
	}
	privateSubnet := c.vnetID(j) + "/subnets/" + SubnetPrivate
	props := mc.Properties
	np := props.NetworkProfile
	switch {
	case mc.Identity == nil || mc.Identity.UserAssignedIdentities[infra.IAM.ClusterRole] == nil || *mc.Identity.Type != armcontainerservice.ResourceIdentityTypeUserAssigned:
		t.Errorf("identity %+v, want the user-assigned %s", mc.Identity, infra.IAM.ClusterRole)
	case *np.NetworkPlugin != armcontainerservice.NetworkPluginAzure || *np.OutboundType != armcontainerservice.OutboundTypeUserAssignedNATGateway:
		t.Errorf("network profile %+v, want Azure CNI with the NAT gateway's egress", np)
	case !*props.OidcIssuerProfile.Enabled || props.OidcIssuerProfile.IssuerURL == nil || !*props.SecurityProfile.WorkloadIdentity.Enabled:
		t.Errorf("OIDC issuer %+v, workload identity %+v: want both on", props.OidcIssuerProfile, props.SecurityProfile.WorkloadIdentity)
	case *props.KubernetesVersion != "1.30" || !*props.AADProfile.EnableAzureRBAC || !*props.DisableLocalAccounts:
		t.Errorf("version %s, AAD %+v, local accounts disabled %v", *props.KubernetesVersion, props.AADProfile, *props.DisableLocalAccounts)
	}
	pools := map[string]*armcontainerservice.ManagedClusterAgentPoolProfile{}
	for _, ap := range props.AgentPoolProfiles {
		pools[*ap.Name] = ap
	}
	sys, work := pools["system"], pools["gpuworkers"]
	if len(pools) != 2 || sys == nil || work == nil {
		t.Fatalf("agent pools %v, want system and gpuworkers", pools)
	}
	if *sys.Mode != armcontainerservice.AgentPoolModeSystem || *sys.VMSize != "Standard_D2s_v5" || *sys.MinCount != 1 || *sys.MaxCount != 3 || *sys.VnetSubnetID != privateSubnet {
		t.Errorf("system pool %+v", sys)
	}
	if *work.Mode != armcontainerservice.AgentPoolModeUser || *work.VMSize != "Standard_NC6s_v3" || *work.MinCount != 0 || *work.MaxCount != 4 || !*work.EnableAutoScaling || *work.VnetSubnetID != privateSubnet {
		t.Errorf("user pool %+v", work)
	}

	// The control plane's identity is Network Contributor on the nodes' subnet.
	id, err := armmsi.NewUserAssignedIdentitiesClient(c.SubscriptionID, c.cred, c.opts)
	if err != nil {
		t.Fatal(err)
	}
	ident, err := id.Get(ctx, c.ResourceGroup, name(j, "identity"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ras, err := armauthorization.NewRoleAssignmentsClient(c.SubscriptionID, c.cred, c.opts)
	if err != nil {
		t.Fatal(err)
	}
	ra, err := ras.Get(ctx, strings.TrimPrefix(privateSubnet, "/"), assignmentName(j, keyNetworkContributor), nil)
	if err != nil {
		t.Fatal(err)
	}
	if *ra.Properties.PrincipalID != *ident.Properties.PrincipalID || !strings.HasSuffix(*ra.Properties.RoleDefinitionID, "/"+RoleNetworkContributor) {
		t.Errorf("role assignment %+v; want Network Contributor for %s", ra.Properties, *ident.Properties.PrincipalID)
	}

	// The account administers the cluster it made.
	admin, err := ras.Get(ctx, strings.TrimPrefix(cl.ID, "/"), assignmentName(j, keyClusterAdmin), nil)
	if err != nil {
		t.Fatal(err)
	}
	if *admin.Properties.PrincipalID != azurefake.Caller || !strings.HasSuffix(*admin.Properties.RoleDefinitionID, "/"+RoleAKSClusterAdmin) {
		t.Errorf("cluster admin assignment %+v; want RBAC Cluster Admin for the account's principal", admin.Properties)
	}

	runSteps(ctx, t, j, p.Steps(j), true, func(json.RawMessage) {})
	for _, r := range cloud.Resources() {
		if !strings.EqualFold(r.Type, "Microsoft.Resources/resourceGroups") {
			t.Errorf("left after undo: %s %s", r.Type, r.ID)
		}
	}
}

// A node group resized in the config is resized on Azure, the system pool's too: the pool's
// PUT is sent again.
func TestEnsureClusterResizesAPool(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c, _ := testClient(t)
	d := KubernetesDriver{C: c}
	cfg := kubernetes.Config{Name: "resize", NodeGroups: []kubernetes.NodeGroup{
		{Name: "system", InstanceType: "Standard_D2s_v5", Min: 1, Max: 1},
		{Name: "batch", InstanceType: "Standard_D4s_v5", Min: 1, Max: 2}}}
	j := k8sJob("job_resize01", cfg)
	if err := drivertest.EnsureCluster(ctx, d, j, cfg); err != nil {
		t.Fatal(err)
	}
	cfg.NodeGroups[0].Max = 3
	cfg.NodeGroups[1].Max = 7
	if err := drivertest.EnsureCluster(ctx, d, j, cfg); err != nil {
		t.Fatal(err)
	}
	f, _ := armcontainerservice.NewClientFactory(c.SubscriptionID, c.cred, c.opts)
	for _, want := range []struct {
		pool     string
		min, max int32
	}{{"system", 1, 3}, {"batch", 1, 7}} {
		ap, err := f.NewAgentPoolsClient().Get(ctx, c.ResourceGroup, name(j, "aks"), want.pool, nil)
		if err != nil {
			t.Fatal(err)
		}
		if p := ap.Properties; p.MinCount == nil || p.MaxCount == nil || *p.MinCount != want.min || *p.MaxCount != want.max || !*p.EnableAutoScaling {
			t.Errorf("pool %s: autoscale %v %v..%v, want %d..%d", want.pool, p.EnableAutoScaling, p.MinCount, p.MaxCount, want.min, want.max)
		}
	}
}

// privateCluster asks AKS for a private cluster: the PUT carries enablePrivateCluster, the
// cluster gets a private FQDN, and the endpoint on record is the public FQDN AKS keeps for a
// private cluster (public DNS gives it the private address). A cluster not asked to be
// private has no private FQDN.
func TestEnsureClusterPrivate(t *testing.T) {
	t.Parallel()
	for _, private := range []bool{false, true} {
		t.Run(map[bool]string{false: "public", true: "private"}[private], func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			c, cloud := testClient(t)
			d := KubernetesDriver{C: c}
			cfg := kubernetes.Config{Name: "priv", PrivateCluster: private,
				NodeGroups: []kubernetes.NodeGroup{{Name: "system", InstanceType: "Standard_D2s_v5", Min: 1, Max: 1}}}
			j := k8sJob("job_private01", cfg)
			if err := drivertest.EnsureCluster(ctx, d, j, cfg); err != nil {
				t.Fatal(err)
			}
			n, err := d.EnsureNetwork(ctx, j, cfg)
			if err != nil {
				t.Fatal(err)
			}
			r, err := d.EnsureRoles(ctx, j)
			if err != nil {
				t.Fatal(err)
			}
			cl, err := d.EnsureCluster(ctx, j, cfg, n, r)
			if err != nil || !cl.Ready {
				t.Fatalf("cluster %+v, %v", cl, err)
			}

			raw, ok := cloud.Raw(cl.ID)
			if !ok {
				t.Fatalf("no cluster %s", cl.ID)
			}
			var put struct {
				Properties struct {
					APIServerAccessProfile map[string]any `json:"apiServerAccessProfile"`
					Fqdn                   string         `json:"fqdn"`
					PrivateFQDN            string         `json:"privateFQDN"`
				} `json:"properties"`
			}
			if err := json.Unmarshal(raw, &put); err != nil {
				t.Fatal(err)
			}
			props := put.Properties
			if got := props.APIServerAccessProfile["enablePrivateCluster"] == true; got != private {
				t.Errorf("apiServerAccessProfile %v; want enablePrivateCluster %v", props.APIServerAccessProfile, private)
			}
			if private && props.APIServerAccessProfile["enablePrivateClusterPublicFQDN"] != true {
				t.Errorf("apiServerAccessProfile %v; want the public FQDN kept", props.APIServerAccessProfile)
			}
			if (props.PrivateFQDN != "") != private || (private && !strings.Contains(props.PrivateFQDN, ".privatelink.westeurope.azmk8s.io")) {
				t.Errorf("private FQDN %q; want one only for a private cluster", props.PrivateFQDN)
			}
			if props.Fqdn == "" || cl.Endpoint != "https://"+props.Fqdn {
				t.Errorf("endpoint %q; want https://%s", cl.Endpoint, props.Fqdn)
			}
		})
	}
}

// A cluster of the job's name that is not the job's is refused, not adopted.
func TestEnsureClusterRefusesAClusterNotTheJobs(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c, _ := testClient(t)
	d := KubernetesDriver{C: c}
	cfg := kubernetes.Config{Name: "mine", NodeGroups: []kubernetes.NodeGroup{{Name: "system", InstanceType: "Standard_D2s_v5", Min: 1, Max: 1}}}
	other := k8sJob("job_1_abcdefghijkl", cfg)
	if err := drivertest.EnsureCluster(ctx, d, other, cfg); err != nil {
		t.Fatal(err)
	}
	// Same key (the id's tail) as the other job, a different job.
	j := k8sJob("job_2_abcdefghijkl", cfg)
	if name(j, "aks") != name(other, "aks") {
		t.Fatalf("names differ: %s, %s", name(j, "aks"), name(other, "aks"))
	}
	err := drivertest.EnsureCluster(ctx, d, j, cfg)
	if fe := fault.As(err); fe == nil || fe.Code != "NameTaken" {
		t.Fatalf("error %v, want NameTaken", err)
	}
}

func TestAssignmentNameIsAStableGUIDPerJobAndRole(t *testing.T) {
	t.Parallel()
	guid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	a, b := &job.Job{ID: "job_a"}, &job.Job{ID: "job_b"}
	cases := []struct {
		name string
		x, y string
		same bool
	}{
		{"same job and role", assignmentName(a, "r"), assignmentName(a, "r"), true},
		{"other job", assignmentName(a, "r"), assignmentName(b, "r"), false},
		{"other role", assignmentName(a, "r"), assignmentName(a, "s"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if !guid.MatchString(tc.x) || !guid.MatchString(tc.y) {
				t.Fatalf("%q, %q are not GUIDs", tc.x, tc.y)
			}
			if (tc.x == tc.y) != tc.same {
				t.Fatalf("%q vs %q: same=%v, want %v", tc.x, tc.y, tc.x == tc.y, tc.same)
			}
		})
	}
}

func TestPoolNames(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		groups []string
		want   []string
	}{
		{"plain", []string{"system", "workers"}, []string{"system", "workers"}},
		{"punctuation and case", []string{"Sys_Pool", "gpu-workers.a"}, []string{"syspool", "gpuworkersa"}},
		{"leading digit and too long", []string{"1st", "averyveryverylongname"}, []string{"np1st", "averyveryver"}},
		{"clash after shortening", []string{"abcdefghijklX", "abcdefghijklY"}, []string{"abcdefghijkl", "abcdefghijk1"}},
		{"nothing left", []string{"--"}, []string{"np"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var groups []kubernetes.NodeGroup
			for _, g := range tc.groups {
				groups = append(groups, kubernetes.NodeGroup{Name: g})
			}
			ps := pools(groups)
			for i, p := range ps {
				if p.name != tc.want[i] || p.system != (i == 0) {
					t.Errorf("pool %d: %q system=%v, want %q system=%v", i, p.name, p.system, tc.want[i], i == 0)
				}
			}
		})
	}
}

// scopes records the scopes a token is asked for.
type scopes struct{ got []string }

func (s *scopes) GetToken(_ context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	s.got = append(s.got, o.Scopes...)
	return azcore.AccessToken{Token: "aks-token", ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// A cluster token is the account's token for the AKS server application.
func TestClusterTokenIsForTheAKSServerApp(t *testing.T) {
	t.Parallel()
	rec := &scopes{}
	c := &Client{cred: rec}
	tok, err := c.ClusterToken(testCtx(t))
	if err != nil || tok != "aks-token" {
		t.Fatalf("token %q, %v", tok, err)
	}
	if len(rec.got) != 1 || rec.got[0] != "6dae42f8-4368-4678-94ff-3960e28e3630/.default" {
		t.Fatalf("scopes %v", rec.got)
	}
}

// The module mints a cluster's token with the cloud account of the cluster's space; a space
// that is gone is the user's to fix.
func TestModuleClusterToken(t *testing.T) {
	t.Parallel()
	cloud := azurefake.New(t)
	acc := &store.CloudAccount{ID: "acc_1", OrgID: "org_1", Provider: Name, AuthMethod: string(AuthNone),
		Config: json.RawMessage(`{"subscriptionId":"` + azurefake.Subscription + `","endpoint":"` + cloud.URL + `"}`)}
	sp := &store.Space{ID: "spc_cluster", OrgID: "org_1", Provider: Name, Region: "westeurope", CloudAccountID: "acc_1"}
	m := NewModule(ModuleOptions{Records: records{spaces: map[string]*store.Space{sp.ID: sp}, accounts: map[string]*store.CloudAccount{acc.ID: acc}}, Transport: azurefake.Transport(cloud.URL)})
	ctx := testCtx(t)
	tok, err := m.ClusterToken(ctx, "org_1", "spc_cluster", "plat")
	if err != nil || tok == "" {
		t.Fatalf("token %q, %v", tok, err)
	}
	_, err = m.ClusterToken(ctx, "org_1", "spc_gone", "plat")
	if fault.ClassOf(err) != job.ClassUserAction {
		t.Fatalf("token for a space that is gone: %v, want user_action", err)
	}
	if _, err := m.KubernetesDriver(ctx, &job.Job{ID: "job_1", OrgID: "org_1", SpaceID: "spc_cluster", Provider: Name}); err != nil {
		t.Fatal(err)
	}
}

// The fake's caller is the principal the test-target credential's token names.
func TestTestTargetPrincipalIsTheFakesCaller(t *testing.T) {
	t.Parallel()
	c, _ := testClient(t)
	oid, err := c.callerObjectID(testCtx(t))
	if err != nil || oid != TestTargetPrincipal || TestTargetPrincipal != azurefake.Caller {
		t.Fatalf("caller %q, %v; want %s", oid, err, azurefake.Caller)
	}
}

// An account that may not assign roles is told which role lets it.
func TestRoleAssignmentRefusedNamesTheRole(t *testing.T) {
	t.Parallel()
	c, cloud := testClient(t)
	cloud.Fail("PUT", "/providers/Microsoft.Authorization/roleAssignments/", 403, "AuthorizationFailed",
		"The client does not have authorization to perform action 'Microsoft.Authorization/roleAssignments/write'.", 1)
	cfg := kubernetes.Config{Name: "norbac", NodeGroups: []kubernetes.NodeGroup{{Name: "system", InstanceType: "Standard_D2s_v5", Min: 1, Max: 1}}}
	err := drivertest.EnsureCluster(testCtx(t), KubernetesDriver{C: c}, k8sJob("job_norbac01", cfg), cfg)
	fe := fault.As(err)
	if fe == nil || fe.Class != job.ClassUserAction || !strings.Contains(fe.FixHint, "Role Based Access Control Administrator") {
		t.Fatalf("error %v (%+v); want user_action naming Role Based Access Control Administrator", err, fe)
	}
}
