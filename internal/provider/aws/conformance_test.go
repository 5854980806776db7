package aws

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/rds"
	"github.com/aws/aws-sdk-go-v2/service/route53"
	r53types "github.com/aws/aws-sdk-go-v2/service/route53/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/job"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/pipeline/dnszone"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
	"github.com/groundworkhq/groundwork/internal/pipeline/registry"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
	"github.com/groundworkhq/groundwork/internal/provider/drivertest"
)

// missingVPC is a well-formed VPC id no moto account holds: adopting it is the user's mistake.
const missingVPC = "vpc-0123456789abcdef0"

// The AWS module's drivers pass the conformance suite every cloud's drivers do, on moto.
func TestDriverConformance(t *testing.T) {
	t.Parallel()
	open := func(t *testing.T, region string) (*Provider, drivertest.Observer) {
		p, _ := testProvider(t, region)
		return p, observeAccount(p)
	}
	userAction := job.ClassUserAction
	t.Run("network", func(t *testing.T) {
		t.Parallel()
		drivertest.Network(t, drivertest.Harness[network.Driver, network.Config]{
			Provider: Name,
			Open: func(t *testing.T) (network.Driver, drivertest.Observer) {
				p, o := open(t, "us-east-2")
				return NetworkDriver{P: p}, o
			},
			Config: network.Config{CIDR: "10.40.0.0/16", AZCount: 2},
			Refusal: drivertest.Refusal[network.Driver]{Class: userAction,
				Call: func(ctx context.Context, d network.Driver, j *job.Job) error {
					_, err := d.EnsureNetwork(ctx, j, network.Config{VPCID: missingVPC})
					return err
				}},
		})
	})
	t.Run("registry", func(t *testing.T) {
		t.Parallel()
		cfg := registry.Config{Name: "team/conformance", ScanOnPush: true}
		drivertest.Registry(t, drivertest.Harness[registry.Driver, registry.Config]{
			Provider: Name,
			Open: func(t *testing.T) (registry.Driver, drivertest.Observer) {
				p, o := open(t, "us-east-2")
				return RegistryDriver{P: p}, o
			},
			Config: cfg,
			// A repository of the same name that another job made is not this job's to adopt.
			Refusal: drivertest.Refusal[registry.Driver]{Class: userAction,
				Call: func(ctx context.Context, d registry.Driver, j *job.Job) error {
					other := *j
					other.ID += "x"
					if _, err := d.EnsureRepository(ctx, &other, cfg); err != nil {
						return err
					}
					_, err := d.EnsureRepository(ctx, j, cfg)
					if derr := d.DeleteRepository(ctx, &other, cfg.Name); derr != nil {
						t.Errorf("delete the other job's repository: %v", derr)
					}
					return err
				}},
		})
	})
	t.Run("dns_zone", func(t *testing.T) {
		t.Parallel()
		drivertest.DNSZone(t, drivertest.Harness[dnszone.Driver, dnszone.Config]{
			Provider: Name,
			Open: func(t *testing.T) (dnszone.Driver, drivertest.Observer) {
				p, o := open(t, "us-east-2")
				return DNSZoneDriver{P: p}, o
			},
			Config: dnszone.Config{Name: "conformance.example.org", Records: []dnszone.Record{
				{Name: "api.conformance.example.org", Type: "A", TTL: 300, Values: []string{"10.0.0.5"}},
			}},
			// A record for a zone that is not there (moto, unlike Route 53, accepts a private
			// zone on a VPC that does not exist, so that refusal cannot be shown here).
			Refusal: drivertest.Refusal[dnszone.Driver]{Class: userAction,
				Call: func(ctx context.Context, d dnszone.Driver, _ *job.Job) error {
					return d.UpsertRecord(ctx, "Z0123456789ABCDEFGHIJ", dnszone.Record{Name: "a.example.org", Type: "A", TTL: 60, Values: []string{"10.0.0.1"}})
				}},
		})
	})
	t.Run("vm_pool", func(t *testing.T) {
		t.Parallel()
		drivertest.VMPool(t, drivertest.Harness[vmpool.Driver, vmpool.Config]{
			Provider: Name,
			Open: func(t *testing.T) (vmpool.Driver, drivertest.Observer) {
				p, o := open(t, "us-west-1")
				return VMPoolDriver{P: p, Probe: FakeBootstrapProbe{AllReady: true}}, o
			},
			Config: vmpool.Config{Name: "conformance", InstanceType: "t3.micro", Min: 2, Max: 3, Desired: 2,
				CreateLoadBalancer: true, ListenerPorts: []int32{80}},
			Refusal: drivertest.Refusal[vmpool.Driver]{Class: userAction,
				Call: func(ctx context.Context, d vmpool.Driver, j *job.Job) error {
					_, err := d.EnsureNetwork(ctx, j, vmpool.Config{VPCID: missingVPC, SubnetIDs: []string{"subnet-0123456789abcdef0"}})
					return err
				}},
		})
	})
	t.Run("kubernetes", func(t *testing.T) {
		t.Parallel()
		drivertest.Kubernetes(t, drivertest.Harness[kubernetes.Driver, kubernetes.Config]{
			Provider: Name,
			Open: func(t *testing.T) (kubernetes.Driver, drivertest.Observer) {
				p, o := open(t, "us-west-1")
				return KubernetesDriver{P: p}, o
			},
			Config: kubernetes.Config{Name: "conformance", Version: "1.30",
				NodeGroups: []kubernetes.NodeGroup{{Name: "default", InstanceType: "m5.large", Min: 1, Max: 2}}},
			Refusal: drivertest.Refusal[kubernetes.Driver]{Class: userAction,
				Call: func(ctx context.Context, d kubernetes.Driver, j *job.Job) error {
					_, err := d.EnsureNetwork(ctx, j, kubernetes.Config{VPCID: missingVPC, SubnetIDs: []string{"subnet-0123456789abcdef0"}})
					return err
				}},
		})
	})
	t.Run("datastore", func(t *testing.T) {
		t.Parallel()
		var p *Provider
		drivertest.Datastore(t, drivertest.Harness[dspipe.Driver, drivertest.DatastoreRequest]{
			Provider: Name,
			Open: func(t *testing.T) (dspipe.Driver, drivertest.Observer) {
				var o drivertest.Observer
				p, o = open(t, "eu-north-1")
				d := DatastoreDriver{Resolve: func(_ context.Context, jobID string) (Placement, error) {
					return Placement{P: p, Tags: Tags{OrgID: "org_drivertest", JobID: jobID}}, nil
				}}
				return d.Driver(), o
			},
			Config: drivertest.DatastoreRequest{Engine: datastore.EnginePostgres, Version: "16.3",
				Settings: map[string]any{"instanceClass": "db.t3.micro", "allocatedStorageGB": 20}},
			// A space whose subnets are not there: the same driver, placed by such a space.
			Refusal: drivertest.Refusal[dspipe.Driver]{Class: userAction,
				Call: func(ctx context.Context, _ dspipe.Driver, j *job.Job) error {
					d := DatastoreDriver{Resolve: func(_ context.Context, jobID string) (Placement, error) {
						return Placement{P: p, Tags: Tags{OrgID: "org_drivertest", JobID: jobID}, SubnetIDs: []string{"subnet-0123456789abcdef0"}}, nil
					}}
					_, err := d.Driver().Servers.Create(ctx, dspipe.CreateParams{JobID: j.ID, Engine: datastore.EnginePostgres,
						Version: "16.3", Name: "refused", AdminPassword: datastore.GeneratePassword()})
					return err
				}},
		})
	})
}

