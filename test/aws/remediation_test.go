package aws

import (
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/rds"

	"github.com/groundworkhq/groundwork/internal/api"
	"github.com/groundworkhq/groundwork/internal/client"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/remediation"
)

// remJob is a remediation job as the API answers it.
type remJob = api.RemediationJob

func (e *env) remediate(t *testing.T, action, resourceType, id string) *remJob {
	t.Helper()
	var j remJob
	if err := e.s.Client.Do(testCtx(t), http.MethodPost, "/api/remediation-jobs", map[string]any{
		"recommendationID": "rec_" + id, "subjectType": "resource", "subjectID": id, "spaceID": e.space.ID,
		"action": action, "resourceType": resourceType}, &j); err != nil {
		t.Fatalf("start remediation: %v", err)
	}
	return &j
}

func getRemediation(t *testing.T, c *client.Client, id string) *remJob {
	t.Helper()
	var j remJob
	if err := c.Do(testCtx(t), http.MethodGet, "/api/remediation-jobs/"+id, nil, &j); err != nil {
		t.Fatalf("read remediation %s: %v", id, err)
	}
	return &j
}

// waitRemediation polls until the job is in one of want (or fails the test on another end).
func waitRemediation(t *testing.T, c *client.Client, id string, want job.Status) *remJob {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		j := getRemediation(t, c, id)
		if j.Status == want {
			return j
		}
		if j.Status != job.StatusQueued && j.Status != job.StatusRunning && j.Status != job.StatusAwaitingUser || time.Now().After(deadline) {
			t.Fatalf("remediation %s is %s (failure %+v), want %s", id, j.Status, j.Failure, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func timeline(t *testing.T, c *client.Client, id string) []remediation.Event {
	t.Helper()
	var tl struct {
		Data []remediation.Event `json:"data"`
	}
	if err := c.Do(testCtx(t), http.MethodGet, "/api/remediation-jobs/"+id+"/audit", nil, &tl); err != nil {
		t.Fatalf("timeline of %s: %v", id, err)
	}
	return tl.Data
}

// event is the comparable part of a timeline entry.
type event struct{ step, typ, actor, reason string }

func events(tl []remediation.Event) []event {
	out := []event{}
	for i, e := range tl {
		if i > 0 && e.CreatedAt.Before(tl[i-1].CreatedAt) {
			out = append(out, event{"out of order", e.StepName, e.EventType, e.CreatedAt.String()})
		}
		out = append(out, event{e.StepName, e.EventType, e.Actor, e.Reason})
	}
	return out
}

func (e *env) runInstance(t *testing.T) string {
	t.Helper()
	ctx := testCtx(t)
	img, err := e.p.DefaultImage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	run, err := ec2.NewFromConfig(e.p.Config()).RunInstances(ctx, &ec2.RunInstancesInput{ImageId: &img,
		InstanceType: ec2types.InstanceTypeT3Micro, MinCount: awssdk.Int32(1), MaxCount: awssdk.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	id := *run.Instances[0].InstanceId
	e.waitInstance(t, id, "running")
	return id
}

func (e *env) instanceState(t *testing.T, id string) string {
	t.Helper()
	out, err := ec2.NewFromConfig(e.p.Config()).DescribeInstances(testCtx(t), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil || len(out.Reservations) != 1 || len(out.Reservations[0].Instances) != 1 {
		t.Fatalf("describe %s: %v", id, err)
	}
	return string(out.Reservations[0].Instances[0].State.Name)
}

func (e *env) waitInstance(t *testing.T, id, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for s := e.instanceState(t, id); s != want; s = e.instanceState(t, id) {
		if time.Now().After(deadline) {
			t.Fatalf("instance %s is %s, want %s", id, s, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// approvalStep returns the workflow's approval gate.
func approvalStep(t *testing.T, j *remJob) api.RemediationStep {
	t.Helper()
	for _, s := range j.Workflow {
		if s.Kind == remediation.KindApproval {
			return s
		}
	}
	t.Fatalf("workflow %s has no approval step: %+v", j.ID, j.Workflow)
	return api.RemediationStep{}
}

// A stop of an EC2 instance parks at its approval gate with the instance untouched; approved
// (by the step's stable id, or by its name), it stops the instance, validates, completes, and
// its timeline is exactly the five events of the run, the approval naming who and why.
func TestRemediationStopEC2Approved(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, by := range []string{"id", "name"} {
		t.Run("by "+by, func(t *testing.T) {
			id := e.runInstance(t)
			j := e.remediate(t, remediation.ActionStop, remediation.TypeEC2Instance, id)
			if j.Kind != job.KindRemediation || j.Template != "stop-instance@1" {
				t.Fatalf("created %+v", j)
			}
			j = waitRemediation(t, e.s.Client, j.ID, job.StatusAwaitingUser)
			if s := e.instanceState(t, id); s != "running" {
				t.Fatalf("instance is %s before approval", s)
			}
			gate := approvalStep(t, j)
			path := "/api/remediation-jobs/" + j.ID + "/steps-by-id/" + gate.ID + "/approve"
			if by == "name" {
				path = "/api/remediation-jobs/" + j.ID + "/steps/" + gate.Name + "/approve"
			}
			var after remJob
			if err := e.s.Client.Do(testCtx(t), http.MethodPost, path, map[string]string{"reason": "off-hours window"}, &after); err != nil {
				t.Fatalf("approve: %v", err)
			}
			waitRemediation(t, e.s.Client, j.ID, job.StatusCompleted)
			if s := e.instanceState(t, id); s != "stopped" {
				t.Fatalf("instance is %s after the workflow", s)
			}
			// A second decision on a passed gate is refused.
			err := e.s.Client.Do(testCtx(t), http.MethodPost, path, nil, nil)
			if ae, ok := err.(*client.Error); !ok || ae.Status != http.StatusConflict {
				t.Errorf("approve again: %v, want 409", err)
			}
			actor := e.approver(t, j.ID, "remediation-job.approve")
			want := []event{
				{"precondition", "completed", "system", ""},
				{"approval", "created", "system", ""},
				{"approval", "approved", actor, "off-hours window"},
				{"execute", "completed", "system", ""},
				{"validate", "completed", "system", ""},
			}
			if got := events(timeline(t, e.s.Client, j.ID)); !reflect.DeepEqual(got, want) {
				t.Errorf("timeline:\n got %v\nwant %v", got, want)
			}
		})
	}
}

// approver returns the actor of the one audit-log entry of action on the job.
func (e *env) approver(t *testing.T, jobID, action string) string {
	t.Helper()
	var page struct {
		Data []struct {
			Action, Actor, ResourceID string
		} `json:"data"`
	}
	if err := e.s.Client.Do(testCtx(t), http.MethodGet, "/api/audit-logs?limit=200&resourceID="+jobID, nil, &page); err != nil {
		t.Fatalf("audit log: %v", err)
	}
	actors := []string{}
	for _, en := range page.Data {
		if en.Action == action {
			actors = append(actors, en.Actor)
		}
	}
	if len(actors) != 1 {
		t.Fatalf("audit log holds %d %s entries for %s, want 1", len(actors), action, jobID)
	}
	return actors[0]
}

// A rejection cancels the workflow at its gate: the instance stays running, and the timeline
// ends with the rejection.
func TestRemediationRejectTouchesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.runInstance(t)
	j := waitRemediation(t, e.s.Client, e.remediate(t, remediation.ActionStop, remediation.TypeEC2Instance, id).ID, job.StatusAwaitingUser)
	gate := approvalStep(t, j)
	if err := e.s.Client.Do(testCtx(t), http.MethodPost, "/api/remediation-jobs/"+j.ID+"/steps-by-id/"+gate.ID+"/reject",
		map[string]string{"reason": "business hours"}, nil); err != nil {
		t.Fatalf("reject: %v", err)
	}
	end := waitRemediation(t, e.s.Client, j.ID, job.StatusCancelled)
	for _, s := range end.Workflow {
		if s.Kind == remediation.KindExecute && s.Status != job.StepPending {
			t.Errorf("execute is %s after a rejection", s.Status)
		}
	}
	if s := e.instanceState(t, id); s != "running" {
		t.Fatalf("instance is %s after a rejection", s)
	}
	actor := e.approver(t, j.ID, "remediation-job.reject")
	want := []event{
		{"precondition", "completed", "system", ""},
		{"approval", "created", "system", ""},
		{"approval", "rejected", actor, "business hours"},
	}
	if got := events(timeline(t, e.s.Client, j.ID)); !reflect.DeepEqual(got, want) {
		t.Errorf("timeline:\n got %v\nwant %v", got, want)
	}
}

// A pause of an RDS instance, even approved, is refused by pause_service as user_action with
// a hint: the database stays available.
func TestRemediationPauseRDSRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	db := fmt.Sprintf("rem-db-%d", time.Now().UnixNano()%1e9)
	cl := rds.NewFromConfig(e.p.Config())
	if _, err := cl.CreateDBInstance(ctx, &rds.CreateDBInstanceInput{DBInstanceIdentifier: &db, Engine: awssdk.String("postgres"),
		DBInstanceClass: awssdk.String("db.t3.micro"), AllocatedStorage: awssdk.Int32(20), MasterUsername: awssdk.String("admin_user"),
		MasterUserPassword: awssdk.String("not-a-real-password-1")}); err != nil {
		t.Fatal(err)
	}
	j := waitRemediation(t, e.s.Client, e.remediate(t, remediation.ActionPause, remediation.TypeRDSInstance, db).ID, job.StatusAwaitingUser)
	if err := e.s.Client.Do(ctx, http.MethodPost, "/api/remediation-jobs/"+j.ID+"/steps/approval/approve", nil, nil); err != nil {
		t.Fatalf("approve: %v", err)
	}
	deadline := time.Now().Add(time.Minute)
	for j = getRemediation(t, e.s.Client, j.ID); j.Status != job.StatusFailed; j = getRemediation(t, e.s.Client, j.ID) {
		if j.Status == job.StatusCompleted || time.Now().After(deadline) {
			t.Fatalf("pause of an RDS instance ended %s", j.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	f := j.Failure
	if f == nil || f.Class != job.ClassUserAction || f.Code != "DatastorePauseRefused" || f.Step != "pause_service" || f.Retryable || f.FixHint == "" || f.ConsoleURL == "" {
		t.Fatalf("failure: %+v", f)
	}
	out, err := cl.DescribeDBInstances(ctx, &rds.DescribeDBInstancesInput{DBInstanceIdentifier: &db})
	if err != nil || len(out.DBInstances) != 1 || *out.DBInstances[0].DBInstanceStatus != "available" {
		t.Fatalf("the database after a refused pause: %v %v", out, err)
	}
	got := events(timeline(t, e.s.Client, j.ID))
	if n := len(got); n != 4 || got[3].step != "pause_service" || got[3].typ != "failed" {
		t.Errorf("timeline: %v", got)
	}
}
