package aws

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/groundworkhq/groundwork/internal/api"
	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/store"
)

// inspect asks the server to inspect job id and returns its answer.
func (e *env) inspect(t *testing.T, id string) api.JobDrift {
	t.Helper()
	var d api.JobDrift
	if err := e.s.Client.Do(testCtx(t), http.MethodPost, "/api/provisioning-jobs/"+id+"/inspect", nil, &d); err != nil {
		t.Fatalf("inspect %s: %v", id, err)
	}
	return d
}

// reconcile asks the server to reconcile job id and waits for the engine to finish it.
func (e *env) reconcile(t *testing.T, id string) *job.Job {
	t.Helper()
	var queued job.Job
	if err := e.s.Client.Do(testCtx(t), http.MethodPost, "/api/provisioning-jobs/"+id+"/reconcile", nil, &queued); err != nil {
		t.Fatalf("reconcile %s: %v", id, err)
	}
	if queued.Status != job.StatusQueued {
		t.Fatalf("reconcile answered a %s job", queued.Status)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		j := getJob(t, e.s.Client, id)
		if j.Status == job.StatusCompleted && j.Version > queued.Version {
			return j
		}
		if j.Status == job.StatusFailed || time.Now().After(deadline) {
			t.Fatalf("reconcile: job %s at version %d", j.Status, j.Version)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDriftOfAPoolsSecurityGroup: an ingress rule added to a pool's security group behind
// Groundwork's back (straight on moto) is drift on inspect, naming the group, the field and
// both rule lists; reconcile runs the step that owns the group again, which revokes the rule,
// and the next inspection is clean.
func TestDriftOfAPoolsSecurityGroup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	j := e.create(t, "vm_pool", `{"name":"web","instanceType":"t3.micro","min":1,"max":1}`)
	j = waitStatus(t, e.s.Client, j.ID, job.StatusCompleted)
	if d := e.inspect(t, j.ID); d.DriftCount != 0 || len(d.Drift) != 0 {
		t.Fatalf("drift right after create: %+v", d)
	}
	var infra struct {
		LT      struct{ VMSecurityGroupID string } `json:"launchTemplate"`
		Network struct{ CIDR string }              `json:"network"`
	}
	if err := json.Unmarshal(j.Infra, &infra); err != nil || infra.LT.VMSecurityGroupID == "" {
		t.Fatalf("infra %s: %v", j.Infra, err)
	}
	sg := infra.LT.VMSecurityGroupID
	ec := ec2.NewFromConfig(e.p.Config())
	ssh := ec2types.IpPermission{IpProtocol: ptrOf("tcp"), FromPort: ptrOf(int32(22)), ToPort: ptrOf(int32(22)),
		IpRanges: []ec2types.IpRange{{CidrIp: ptrOf("0.0.0.0/0")}}}
	if _, err := ec.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: &sg, IpPermissions: []ec2types.IpPermission{ssh}}); err != nil {
		t.Fatal(err)
	}

	d := e.inspect(t, j.ID)
	applied := []any{"all from " + infra.Network.CIDR}
	actual := []any{"all from " + infra.Network.CIDR, "tcp 22 from 0.0.0.0/0"}
	if d.DriftCount != 1 || d.Drift[0].Resource != (job.ResourceRef{Type: "security-group", ID: sg}) || d.Drift[0].Field != "ingress" ||
		!slices.Equal(d.Drift[0].Applied.([]any), applied) || !slices.Equal(d.Drift[0].Actual.([]any), actual) {
		t.Fatalf("drift after an added rule: %+v", d)
	}
	var read api.JobDrift
	if err := e.s.Client.Do(ctx, http.MethodGet, "/api/provisioning-jobs/"+j.ID+"/drift", nil, &read); err != nil || read.DriftCount != 1 {
		t.Fatalf("GET drift: %+v %v", read, err)
	}
	if got, want := driftGauge(t, e), `groundwork_drifted_fields{org="`+e.space.OrgID+`",space="`+e.space.ID+`"} 1`; !strings.Contains(got, want) {
		t.Fatalf("/metrics has no %s:\n%s", want, got)
	}

	after := e.reconcile(t, j.ID)
	if i := after.StepIndex("create_launch_template"); i < 0 || after.Steps[i].StartedAt == nil || j.Steps[i].FinishedAt == nil ||
		!after.Steps[i].StartedAt.After(*j.Steps[i].FinishedAt) {
		t.Fatalf("the launch template step did not run again: %+v", after.Steps)
	}
	if i := after.StepIndex("create_vms"); !after.Steps[i].StartedAt.Equal(*j.Steps[i].StartedAt) {
		t.Fatalf("reconcile ran the VMs step again: started %v, was %v", after.Steps[i].StartedAt, j.Steps[i].StartedAt)
	}
	groups, err := ec.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{sg}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range groups.SecurityGroups[0].IpPermissions {
		if p.FromPort != nil && *p.FromPort == 22 {
			t.Fatalf("the added rule is still there after reconcile: %+v", groups.SecurityGroups[0].IpPermissions)
		}
	}
	if d := e.inspect(t, j.ID); d.DriftCount != 0 {
		t.Fatalf("drift after reconcile: %+v", d)
	}
	if got, want := driftGauge(t, e), `groundwork_drifted_fields{org="`+e.space.OrgID+`",space="`+e.space.ID+`"} 0`; !strings.Contains(got, want) {
		t.Fatalf("/metrics has no %s:\n%s", want, got)
	}
	audit := e.auditActions(t, j.ID)
	if audit["provisioning-job.inspect"] != 3 || audit["provisioning-job.reconcile"] != 1 {
		t.Fatalf("audit: %v", audit)
	}
	e.teardown(t, j.ID)
}

