package gcp

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/client"
	"github.com/groundworkhq/groundwork/internal/job"
	gp "github.com/groundworkhq/groundwork/internal/provider/gcp"
	"github.com/groundworkhq/groundwork/internal/provider/gcp/gcpfake"
	"github.com/groundworkhq/groundwork/internal/store"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// env is one server with a GCP space on its own fake project.
type env struct {
	s     *apptest.Server
	jobs  apptest.Jobs
	cloud *gcpfake.Cloud
	space *store.Space
}

func newEnv(t *testing.T) *env {
	t.Helper()
	cloud := gcpfake.New(t)
	s := apptest.Start(t, app.Options{PollInterval: 50 * time.Millisecond,
		AWS: app.AWSOptions{Poll: 50 * time.Millisecond}, Datastores: app.DatastoreOptions{Poll: 50 * time.Millisecond},
		GCP: app.GCPOptions{Poll: 10 * time.Millisecond}})
	return &env{s: s, jobs: apptest.Jobs{Client: s.Client}, cloud: cloud, space: newSpace(t, s.Client, cloud, nil)}
}

// newSpace makes a GCP account on the fake project, reached through config.endpoints
// alone, and a space on it.
func newSpace(t *testing.T, cl *client.Client, cloud *gcpfake.Cloud, accountConfig map[string]any) *store.Space {
	t.Helper()
	ctx := testCtx(t)
	cfg := map[string]any{"projectId": gcpfake.Project, "endpoints": cloud.Endpoints()}
	for k, v := range accountConfig {
		cfg[k] = v
	}
	var acc store.CloudAccount
	if err := cl.Do(ctx, http.MethodPost, "/api/cloud-accounts", map[string]any{"name": "gcpfake", "provider": "gcp",
		"region": "europe-west1", "authMethod": "none", "config": cfg}, &acc); err != nil {
		t.Fatalf("create cloud account: %v", err)
	}
	var sp store.Space
	if err := cl.Do(ctx, http.MethodPost, "/api/spaces", map[string]any{"name": "gcp", "provider": "gcp",
		"region": "europe-west1", "cloudAccountID": acc.ID}, &sp); err != nil {
		t.Fatalf("create space: %v", err)
	}
	return &sp
}

// labelled lists the resources of the project that carry the job's id (in labels or, for
// compute types without labels, in the description), by kind.
func labelled(cloud *gcpfake.Cloud, jobID string) map[string]int {
	out := map[string]int{}
	for _, r := range cloud.Resources() {
		d, _ := r.Body["description"].(string)
		if r.Labels()[gp.LabelJob] == strings.ToLower(jobID) || gp.JobOfDescription(d) == jobID {
			out[r.Kind]++
		}
	}
	return out
}

// Each family a GCP space offers: the job completes through the server, what it made
// carries its label, a re-run makes nothing new, and DELETE leaves nothing of it.
func TestFamiliesCreateAndTeardown(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		kind, config string
		made         []string // resource kinds the job must have made, one each
	}{
		"registry": {kind: "registry", config: `{"name":"team-images"}`, made: []string{"artifactregistry.repository"}},
		"dns_zone": {kind: "dns_zone", config: `{"domain":"shop.example.com"}`,
			made: []string{"dns#managedZone"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			j := e.jobs.Create(t, e.space.ID, tc.kind, tc.config)
			j = e.jobs.WaitStatus(t, j.ID, job.StatusCompleted)
			made := labelled(e.cloud, j.ID)
			for _, kind := range tc.made {
				if made[kind] != 1 {
					t.Fatalf("after create the project holds %v of the job; want one %s", made, kind)
				}
			}
			e.jobs.Teardown(t, j.ID)
			if left := labelled(e.cloud, j.ID); len(left) > 0 {
				t.Fatalf("after teardown the project still holds %v of the job", left)
			}
		})
	}
}

// Each class of Google refusal reaches the job's failure with its code, its fix and a Cloud
// Console link; a passing one (503) is retried and the job completes.
func TestErrorClassesEndToEnd(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		inject   func(c *gcpfake.Cloud)
		failCode string
		hint     string // the fix hint holds it
		console  string // the console URL holds it
	}{
		"api not enabled": {inject: func(c *gcpfake.Cloud) { c.Disable(gcpfake.HostDNS) },
			failCode: "ApiNotEnabled", hint: "gcloud services enable dns.googleapis.com", console: "apis/library/dns.googleapis.com"},
		"permission denied": {inject: func(c *gcpfake.Cloud) { c.Deny(gcpfake.HostDNS, "/managedZones", "dns.managedZones.create") },
			failCode: "PermissionDenied", hint: "roles", console: "iam-admin/iam"},
		"quota": {inject: func(c *gcpfake.Cloud) {
			c.Fail(gcpfake.HostDNS, http.MethodPost, "/managedZones", -1, http.StatusForbidden, "quotaExceeded")
		}, failCode: "QuotaExceeded", hint: "quota", console: "iam-admin/quotas"},
		"billing": {inject: func(c *gcpfake.Cloud) {
			c.Fail(gcpfake.HostDNS, http.MethodPost, "/managedZones", -1, http.StatusForbidden, "billingNotEnabled")
		}, failCode: "BillingDisabled", hint: "billing", console: "billing/linkedaccount"},
		"unavailable then fine": {inject: func(c *gcpfake.Cloud) {
			c.Fail(gcpfake.HostDNS, http.MethodPost, "/managedZones", 2, http.StatusServiceUnavailable, "backendError")
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			tc.inject(e.cloud)
			j := e.jobs.Create(t, e.space.ID, "dns_zone", `{"domain":"errors.example.com"}`)
			if tc.failCode == "" {
				e.jobs.WaitStatus(t, j.ID, job.StatusCompleted)
				return
			}
			j = e.jobs.WaitStatus(t, j.ID, job.StatusFailed)
			f := j.Failure
			if f == nil || f.Class != job.ClassUserAction || f.Code != tc.failCode || !strings.Contains(f.FixHint, tc.hint) ||
				!strings.HasPrefix(f.ConsoleURL, "https://console.cloud.google.com/"+tc.console) || !strings.Contains(f.ConsoleURL, "project="+gcpfake.Project) {
				t.Fatalf("failure %+v; want user_action %s with a hint holding %q and a console URL at %s", f, tc.failCode, tc.hint, tc.console)
			}
		})
	}
}

// A GCP space refuses what the module does not offer with the reason, at admission.
func TestVMPoolOnGCPIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var j job.Job
	err := e.s.Client.Do(testCtx(t), http.MethodPost, "/api/provisioning-jobs", map[string]any{"spaceID": e.space.ID,
		"kind": "vm_pool", "config": map[string]any{"name": "web", "instanceType": "e2-small", "min": 1, "max": 1}}, &j)
	var ce *client.Error
	if err == nil || !errors.As(err, &ce) || ce.Status != http.StatusBadRequest || !strings.Contains(ce.Error(), "not available yet") {
		t.Fatalf("vm_pool on a GCP space: %v; want 400 saying why", err)
	}
}
