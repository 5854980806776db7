package aws

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/rds"
	"github.com/aws/aws-sdk-go-v2/service/route53"

	"github.com/groundworkhq/groundwork/internal/discovery"
)

// Discoverer lists what an account and region have (discovery.Lister), asking the cloud for
// PageSize items at a time and following its pages to the end.
type Discoverer struct {
	P *Provider
	// PageSize is the page asked of the cloud (default 100; each API caps it on its own).
	PageSize int32
}

// Discover implements discovery.Lister.
func (d Discoverer) Discover(ctx context.Context, kind string) ([]discovery.Item, error) {
	n := d.PageSize
	if n <= 0 {
		n = 100
	}
	p := d.P
	var out []discovery.Item
	switch kind {
	case discovery.KindNetworks:
		pg := ec2.NewDescribeVpcsPaginator(p.ec2, &ec2.DescribeVpcsInput{MaxResults: ptr(max(n, 5))})
		for pg.HasMorePages() {
			page, err := pg.NextPage(ctx)
			if err != nil {
				return nil, p.classify(err, false)
			}
			for _, v := range page.Vpcs {
				tags := ec2TagMap(v.Tags)
				out = append(out, discovery.Item{ID: deref(v.VpcId), Name: nameOr(tags, deref(v.VpcId)), CIDR: deref(v.CidrBlock), Tags: tags,
					Managed: tags[TagManagedBy] == ManagedBy})
			}
		}
	case discovery.KindSubnets:
		pg := ec2.NewDescribeSubnetsPaginator(p.ec2, &ec2.DescribeSubnetsInput{MaxResults: ptr(max(n, 5))})
		for pg.HasMorePages() {
			page, err := pg.NextPage(ctx)
			if err != nil {
				return nil, p.classify(err, false)
			}
			for _, s := range page.Subnets {
				tags := ec2TagMap(s.Tags)
				out = append(out, discovery.Item{ID: deref(s.SubnetId), Name: nameOr(tags, deref(s.SubnetId)), CIDR: deref(s.CidrBlock),
					AZ: deref(s.AvailabilityZone), VPCID: deref(s.VpcId), Tags: tags, Managed: tags[TagManagedBy] == ManagedBy})
			}
		}
	case discovery.KindDNSZones:
		in := &route53.ListHostedZonesInput{MaxItems: ptr(n)}
		for {
			page, err := p.r53.ListHostedZones(ctx, in)
			if err != nil {
				return nil, p.classify(err, false)
			}
			for _, z := range page.HostedZones {
				id := strings.TrimPrefix(deref(z.Id), "/hostedzone/")
				// The zone step names its caller reference after the job (callerRef).
				managed := strings.HasPrefix(deref(z.CallerReference), "job_")
				out = append(out, discovery.Item{ID: id, Name: strings.TrimSuffix(deref(z.Name), "."), Tags: map[string]string{}, Managed: managed})
			}
			if !page.IsTruncated || page.NextMarker == nil {
				break
			}
			in.Marker = page.NextMarker
		}
	case discovery.KindClusters:
		pg := eks.NewListClustersPaginator(p.eks, &eks.ListClustersInput{MaxResults: ptr(min(n, 100))})
		for pg.HasMorePages() {
			page, err := pg.NextPage(ctx)
			if err != nil {
				return nil, p.classify(err, false)
			}
			for _, name := range page.Clusters {
				c, err := p.eks.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: &name})
				if err != nil {
					return nil, p.classify(err, false)
				}
				it := discovery.Item{ID: name, Name: name, Tags: map[string]string{}, Version: deref(c.Cluster.Version)}
				if c.Cluster.Tags != nil {
					it.Tags = c.Cluster.Tags
				}
				if vpc := c.Cluster.ResourcesVpcConfig; vpc != nil {
					it.VPCID = deref(vpc.VpcId)
				}
				it.Managed = it.Tags[TagManagedBy] == ManagedBy
				out = append(out, it)
			}
		}
	case discovery.KindInstanceTypes:
		pg := ec2.NewDescribeInstanceTypesPaginator(p.ec2, &ec2.DescribeInstanceTypesInput{MaxResults: ptr(min(max(n, 5), 100))})
		for pg.HasMorePages() {
			page, err := pg.NextPage(ctx)
			if err != nil {
				return nil, p.classify(err, false)
			}
			for _, t := range page.InstanceTypes {
				name := string(t.InstanceType)
				if vc, mem := t.VCpuInfo, t.MemoryInfo; vc != nil && mem != nil {
					name = fmt.Sprintf("%s (%d vCPU, %.1f GiB)", t.InstanceType, deref(vc.DefaultVCpus), float64(deref(mem.SizeInMiB))/1024)
				}
				out = append(out, discovery.Item{ID: string(t.InstanceType), Name: name, Tags: map[string]string{}})
			}
		}
	case discovery.KindVersions:
		for _, engine := range []string{"postgres", "mysql"} {
			pg := rds.NewDescribeDBEngineVersionsPaginator(p.rds, &rds.DescribeDBEngineVersionsInput{Engine: ptr(engine), MaxRecords: ptr(max(n, 20))})
			for pg.HasMorePages() {
				page, err := pg.NextPage(ctx)
				if err != nil {
					return nil, p.classify(err, false)
				}
				for _, v := range page.DBEngineVersions {
					out = append(out, discovery.Item{ID: engine + "-" + deref(v.EngineVersion), Name: deref(v.DBEngineVersionDescription),
						Engine: engine, Version: deref(v.EngineVersion), Tags: map[string]string{}})
				}
			}
		}
	default:
		return nil, fmt.Errorf("%w %q", discovery.ErrUnknownKind, kind)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	if out == nil {
		out = []discovery.Item{}
	}
	return out, nil
}

func nameOr(tags map[string]string, def string) string {
	if n := tags["Name"]; n != "" {
		return n
	}
	return def
}
