package aws

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/eks"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
)

func TestEKSClusterNodeGroupsAndToken(t *testing.T) {
	t.Parallel()
	p, acct := testProvider(t, "us-west-2")
	ctx, tags := testCtx(t), testTags(t)
	net, err := p.EnsureNetwork(ctx, NetworkSpec{Tags: tags, NoNAT: true})
	if err != nil {
		t.Fatal(err)
	}
	roles := RolesFor(job.FamilyKubernetes, tags)
	clusterRole, err := p.EnsureRole(ctx, roles[0])
	if err != nil {
		t.Fatal(err)
	}
	nodeRole, err := p.EnsureRole(ctx, roles[1])
	if err != nil {
		t.Fatal(err)
	}
	spec := ClusterSpec{Tags: tags, Name: "platform-prod", Version: "1.30", RoleARN: clusterRole.ARN, SubnetIDs: net.PrivateSubnetIDs}
	ng := NodeGroupSpec{Name: "default", InstanceType: "m5.large", Min: 2, Max: 6, NodeRoleARN: nodeRole.ARN, SubnetIDs: net.PrivateSubnetIDs}
	var c Cluster
	for round := 0; round < 2; round++ {
		if c, err = p.EnsureCluster(ctx, spec); err != nil {
			t.Fatal(err)
		}
		if _, err := p.EnsureNodeGroup(ctx, tags, c.Name, ng); err != nil {
			t.Fatal(err)
		}
	}
	if !c.Ready || c.Endpoint == "" || c.CAData == "" {
		t.Fatalf("cluster = %+v", c)
	}
	list, _ := p.eks.ListClusters(ctx, &eks.ListClustersInput{})
	ngs, _ := p.eks.ListNodegroups(ctx, &eks.ListNodegroupsInput{ClusterName: &c.Name})
	if len(list.Clusters) != 1 || len(ngs.Nodegroups) != 1 {
		t.Fatalf("%d clusters, %d node groups after two rounds; want 1, 1", len(list.Clusters), len(ngs.Nodegroups))
	}
	ng.Max = 8 // patched in place
	if _, err := p.EnsureNodeGroup(ctx, tags, c.Name, ng); err != nil {
		t.Fatal(err)
	}
	got, _ := p.eks.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: &c.Name, NodegroupName: &ng.Name})
	if *got.Nodegroup.ScalingConfig.MaxSize != 8 {
		t.Fatalf("max = %d, want 8", *got.Nodegroup.ScalingConfig.MaxSize)
	}

	addons := &FakeAddons{}
	var ai AddonInstaller = addons
	for i := 0; i < 2; i++ {
		if err := ai.EnsureAddon(ctx, c.Name, "vpc-cni"); err != nil {
			t.Fatal(err)
		}
	}
	if len(addons.Installed[c.Name]) != 1 {
		t.Fatalf("addons = %v", addons.Installed)
	}

	// The token is a presigned STS call: sending it as the authenticator would must name the
	// account that minted it.
	tok, _, err := p.ClusterToken(ctx, c.Name)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tok, "k8s-aws-v1."))
	if err != nil || !strings.HasPrefix(tok, "k8s-aws-v1.") {
		t.Fatalf("token format: %q, %v", tok, err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if q.Get("Action") != "GetCallerIdentity" || q.Get("X-Amz-Signature") == "" || !strings.Contains(q.Get("X-Amz-SignedHeaders"), "x-k8s-aws-id") {
		t.Fatalf("presigned URL lacks the authenticator's parts: %s", u)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	req.Header.Set("x-k8s-aws-id", c.Name)
	// moto routes a request to a service by the credential scope of its Authorization header
	// and does not read a presigned URL's query-string signature, so the same SigV4 values are
	// also passed as a header, as a header-signed request would carry them.
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+q.Get("X-Amz-Credential")+
		", SignedHeaders="+q.Get("X-Amz-SignedHeaders")+", Signature="+q.Get("X-Amz-Signature"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), acct) {
		t.Fatalf("presigned call = %d %s; want 200 naming account %s", resp.StatusCode, body, acct)
	}

	deleteUntilDone(t, func() (bool, error) { return p.DeleteCluster(ctx, tags, c.Name) })
	list, _ = p.eks.ListClusters(ctx, &eks.ListClustersInput{})
	if len(list.Clusters) != 0 {
		t.Fatalf("clusters left: %v", list.Clusters)
	}
	for _, r := range roles {
		if err := p.DeleteRole(ctx, r.Tags); err != nil {
			t.Fatal(err)
		}
	}
	deleteUntilDone(t, func() (bool, error) { return p.DeleteNetwork(ctx, tags) })
}

// privateCluster reaches EKS through the kubernetes driver as private endpoint access only;
// without it the cluster keeps both endpoints.
func TestEKSClusterEndpointAccess(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		private    bool
		wantPublic bool
	}{
		{name: "public", private: false, wantPublic: true},
		{name: "private", private: true, wantPublic: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, _ := testProvider(t, "eu-west-1")
			ctx, tags := testCtx(t), testTags(t)
			j := &job.Job{ID: tags.JobID, OrgID: tags.OrgID, Family: job.FamilyKubernetes}
			net, err := p.EnsureNetwork(ctx, NetworkSpec{Tags: tags, NoNAT: true})
			if err != nil {
				t.Fatal(err)
			}
			d := KubernetesDriver{P: p}
			roles, err := d.EnsureRoles(ctx, j)
			if err != nil {
				t.Fatal(err)
			}
			cfg := kubernetes.Config{Name: "edge-" + tc.name, PrivateCluster: tc.private,
				NodeGroups: []kubernetes.NodeGroup{{Name: "default", InstanceType: "m5.large", Min: 1, Max: 2}}}
			cl, err := d.EnsureCluster(ctx, j, cfg, kubernetes.Network{VPCID: net.VPCID, SubnetIDs: net.PrivateSubnetIDs}, roles)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.eks.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: &cl.Name})
			if err != nil {
				t.Fatal(err)
			}
			vc := got.Cluster.ResourcesVpcConfig
			if vc == nil || !vc.EndpointPrivateAccess || vc.EndpointPublicAccess != tc.wantPublic {
				t.Fatalf("resourcesVpcConfig %+v; want private access, public access %v", vc, tc.wantPublic)
			}
		})
	}
}
