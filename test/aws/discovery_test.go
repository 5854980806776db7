package aws

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/groundworkhq/groundwork/internal/discovery"
)

// Through the API, on a space of a moto account: a VPC made outside Groundwork is listed, not
// managed, once the cache is refreshed; the CLI's cursor loop reaches it.
func TestDiscoveryThroughTheAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	path := "/api/spaces/" + e.space.ID + "/discovery/networks"
	var before discovery.Page
	if err := e.s.Client.Do(ctx, http.MethodGet, path, nil, &before); err != nil {
		t.Fatal(err)
	}
	v, err := ec2.NewFromConfig(e.p.Config()).CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: strp("10.91.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	id := *v.Vpc.VpcId
	find := func(refresh bool) (discovery.Item, bool) {
		cursor := ""
		for {
			q := fmt.Sprintf("?refresh=%v", refresh)
			if cursor != "" {
				q = "?cursor=" + cursor
			}
			var page discovery.Page
			if err := e.s.Client.Do(ctx, http.MethodGet, path+q, nil, &page); err != nil {
				t.Fatal(err)
			}
			for _, it := range page.Items {
				if it.ID == id {
					return it, true
				}
			}
			if cursor = page.NextCursor; cursor == "" {
				return discovery.Item{}, false
			}
		}
	}
	if _, ok := find(false); ok {
		t.Fatal("the cached listing already had the new VPC: the cache is not used")
	}
	it, ok := find(true)
	if !ok || it.Managed || it.CIDR != "10.91.0.0/16" {
		t.Fatalf("VPC made outside = %+v, %v", it, ok)
	}
	var bad map[string]any
	if err := e.s.Client.Do(ctx, http.MethodGet, "/api/spaces/"+e.space.ID+"/discovery/vpcs", nil, &bad); err == nil {
		t.Fatal("an unknown kind was answered")
	}
}

func strp(s string) *string { return &s }
