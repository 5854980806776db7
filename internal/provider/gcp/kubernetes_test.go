package gcp

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	container "google.golang.org/api/container/v1"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/provider/drivertest"
	"github.com/groundworkhq/groundwork/internal/provider/gcp/gcpfake"
	"github.com/groundworkhq/groundwork/internal/secrets"
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

var k8sConfig = kubernetes.Config{Name: "plat", Version: "1.33", NodeGroups: []kubernetes.NodeGroup{
	{Name: "system", InstanceType: "e2-standard-4", Min: 1, Max: 3},
	{Name: "GPU_workers", InstanceType: "g2-standard-8", Min: 0, Max: 4}}}

// runSteps runs steps as the engine does (drivertest.RunSteps).
func runSteps(ctx context.Context, t *testing.T, j *job.Job, steps []pipeline.Step, undo bool, seen func(json.RawMessage)) {
	t.Helper()
	drivertest.RunSteps(ctx, t, j, steps, undo, seen)
}

// clusterPosts counts the cluster creates the fake answered.
func clusterPosts(cloud *gcpfake.Cloud) int {
	n := 0
	for _, c := range cloud.Calls() {
		if c.Service == gcpfake.HostContainer && c.Method == http.MethodPost && strings.HasSuffix(c.Path, "/clusters") {
			n++
		}
	}
	return n
}

