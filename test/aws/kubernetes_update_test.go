package aws

import (
	"maps"
	"net/http"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"

	"github.com/groundworkhq/groundwork/internal/client"
	"github.com/groundworkhq/groundwork/internal/job"
)

// TestKubernetesNodeGroupUpdate: through PATCH config on a whole server, a live EKS cluster
// gains a node group and resizes another (DescribeNodegroup shows the new sizes), then loses
// the first; an instance type change is refused naming the group's field.
func TestKubernetesNodeGroupUpdate(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	e := newEnv(t)
	const cluster = "upd-cluster"
	j := e.create(t, "kubernetes", `{"name":"`+cluster+`","version":"1.30","nodeGroups":[{"name":"default","instanceType":"m5.large","min":1,"max":3}]}`)
	j = waitStatus(t, e.s.Client, j.ID, job.StatusCompleted)
	api := eks.NewFromConfig(e.p.Config())
	sizes := func() map[string][2]int32 {
		t.Helper()
		out := map[string][2]int32{}
		list, err := api.ListNodegroups(ctx, &eks.ListNodegroupsInput{ClusterName: awssdk.String(cluster)})
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range list.Nodegroups {
			got, err := api.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: awssdk.String(cluster), NodegroupName: awssdk.String(name)})
			if err != nil {
				t.Fatal(err)
			}
			out[name] = [2]int32{awssdk.ToInt32(got.Nodegroup.ScalingConfig.MinSize), awssdk.ToInt32(got.Nodegroup.ScalingConfig.MaxSize)}
		}
		return out
	}
	base := "/api/provisioning-jobs/" + j.ID
	config := func(groups ...map[string]any) map[string]any {
		return map[string]any{"name": cluster, "version": "1.30", "nodeGroups": groups}
	}
	group := func(name, typ string, lo, hi int) map[string]any {
		return map[string]any{"name": name, "instanceType": typ, "min": lo, "max": hi}
	}

	err := e.s.Client.Do(ctx, http.MethodPatch, base, map[string]any{"config": config(group("default", "m5.xlarge", 1, 3))}, nil)
	var ae *client.Error
	if !asClientError(err, &ae) || ae.Status != http.StatusBadRequest || !hasField(ae, "config.nodeGroups[0].instanceType") {
		t.Fatalf("instance type change: %v; want 400 naming config.nodeGroups[0].instanceType", err)
	}

	var patched job.Job
	if err := e.s.Client.Do(ctx, http.MethodPatch, base, map[string]any{"version": j.Version,
		"config": config(group("default", "m5.large", 2, 5), group("batch", "c5.large", 0, 2))}, &patched); err != nil {
		t.Fatalf("PATCH config: %v", err)
	}
	j = waitUpdated(t, e, j.ID, patched.Version)
	if got, want := sizes(), map[string][2]int32{"default": {2, 5}, "batch": {0, 2}}; !maps.Equal(got, want) {
		t.Fatalf("node groups (min, max) after adding and resizing: %v, want %v", got, want)
	}

	if err := e.s.Client.Do(ctx, http.MethodPatch, base, map[string]any{"version": j.Version,
		"config": config(group("batch", "c5.large", 0, 2))}, &patched); err != nil {
		t.Fatalf("PATCH config: %v", err)
	}
	j = waitUpdated(t, e, j.ID, patched.Version)
	if got, want := sizes(), map[string][2]int32{"batch": {0, 2}}; !maps.Equal(got, want) {
		t.Fatalf("node groups (min, max) after removing default: %v, want %v", got, want)
	}
	e.teardown(t, j.ID)
	if left := e.leftovers(t, j); len(left) > 0 {
		t.Fatalf("after teardown, moto still holds %v", left)
	}
}
