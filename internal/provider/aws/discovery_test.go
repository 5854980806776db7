package aws

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/route53"

	"github.com/groundworkhq/groundwork/internal/discovery"
)

// A VPC made outside Groundwork is listed (not managed) beside one Groundwork made (managed),
// across several pages of the API and of the cloud.
func TestDiscoverNetworksAndZones(t *testing.T) {
	t.Parallel()
	p, _ := testProvider(t, "eu-north-1")
	ctx := testCtx(t)
	var outside []string
	for _, cidr := range []string{"10.70.0.0/16", "10.71.0.0/16", "10.72.0.0/16"} {
		v, err := p.ec2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: ptr(cidr)})
		if err != nil {
			t.Fatal(err)
		}
		outside = append(outside, *v.Vpc.VpcId)
	}
	ours, err := p.EnsureNetwork(ctx, NetworkSpec{Tags: testTags(t).WithRole("vpc"), NoNAT: true, CIDR: "10.80.0.0/16"})
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"a.example.com", "b.example.com", "c.example.com"} {
		if _, err := p.r53.CreateHostedZone(ctx, &route53.CreateHostedZoneInput{Name: ptr(name), CallerReference: ptr("outside-" + name)}); err != nil {
			t.Fatal(i, err)
		}
	}
	svc := discovery.New(func(context.Context, string, string) (discovery.Lister, error) {
		return Discoverer{P: p, PageSize: 1}, nil // one item per cloud page: the zones take three
	}, discovery.Options{PageSize: 2})
	all := func(kind string) map[string]discovery.Item {
		got := map[string]discovery.Item{}
		cursor, pages := "", 0
		for {
			page, err := svc.List(ctx, "org_1", "spc_1", kind, cursor, false)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			if len(page.Items) > 2 {
				t.Fatalf("%s: page of %d items, page size 2", kind, len(page.Items))
			}
			for _, it := range page.Items {
				got[it.ID] = it
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		if pages < 2 {
			t.Fatalf("%s: %d items in %d page(s): no paging", kind, len(got), pages)
		}
		return got
	}
	nets := all(discovery.KindNetworks)
	for i, id := range outside {
		it, ok := nets[id]
		if !ok || it.Managed || it.CIDR != []string{"10.70.0.0/16", "10.71.0.0/16", "10.72.0.0/16"}[i] {
			t.Fatalf("outside VPC %s = %+v, %v; want listed, not managed, with its CIDR", id, it, ok)
		}
	}
	if it := nets[ours.VPCID]; !it.Managed || it.CIDR != "10.80.0.0/16" {
		t.Fatalf("Groundwork's VPC = %+v; want managed", it)
	}
	zones := all(discovery.KindDNSZones)
	if len(zones) != 3 {
		t.Fatalf("zones = %+v; want the three", zones)
	}
	for _, z := range zones {
		if z.Managed || z.Name == "" {
			t.Fatalf("zone %+v", z)
		}
	}
	subnets := all(discovery.KindSubnets)
	n := 0
	for _, s := range subnets {
		if s.VPCID == ours.VPCID {
			n++
			if s.AZ == "" || s.CIDR == "" || !s.Managed {
				t.Fatalf("subnet %+v", s)
			}
		}
	}
	if n == 0 {
		t.Fatal("the network's subnets are not listed")
	}
}