func readCluster(ctx context.Context, t *testing.T, c *Client, j *job.Job) *container.Cluster {
	t.Helper()
	d := KubernetesDriver{C: c}
	s, err := d.service(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := s.Projects.Locations.Clusters.Get(d.clusterID(j)).Context(ctx).Do()
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// The kubernetes pipeline on the GCP driver makes the network, the nodes' account and a
// regional GKE cluster as asked, records the operations in flight with its steps, hands
// the register step an https endpoint and the cluster's CA, and its undo leaves the project
// as it found it.
func TestKubernetesPipelineMakesTheGKEClusterAndRemovesIt(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c, cloud := testClient(t)
	before := cloud.Policy()
	j := k8sJob("job_pipeline01", k8sConfig)
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
			for op, name := range v.Data.Ops {
				if name != "" {
					opsSeen[key+": "+op] = true
				}
			}
		}
	})
	for _, want := range []string{"network: create network", "network: create subnetwork", "cluster: create cluster"} {
		if !opsSeen[want] {
			t.Errorf("no operation recorded for %q; saw %v", want, opsSeen)
		}
	}
	if n := clusterPosts(cloud); n != 1 {
		t.Errorf("the cluster was created %d times; want once, then its operation polled", n)
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
	if !cl.Ready || cl.Name != "plat" || !strings.HasPrefix(cl.Endpoint, "https://34.") {
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
	if ca, err := x509.ParseCertificate(block.Bytes); err != nil || !ca.IsCA {
		t.Fatalf("CA certificate: %v", err)
	}
	nodeSA := c.saEmail(j, roleNodes)
	if infra.IAM.NodeRole != nodeSA {
		t.Errorf("node role %q, want %s", infra.IAM.NodeRole, nodeSA)
	}

	// The subnet as Compute Engine holds it.
	sub, ok := cloud.Lookup(gcpfake.HostCompute, KubernetesDriver{C: c}.subnetID(j))
	if !ok || sub.Body["privateIpGoogleAccess"] != true {
		t.Fatalf("subnet %v: want Private Google Access on", sub.Body)
	}
	if ranges, _ := json.Marshal(sub.Body["secondaryIpRanges"]); !strings.Contains(string(ranges), `"rangeName":"pods"`) || !strings.Contains(string(ranges), `"rangeName":"services"`) {
		t.Errorf("subnet's secondary ranges %s, want pods and services", ranges)
	}

	// The cluster as GKE holds it.
	got := readCluster(ctx, t, c, j)
	switch {
	case got.Network != infra.Network.VPCID || got.Subnetwork != infra.Network.SubnetIDs[0]:
		t.Errorf("network %s subnetwork %s, want %s %v", got.Network, got.Subnetwork, infra.Network.VPCID, infra.Network.SubnetIDs)
	case got.WorkloadIdentityConfig == nil || got.WorkloadIdentityConfig.WorkloadPool != gcpfake.Project+".svc.id.goog":
		t.Errorf("workload identity %+v", got.WorkloadIdentityConfig)
	case got.PrivateClusterConfig == nil || !got.PrivateClusterConfig.EnablePrivateNodes || got.PrivateClusterConfig.EnablePrivateEndpoint:
		t.Errorf("private cluster config %+v, want private nodes and a public endpoint", got.PrivateClusterConfig)
	case got.IpAllocationPolicy == nil || !got.IpAllocationPolicy.UseIpAliases || got.IpAllocationPolicy.ClusterSecondaryRangeName != "pods" || got.IpAllocationPolicy.ServicesSecondaryRangeName != "services":
		t.Errorf("IP allocation %+v", got.IpAllocationPolicy)
	case got.ReleaseChannel == nil || got.ReleaseChannel.Channel != "REGULAR" || got.InitialClusterVersion != "1.33" || got.Location != c.Region:
		t.Errorf("release channel %+v, version %s, location %s", got.ReleaseChannel, got.InitialClusterVersion, got.Location)
	case !owns(j, got.ResourceLabels) || got.ResourceLabels[LabelRole] != roleK8sCluster:
		t.Errorf("labels %v", got.ResourceLabels)
	}
	if len(got.NodePools) != 2 {
		t.Fatalf("node pools %v, want 2", got.NodePools)
	}
	for i, want := range []struct {
		name, machine string
		lo, hi        int64
	}{{"system", "e2-standard-4", 1, 3}, {"gpu-workers", "g2-standard-8", 0, 4}} {
		np := got.NodePools[i]
		switch {
		case np.Name != want.name || np.Config.MachineType != want.machine || np.Status != "RUNNING":
			t.Errorf("pool %d: %s %s %s, want %s %s RUNNING", i, np.Name, np.Config.MachineType, np.Status, want.name, want.machine)
		case !np.Autoscaling.Enabled || np.Autoscaling.TotalMinNodeCount != want.lo || np.Autoscaling.TotalMaxNodeCount != want.hi:
			t.Errorf("pool %s autoscaling %+v, want %d..%d", np.Name, np.Autoscaling, want.lo, want.hi)
		case np.Config.ServiceAccount != nodeSA || !slices.Equal(np.Config.OauthScopes, []string{Scope}):
			t.Errorf("pool %s runs as %s with %v, want %s with cloud-platform", np.Name, np.Config.ServiceAccount, np.Config.OauthScopes, nodeSA)
		case !np.Management.AutoUpgrade || !np.Management.AutoRepair:
			t.Errorf("pool %s management %+v", np.Name, np.Management)
		}
	}
	pol := cloud.Policy()
	for _, role := range NodeRoles {
		if !slices.Contains(pol[role], "serviceAccount:"+nodeSA) {
			t.Errorf("role %s members %v, want the nodes' account", role, pol[role])
		}
	}

	runSteps(ctx, t, j, p.Steps(j), true, func(json.RawMessage) {})
	for _, r := range cloud.Resources() {
		if r.Kind != "cloudresourcemanager.policy" {
			t.Errorf("left after undo: %s %s", r.Kind, r.Name)
		}
	}
	if after := cloud.Policy(); len(after) != len(before) {
		t.Errorf("policy after undo %v, want %v", after, before)
	}
}

// A crash between the cluster's create and the step's checkpoint loses the operation's
// name; the next call finds the cluster GKE is making and waits on it instead of creating
// another.
func TestEnsureClusterAfterACrashMakesOneCluster(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c, cloud := testClient(t)
	d := KubernetesDriver{C: c}
	j := k8sJob("job_crash01", k8sConfig)
	var n kubernetes.Network
	var err error
	for !n.Ready {
		if n, err = d.EnsureNetwork(ctx, j, k8sConfig); err != nil {
			t.Fatal(err)
		}
	}
	r, err := d.EnsureRoles(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	first, err := d.EnsureCluster(ctx, j, k8sConfig, n, r)
	if err != nil || first.Ready {
		t.Fatalf("first call: %+v, %v; want a create under way", first, err)
	}
	if ops, _ := first.Data["ops"].(Ops); ops["create cluster"] == "" {
		t.Fatalf("first call recorded no operation: %v", first.Data)
	}
	// The result is lost: j.Infra never records it.
	if err := drivertest.EnsureCluster(ctx, d, j, k8sConfig); err != nil {
		t.Fatal(err)
	}
	if got := clusterPosts(cloud); got != 1 {
		t.Fatalf("%d cluster creates, want 1", got)
	}
	var clusters int
	for _, res := range cloud.Resources() {
		if res.Kind == "container.cluster" {
			clusters++
		}
	}
	if clusters != 1 {
		t.Fatalf("%d clusters in the project, want 1", clusters)
	}
}

// A private cluster's API server has only its address in the network: the create asks for
// the private endpoint, and the endpoint on record is it.
func TestEnsureClusterPrivate(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c, _ := testClient(t)
	cfg := k8sConfig
	cfg.PrivateCluster = true
	j := k8sJob("job_private1", cfg)
	if err := drivertest.EnsureCluster(ctx, KubernetesDriver{C: c}, j, cfg); err != nil {
		t.Fatal(err)
	}
	got := readCluster(ctx, t, c, j)
	pc := got.PrivateClusterConfig
	if pc == nil || !pc.EnablePrivateEndpoint || !pc.EnablePrivateNodes || pc.PrivateEndpoint == "" {
		t.Fatalf("private cluster config %+v, want private nodes and endpoint", pc)
	}
	n, _ := KubernetesDriver{C: c}.EnsureNetwork(ctx, j, cfg)
	r, _ := KubernetesDriver{C: c}.EnsureRoles(ctx, j)
	cl, err := KubernetesDriver{C: c}.EnsureCluster(ctx, j, cfg, n, r)
	if err != nil || cl.Endpoint != "https://"+pc.PrivateEndpoint {
		t.Fatalf("endpoint %q, %v; want the private endpoint %s", cl.Endpoint, err, pc.PrivateEndpoint)
	}
}

// The nodes' account's bindings leave the project's policy with it, and another member of
// the same roles stays. A write that races another change (409 ABORTED) is read and written
// again.
func TestDeleteRolesRemovesTheJobsBindingsOnly(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c, cloud := testClient(t)
	d := KubernetesDriver{C: c}
	j := k8sJob("job_roles01", k8sConfig)
	stranger := "user:stranger@example.com"
	for _, role := range NodeRoles {
		cloud.Grant(role, stranger)
	}
	cloud.Fail(gcpfake.HostResourceManager, http.MethodPost, ":setIamPolicy", 1, http.StatusConflict, "aborted")
	r, err := d.EnsureRoles(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	member := "serviceAccount:" + r.NodeRole
	pol := cloud.Policy()
	for _, role := range NodeRoles {
		if !slices.Contains(pol[role], member) || !slices.Contains(pol[role], stranger) {
			t.Fatalf("role %s members %v, want the job's account and the stranger", role, pol[role])
		}
	}
	if again, err := d.EnsureRoles(ctx, j); err != nil || again != r {
		t.Fatalf("ensure again: %+v, %v", again, err)
	}
	if err := d.DeleteRoles(ctx, j); err != nil {
		t.Fatal(err)
	}
	pol = cloud.Policy()
	for _, role := range NodeRoles {
		if !slices.Equal(pol[role], []string{stranger}) {
			t.Errorf("role %s members %v after delete, want only the stranger", role, pol[role])
		}
	}
	if _, ok := cloud.Lookup(gcpfake.HostIAM, "projects/"+gcpfake.Project+"/serviceAccounts/"+r.NodeRole); ok {
		t.Error("the nodes' account is left")
	}
	if err := d.DeleteRoles(ctx, j); err != nil {
		t.Fatalf("delete of what is gone: %v", err)
	}
}

// A service account of the job's name that is not the job's is refused, and its bindings
// are left by the teardown.
func TestEnsureRolesRefusesAnAccountNotTheJobs(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c, cloud := testClient(t)
	d := KubernetesDriver{C: c}
	j := k8sJob("job_taken01", k8sConfig)
	email := c.saEmail(j, roleNodes)
	cloud.Put(gcpfake.Resource{Service: gcpfake.HostIAM, Kind: "iam.serviceAccount", Name: "projects/" + gcpfake.Project + "/serviceAccounts/" + email,
		Body: map[string]any{"email": email, "uniqueId": "1", "description": "someone's"}})
	cloud.Grant(NodeRoles[0], "serviceAccount:"+email)
	_, err := d.EnsureRoles(ctx, j)
	if fe := fault.As(err); fe == nil || fe.Code != "NameTaken" {
		t.Fatalf("ensure: %v, want NameTaken", err)
	}
	if err := d.DeleteRoles(ctx, j); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cloud.Policy()[NodeRoles[0]], "serviceAccount:"+email) {
		t.Error("the teardown removed a binding of an account not the job's")
	}
}

// A node group GKE cannot express is the user's to correct, and nothing is created for it.
func TestEnsureClusterRefusesANodeGroupGKECannotExpress(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c, cloud := testClient(t)
	cfg := kubernetes.Config{Name: "bad", NodeGroups: []kubernetes.NodeGroup{{Name: "a", InstanceType: "e2-standard-2", Min: 3, Max: 2}}}
	err := drivertest.EnsureCluster(ctx, KubernetesDriver{C: c}, k8sJob("job_badgroup", cfg), cfg)
	if fe := fault.As(err); fe == nil || fe.Class != job.ClassUserAction || fe.Code != "NodeGroupInvalid" {
		t.Fatalf("err %v, want user_action NodeGroupInvalid", err)
	}
	if n := clusterPosts(cloud); n != 0 {
		t.Fatalf("%d cluster creates for a refused node group", n)
	}
}

// An adopted network is used as it is: its subnet and the secondary ranges named for pods
// and services, and the teardown leaves it.
func TestEnsureNetworkAdoptsAVPC(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c, cloud := testClient(t)
	d := KubernetesDriver{C: c}
	// The user's network, made by another job of the same shape.
	other := k8sJob("job_owner001", k8sConfig)
	var own kubernetes.Network
	for !own.Ready {
		var err error
		if own, err = d.EnsureNetwork(ctx, other, k8sConfig); err != nil {
			t.Fatal(err)
		}
	}
	cfg := k8sConfig
	cfg.VPCID = own.VPCID
	j := k8sJob("job_adopt001", cfg)
	if err := drivertest.EnsureCluster(ctx, d, j, cfg); err != nil {
		t.Fatal(err)
	}
	got := readCluster(ctx, t, c, j)
	if got.Subnetwork != own.SubnetIDs[0] || got.IpAllocationPolicy.ClusterSecondaryRangeName != "pods" {
		t.Errorf("cluster on %s with %+v, want the adopted subnet %s and its pods range", got.Subnetwork, got.IpAllocationPolicy, own.SubnetIDs[0])
	}
	for {
		done, err := d.DeleteCluster(ctx, j, cfg.Name)
		if err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
	}
	if done, err := d.DeleteNetwork(ctx, j); err != nil || !done {
		t.Fatalf("delete network: %v, %v", done, err)
	}
	if _, ok := cloud.Lookup(gcpfake.HostCompute, own.VPCID); !ok {
		t.Fatal("the adopted network was deleted")
	}
	_, err := d.EnsureNetwork(ctx, j, kubernetes.Config{VPCID: "projects/" + gcpfake.Project + "/global/networks/missing"})
	if fe := fault.As(err); fe == nil || fe.Code != "NetworkNotFound" {
		t.Fatalf("missing network: %v, want NetworkNotFound", err)
	}
}

// oneSecret is a vault that holds one value under every reference.
type oneSecret struct {
	secrets.SecretStore
	value string
}

func (s oneSecret) For(secrets.Owner) secrets.SecretStore       { return s }
func (s oneSecret) Get(context.Context, string) (string, error) { return s.value, nil }

// ClusterToken is an access token of the space's account: the one Google's token endpoint
// gives for the account's service account key.
func TestModuleClusterTokenIsTheAccountsAccessToken(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	minted := "ya29.minted-for-the-account"
	saKey := serviceAccountKey(t, minted)
	creds, _ := json.Marshal(map[string]string{"serviceAccountKey": string(saKey)})
	acc := &store.CloudAccount{ID: "acc_1", OrgID: "org_1", Provider: Name, AuthMethod: string(AuthServiceAccount), CredentialsRef: "local:acc_1"}
	sp := &store.Space{ID: "spc_cluster", OrgID: "org_1", Provider: Name, Region: "europe-west1", CloudAccountID: "acc_1"}
	m := NewModule(ModuleOptions{Records: records{spaces: map[string]*store.Space{sp.ID: sp}, accounts: map[string]*store.CloudAccount{acc.ID: acc}}, Vault: oneSecret{value: string(creds)}})
	tok, err := m.ClusterToken(ctx, "org_1", "spc_cluster", "plat")
	if err != nil || tok != minted {
		t.Fatalf("token %q, %v; want %q", tok, err, minted)
	}
	if _, err := m.ClusterToken(ctx, "org_1", "spc_gone", "plat"); fault.ClassOf(err) != job.ClassUserAction {
		t.Fatalf("token for a space that is gone: %v, want user_action", err)
	}
	if _, err := m.KubernetesDriver(ctx, &job.Job{ID: "job_1", OrgID: "org_1", SpaceID: "spc_cluster", Provider: Name}); err != nil {
		t.Fatal(err)
	}
}

// A node group added to the config becomes a node pool of its own, and one whose bounds
// changed is resized in place: neither recreates the cluster.
func TestEnsureClusterAddsAndResizesPools(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c, cloud := testClient(t)
	d := KubernetesDriver{C: c}
	j := k8sJob("job_resize01", k8sConfig)
	if err := drivertest.EnsureCluster(ctx, d, j, k8sConfig); err != nil {
		t.Fatal(err)
	}
	cfg := k8sConfig
	cfg.NodeGroups = []kubernetes.NodeGroup{
		{Name: "system", InstanceType: "e2-standard-4", Min: 2, Max: 6},
		k8sConfig.NodeGroups[1],
		{Name: "batch", InstanceType: "c3-standard-4", Min: 0, Max: 10}}
	if err := drivertest.EnsureCluster(ctx, d, j, cfg); err != nil {
		t.Fatal(err)
	}
	got := readCluster(ctx, t, c, j)
	pools := map[string]*container.NodePool{}
	for _, np := range got.NodePools {
		pools[np.Name] = np
	}
	if sys := pools["system"]; sys == nil || sys.Autoscaling.TotalMinNodeCount != 2 || sys.Autoscaling.TotalMaxNodeCount != 6 {
		t.Errorf("system pool %+v, want 2..6", sys)
	}
	if batch := pools["batch"]; batch == nil || batch.Status != "RUNNING" || batch.Config.MachineType != "c3-standard-4" || batch.Autoscaling.TotalMaxNodeCount != 10 {
		t.Errorf("batch pool %+v", batch)
	}
	if gpu := pools["gpu-workers"]; gpu == nil || gpu.Autoscaling.TotalMaxNodeCount != 4 {
		t.Errorf("gpu-workers pool %+v, want it as it was", gpu)
	}
	var creates, resizes int
	for _, call := range cloud.Calls() {
		switch {
		case call.Method != http.MethodPost || call.Status != http.StatusOK:
		case strings.HasSuffix(call.Path, "/nodePools"):
			creates++
		case strings.HasSuffix(call.Path, ":setAutoscaling"):
			resizes++
		}
	}
	if creates != 1 || resizes != 1 || clusterPosts(cloud) != 1 {
		t.Errorf("%d pool creates, %d resizes, %d cluster creates; want 1, 1, 1", creates, resizes, clusterPosts(cloud))
	}
}

// A teardown of a job whose cluster GKE is still making waits for the create to finish
// (GKE refuses a delete meanwhile) and then deletes it; a cluster of the job's name that
// is not the job's is left.
func TestDeleteClusterWhileItIsBeingMade(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c, cloud := testClient(t)
	d := KubernetesDriver{C: c}
	j := k8sJob("job_halfway1", k8sConfig)
	var n kubernetes.Network
	var err error
	for !n.Ready {
		if n, err = d.EnsureNetwork(ctx, j, k8sConfig); err != nil {
			t.Fatal(err)
		}
	}
	r, err := d.EnsureRoles(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	if cl, err := d.EnsureCluster(ctx, j, k8sConfig, n, r); err != nil || cl.Ready {
		t.Fatalf("first call: %+v, %v; want a create under way", cl, err)
	}
	var waits int
	for {
		done, err := d.DeleteCluster(ctx, j, k8sConfig.Name)
		if err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
		if waits++; waits > 50 {
			t.Fatal("the cluster is not gone after 50 calls")
		}
	}
	for _, call := range cloud.Calls() {
		if call.Service == gcpfake.HostContainer && call.Method == http.MethodDelete && call.Status != http.StatusOK {
			t.Errorf("a delete GKE refused: %+v", call)
		}
	}
	if _, ok := cloud.Lookup(gcpfake.HostContainer, d.clusterID(j)); ok {
		t.Fatal("the cluster is left")
	}

	stranger := gcpfake.Resource{Service: gcpfake.HostContainer, Kind: "container.cluster", Name: d.clusterID(j),
		Body: map[string]any{"name": name(j, "gke"), "status": "RUNNING", "resourceLabels": map[string]any{"team": "other"}}}
	cloud.Put(stranger)
	if done, err := d.DeleteCluster(ctx, j, k8sConfig.Name); err != nil || !done {
		t.Fatalf("delete of a cluster not the job's: %v, %v; want done", done, err)
	}
	if _, ok := cloud.Lookup(gcpfake.HostContainer, d.clusterID(j)); !ok {
		t.Fatal("a cluster not the job's was deleted")
	}
	if err := drivertest.EnsureCluster(ctx, d, j, k8sConfig); fault.As(err) == nil || fault.As(err).Code != "NameTaken" {
		t.Fatalf("ensure over a cluster not the job's: %v, want NameTaken", err)
	}
}