// TestDriftOfANetwork: the network family reads its VPC's DNS attributes back; one turned
// off behind Groundwork's back is drift, and reconcile turns it on again.
func TestDriftOfANetwork(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	j := e.create(t, "network", `{"cidr":"10.31.0.0/16"}`)
	j = waitStatus(t, e.s.Client, j.ID, job.StatusCompleted)
	if d := e.inspect(t, j.ID); d.DriftCount != 0 {
		t.Fatalf("drift right after create: %+v", d)
	}
	var infra struct {
		Network struct{ VPCID string } `json:"network"`
	}
	if err := json.Unmarshal(j.Infra, &infra); err != nil || infra.Network.VPCID == "" {
		t.Fatalf("infra %s: %v", j.Infra, err)
	}
	if _, err := ec2.NewFromConfig(e.p.Config()).ModifyVpcAttribute(ctx, &ec2.ModifyVpcAttributeInput{VpcId: &infra.Network.VPCID,
		EnableDnsHostnames: &ec2types.AttributeBooleanValue{Value: ptrOf(false)}}); err != nil {
		t.Fatal(err)
	}
	d := e.inspect(t, j.ID)
	if d.DriftCount != 1 || d.Drift[0].Resource.ID != infra.Network.VPCID || d.Drift[0].Field != "enableDnsHostnames" ||
		d.Drift[0].Applied != true || d.Drift[0].Actual != false {
		t.Fatalf("drift after turning DNS hostnames off: %+v", d)
	}
	e.reconcile(t, j.ID)
	if d := e.inspect(t, j.ID); d.DriftCount != 0 {
		t.Fatalf("drift after reconcile: %+v", d)
	}
	e.teardown(t, j.ID)
}

// TestScheduledInspection: a space with inspectIntervalMinutes has its completed jobs
// inspected without anyone asking, recorded as the scheduler's.
func TestScheduledInspection(t *testing.T) {
	t.Parallel()
	endpoint := motoEnv.Endpoint(t)
	s := apptest.Start(t, app.Options{DataDir: t.TempDir(), PollInterval: 100 * time.Millisecond, InspectTick: 100 * time.Millisecond,
		AWS: app.AWSOptions{Poll: 100 * time.Millisecond}})
	e := newEnvOn(t, s, endpoint, true)
	ctx := testCtx(t)
	var sp store.Space
	if err := s.Client.Do(ctx, http.MethodPost, "/api/spaces", map[string]any{"name": "inspected", "provider": "aws",
		"region": e.space.Region, "cloudAccountID": e.space.CloudAccountID, "config": map[string]any{"inspectIntervalMinutes": 1}}, &sp); err != nil {
		t.Fatal(err)
	}
	e.space = &sp
	j := e.create(t, "network", `{"cidr":"10.32.0.0/16"}`)
	waitStatus(t, s.Client, j.ID, job.StatusCompleted)
	deadline := time.Now().Add(time.Minute)
	for {
		var d api.JobDrift
		err := s.Client.Do(ctx, http.MethodGet, "/api/provisioning-jobs/"+j.ID+"/drift", nil, &d)
		if err == nil {
			if d.DriftCount != 0 || d.JobID != j.ID {
				t.Fatalf("scheduled inspection: %+v", d)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no scheduled inspection within a minute: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var page struct {
		Data []struct{ Action, Actor, ResourceID string } `json:"data"`
	}
	if err := s.Client.Do(ctx, http.MethodGet, "/api/audit-logs?actor=system:inspector", nil, &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Data) == 0 || page.Data[0].Action != "provisioning-job.inspect" || page.Data[0].ResourceID != j.ID {
		t.Fatalf("scheduled inspection's audit: %+v", page.Data)
	}
	e.teardown(t, j.ID)
}

// driftGauge is the server's groundwork_drifted_fields series, as /metrics answers them.
func driftGauge(t *testing.T, e *env) string {
	t.Helper()
	resp, err := http.Get(e.s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "groundwork_drifted_fields{") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

func ptrOf[T any](v T) *T { return &v }