// observeAccount lists what the families make in p's account, whoever made it, with the job
// id each carries in its groundwork:jobId tag. Children AWS makes with a VPC (its main route
// table, default security group) go with it and are left out.
func observeAccount(p *Provider) drivertest.Observer {
	return func(ctx context.Context) ([]drivertest.Resource, error) {
		var out []drivertest.Resource
		add := func(kind, id string, tags map[string]string) {
			out = append(out, drivertest.Resource{Kind: kind, ID: id, JobID: tags[TagJobID]})
		}
		ec2Tags := func(ts []ec2types.Tag) map[string]string {
			m := map[string]string{}
			for _, t := range ts {
				m[deref(t.Key)] = deref(t.Value)
			}
			return m
		}
		vpcs, err := p.ec2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{})
		if err != nil {
			return nil, err
		}
		for _, v := range vpcs.Vpcs {
			if v.IsDefault == nil || !*v.IsDefault {
				add("vpc", deref(v.VpcId), ec2Tags(v.Tags))
			}
		}
		subs, err := p.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
		if err != nil {
			return nil, err
		}
		for _, s := range subs.Subnets {
			if s.DefaultForAz == nil || !*s.DefaultForAz {
				add("subnet", deref(s.SubnetId), ec2Tags(s.Tags))
			}
		}
		igws, err := p.ec2.DescribeInternetGateways(ctx, &ec2.DescribeInternetGatewaysInput{})
		if err != nil {
			return nil, err
		}
		for _, g := range igws.InternetGateways {
			add("internet-gateway", deref(g.InternetGatewayId), ec2Tags(g.Tags))
		}
		rts, err := p.ec2.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{})
		if err != nil {
			return nil, err
		}
	routeTables:
		for _, r := range rts.RouteTables {
			for _, a := range r.Associations {
				if a.Main != nil && *a.Main {
					continue routeTables
				}
			}
			add("route-table", deref(r.RouteTableId), ec2Tags(r.Tags))
		}
		nats, err := p.ec2.DescribeNatGateways(ctx, &ec2.DescribeNatGatewaysInput{})
		if err != nil {
			return nil, err
		}
		for _, n := range nats.NatGateways {
			if n.State != ec2types.NatGatewayStateDeleted && n.State != ec2types.NatGatewayStateFailed {
				add("nat-gateway", deref(n.NatGatewayId), ec2Tags(n.Tags))
			}
		}
		eips, err := p.ec2.DescribeAddresses(ctx, &ec2.DescribeAddressesInput{})
		if err != nil {
			return nil, err
		}
		for _, a := range eips.Addresses {
			add("elastic-ip", deref(a.AllocationId), ec2Tags(a.Tags))
		}
		sgs, err := p.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{})
		if err != nil {
			return nil, err
		}
		for _, g := range sgs.SecurityGroups {
			if deref(g.GroupName) != "default" {
				add("security-group", deref(g.GroupId), ec2Tags(g.Tags))
			}
		}
		lts, err := p.ec2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{})
		if err != nil {
			return nil, err
		}
		for _, l := range lts.LaunchTemplates {
			add("launch-template", deref(l.LaunchTemplateId), ec2Tags(l.Tags))
		}
		insts, err := p.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
		if err != nil {
			return nil, err
		}
		for _, r := range insts.Reservations {
			for _, in := range r.Instances {
				if in.State != nil && in.State.Name != ec2types.InstanceStateNameTerminated && in.State.Name != ec2types.InstanceStateNameShuttingDown {
					add("instance", deref(in.InstanceId), ec2Tags(in.Tags))
				}
			}
		}

		roles, err := p.iam.ListRoles(ctx, &iam.ListRolesInput{})
		if err != nil {
			return nil, err
		}
		for _, r := range roles.Roles {
			tags, err := p.iam.ListRoleTags(ctx, &iam.ListRoleTagsInput{RoleName: r.RoleName})
			if err != nil {
				return nil, err
			}
			m := map[string]string{}
			for _, t := range tags.Tags {
				m[deref(t.Key)] = deref(t.Value)
			}
			add("iam-role", deref(r.RoleName), m)
		}
		profs, err := p.iam.ListInstanceProfiles(ctx, &iam.ListInstanceProfilesInput{})
		if err != nil {
			return nil, err
		}
		for _, ip := range profs.InstanceProfiles {
			m := map[string]string{}
			for _, t := range ip.Tags {
				m[deref(t.Key)] = deref(t.Value)
			}
			add("instance-profile", deref(ip.InstanceProfileName), m)
		}

		repos, err := p.ecr.DescribeRepositories(ctx, &ecr.DescribeRepositoriesInput{})
		if err != nil {
			return nil, err
		}
		for _, r := range repos.Repositories {
			tags, err := p.ecr.ListTagsForResource(ctx, &ecr.ListTagsForResourceInput{ResourceArn: r.RepositoryArn})
			if err != nil {
				return nil, err
			}
			m := map[string]string{}
			for _, t := range tags.Tags {
				m[deref(t.Key)] = deref(t.Value)
			}
			add("ecr-repository", deref(r.RepositoryName), m)
		}

		zones, err := p.r53.ListHostedZones(ctx, &route53.ListHostedZonesInput{})
		if err != nil {
			return nil, err
		}
		for _, z := range zones.HostedZones {
			id := strings.TrimPrefix(deref(z.Id), "/hostedzone/")
			tags, err := p.r53.ListTagsForResource(ctx, &route53.ListTagsForResourceInput{ResourceId: &id, ResourceType: r53types.TagResourceTypeHostedzone})
			if err != nil {
				return nil, err
			}
			m := map[string]string{}
			if tags.ResourceTagSet != nil {
				for _, t := range tags.ResourceTagSet.Tags {
					m[deref(t.Key)] = deref(t.Value)
				}
			}
			add("hosted-zone", id, m)
		}

		clusters, err := p.eks.ListClusters(ctx, &eks.ListClustersInput{})
		if err != nil {
			return nil, err
		}
		for _, name := range clusters.Clusters {
			c, err := p.eks.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: &name})
			if err != nil {
				return nil, err
			}
			add("eks-cluster", name, c.Cluster.Tags)
			ngs, err := p.eks.ListNodegroups(ctx, &eks.ListNodegroupsInput{ClusterName: &name})
			if err != nil {
				return nil, err
			}
			for _, ng := range ngs.Nodegroups {
				d, err := p.eks.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: &name, NodegroupName: &ng})
				if err != nil {
					return nil, err
				}
				add("eks-nodegroup", name+"/"+ng, d.Nodegroup.Tags)
			}
		}

		var elbARNs []string
		kindOf := map[string]string{}
		tgs, err := p.elb.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{})
		if err != nil {
			return nil, err
		}
		for _, g := range tgs.TargetGroups {
			elbARNs, kindOf[deref(g.TargetGroupArn)] = append(elbARNs, deref(g.TargetGroupArn)), "target-group"
		}
		lbs, err := p.elb.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{})
		if err != nil {
			return nil, err
		}
		for _, l := range lbs.LoadBalancers {
			elbARNs, kindOf[deref(l.LoadBalancerArn)] = append(elbARNs, deref(l.LoadBalancerArn)), "load-balancer"
		}
		for len(elbARNs) > 0 { // DescribeTags takes at most 20 resources a call
			n := min(20, len(elbARNs))
			tags, err := p.elb.DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: elbARNs[:n]})
			if err != nil {
				return nil, err
			}
			for _, d := range tags.TagDescriptions {
				m := map[string]string{}
				for _, t := range d.Tags {
					m[deref(t.Key)] = deref(t.Value)
				}
				add(kindOf[deref(d.ResourceArn)], deref(d.ResourceArn), m)
			}
			elbARNs = elbARNs[n:]
		}
		groups, err := p.asg.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{})
		if err != nil {
			return nil, err
		}
		for _, g := range groups.AutoScalingGroups {
			if g.Status != nil { // being deleted
				continue
			}
			m := map[string]string{}
			for _, t := range g.Tags {
				m[deref(t.Key)] = deref(t.Value)
			}
			add("auto-scaling-group", deref(g.AutoScalingGroupName), m)
		}

		dbs, err := p.rds.DescribeDBInstances(ctx, &rds.DescribeDBInstancesInput{})
		if err != nil {
			return nil, err
		}
		for _, d := range dbs.DBInstances {
			m := map[string]string{}
			for _, t := range d.TagList {
				m[deref(t.Key)] = deref(t.Value)
			}
			add("rds-instance", deref(d.DBInstanceIdentifier), m)
		}
		sngs, err := p.rds.DescribeDBSubnetGroups(ctx, &rds.DescribeDBSubnetGroupsInput{})
		if err != nil {
			return nil, err
		}
		for _, g := range sngs.DBSubnetGroups {
			tags, err := p.rds.ListTagsForResource(ctx, &rds.ListTagsForResourceInput{ResourceName: g.DBSubnetGroupArn})
			if err != nil {
				return nil, err
			}
			m := map[string]string{}
			for _, t := range tags.TagList {
				m[deref(t.Key)] = deref(t.Value)
			}
			add("db-subnet-group", deref(g.DBSubnetGroupName), m)
		}
		secs, err := p.sm.ListSecrets(ctx, &secretsmanager.ListSecretsInput{})
		if err != nil {
			return nil, err
		}
		for _, s := range secs.SecretList {
			m := map[string]string{}
			for _, t := range s.Tags {
				m[deref(t.Key)] = deref(t.Value)
			}
			add("secret", deref(s.Name), m)
		}
		return out, nil
	}
}
