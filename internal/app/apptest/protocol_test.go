package apptest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/api"
	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/client"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/remote"
	"github.com/groundworkhq/groundwork/internal/protocol"
	"github.com/groundworkhq/groundwork/internal/protocol/jobbackend"
	"github.com/groundworkhq/groundwork/internal/protocol/protocoltest"
	"github.com/groundworkhq/groundwork/internal/testenv/pgtest"
)

// waitJob polls the job until cond holds, failing the test at the deadline.
func waitJob(t *testing.T, c *client.Client, id string, d time.Duration, what string, cond func(*job.Job) bool) *job.Job {
	t.Helper()
	deadline := time.Now().Add(d)
	var j job.Job
	for {
		if err := c.Do(context.Background(), http.MethodGet, "/api/provisioning-jobs/"+id, nil, &j); err != nil {
			t.Fatalf("read job %s: %v", id, err)
		}
		if cond(&j) {
			return &j
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(j, "", "  ")
			t.Fatalf("job %s: not %s within %s:\n%s", id, what, d, b)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition with a deadline
	}
}

func step(j *job.Job, name string) job.StepRecord {
	if i := j.StepIndex(name); i >= 0 {
		return j.Steps[i]
	}
	return job.StepRecord{}
}

func apiError(t *testing.T, err error, status int) *client.Error {
	t.Helper()
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != status {
		t.Fatalf("err = %v, want HTTP %d", err, status)
	}
	return ce
}

// TestRemoteProvisionerEndToEnd runs a job for a pair held by the example provisioner,
// started as a process and registered over the API, and kills the provisioner while the job
// waits on its operation: once it is back, the job completes.
func TestRemoteProvisionerEndToEnd(t *testing.T) {
	t.Parallel()
	proc := protocoltest.StartExample(t, protocoltest.BuildExample(t), 2*time.Second)
	gw := apptest.Start(t, app.Options{Protocol: app.ProtocolOptions{PollInterval: 100 * time.Millisecond}})
	ctx := context.Background()
	space := gw.Space(t, "e2e")
	bucketJob := map[string]any{"spaceID": space.ID, "kind": "managed-resource/bucket", "name": "orders",
		"config": map[string]any{"mode": "0750", "description": "orders"}}

	// Before anyone holds the pair, a job for it is refused, saying what to do.
	err := gw.Client.Do(ctx, http.MethodPost, "/api/provisioning-jobs", bucketJob, nil)
	if ce := apiError(t, err, http.StatusBadRequest); !strings.Contains(ce.Detail, "no provisioner holds managed-resource/bucket") {
		t.Fatalf("job before registration: %v", err)
	}

	var prv protocol.Provisioner
	reg := protocol.RegisterInput{Name: "buckets", URL: proc.URL(), Pairs: []catalog.Pair{catalog.PairBucket}}
	if err := gw.Client.Do(ctx, http.MethodPost, "/api/provisioners", reg, &prv); err != nil {
		t.Fatalf("register: %v", err)
	}
	if !strings.HasPrefix(prv.ID, "prv_") || prv.BuiltIn || len(prv.Pairs) != 1 {
		t.Fatalf("registered %+v", prv)
	}

	var created job.Job
	if err := gw.Client.Do(ctx, http.MethodPost, "/api/provisioning-jobs", bucketJob, &created); err != nil {
		t.Fatalf("create job: %v", err)
	}
	if created.Family != "managed-resource/bucket" || len(created.Steps) != 4 {
		t.Fatalf("job laid out as %s with %d steps, want the remote pipeline's 4", created.Family, len(created.Steps))
	}

	// Mid-operation: the provisioner accepted the apply and the job is polling it.
	waitJob(t, gw.Client, created.ID, 30*time.Second, "waiting on the remote operation", func(j *job.Job) bool {
		return step(j, "apply").Status == job.StepDone && step(j, "await").Status != job.StepDone
	})
	proc.Kill()
	down := waitJob(t, gw.Client, created.ID, 30*time.Second, "retrying the unreachable provisioner", func(j *job.Job) bool {
		return step(j, "await").Error != ""
	})
	if down.Status == job.StatusFailed {
		t.Fatalf("a provisioner that is down failed the job at once: %+v", down.Failure)
	}
	proc.Start()
	done := waitJob(t, gw.Client, created.ID, 60*time.Second, "completed", func(j *job.Job) bool {
		return j.Status == job.StatusCompleted || j.Status == job.StatusFailed
	})
	if done.Status != job.StatusCompleted {
		t.Fatalf("job ended %s: %+v", done.Status, done.Failure)
	}
	fi, err := os.Stat(proc.BucketDir("orders"))
	if err != nil || fi.Mode().Perm() != 0o750 {
		t.Fatalf("bucket after the job: %v %v, want a directory with mode 0750", fi, err)
	}
	var infra map[string]json.RawMessage
	if err := json.Unmarshal(done.Infra, &infra); err != nil || infra[remote.KeyOutputs] == nil || infra[remote.KeyResources] == nil {
		t.Fatalf("infra %s: want the provisioner's outputs and resources recorded", done.Infra)
	}

	// Removing the provisioner frees its pair; the built-in one cannot be removed. The job it
	// served is still live, so the removal is refused (409) unless forced.
	err = gw.Client.Do(ctx, http.MethodDelete, "/api/provisioners/builtin", nil, nil)
	apiError(t, err, http.StatusConflict)
	apiError(t, gw.Client.Do(ctx, http.MethodDelete, "/api/provisioners/"+prv.ID, nil, nil), http.StatusConflict)
	if err := gw.Client.Do(ctx, http.MethodDelete, "/api/provisioners/"+prv.ID+"?force=true", nil, nil); err != nil {
		t.Fatalf("remove: %v", err)
	}
	apiError(t, gw.Client.Do(ctx, http.MethodGet, "/api/provisioners/"+prv.ID, nil, nil), http.StatusNotFound)
}

// TestProvisionerRegistration covers the API's refusals, table-driven: each pair has exactly
// one holder, and a refusal says which pair and who holds it.
func TestProvisionerRegistration(t *testing.T) {
	t.Parallel()
	proc := protocoltest.StartExample(t, protocoltest.BuildExample(t), 0)
	gw := apptest.Start(t, app.Options{})
	ctx := context.Background()
	// A remote that does not answer is refused, and holds nothing afterwards.
	down := protocol.RegisterInput{Name: "down", URL: "http://127.0.0.1:1", Pairs: []catalog.Pair{catalog.PairBucket}}
	if ce := apiError(t, gw.Client.Do(ctx, http.MethodPost, "/api/provisioners", down, nil), http.StatusUnprocessableEntity); !strings.Contains(ce.Error(), "url") {
		t.Fatalf("unreachable remote: %v, want the url named", ce)
	}
	var first protocol.Provisioner
	if err := gw.Client.Do(ctx, http.MethodPost, "/api/provisioners",
		protocol.RegisterInput{Name: "buckets", URL: proc.URL(), Pairs: []catalog.Pair{catalog.PairBucket}}, &first); err != nil {
		t.Fatalf("register: %v", err)
	}
	cases := map[string]struct {
		in     protocol.RegisterInput
		status int
		want   []string // substrings of the detail and field messages
	}{
		"pair held by a registered provisioner": {
			in:     protocol.RegisterInput{Name: "more-buckets", URL: proc.URL(), Pairs: []catalog.Pair{catalog.PairBucket}},
			status: http.StatusConflict, want: []string{"managed-resource/bucket", `"buckets"`, first.ID},
		},
		"pair held by the built-in provisioner": {
			in:     protocol.RegisterInput{Name: "registries", URL: proc.URL(), Pairs: []catalog.Pair{catalog.PairRegistry}},
			status: http.StatusConflict, want: []string{"managed-resource/registry", `"groundwork"`, "builtin"},
		},
		"no name, not a URL": {
			in:     protocol.RegisterInput{URL: "ftp://x", Pairs: []catalog.Pair{catalog.PairBucket}},
			status: http.StatusUnprocessableEntity, want: []string{"name", "url"},
		},
		"pair not in the catalog": {
			in:     protocol.RegisterInput{Name: "x", URL: proc.URL(), Pairs: []catalog.Pair{{Kind: catalog.CategoryTool, Type: "nonesuch"}}},
			status: http.StatusUnprocessableEntity, want: []string{"pairs[0]", "tool/nonesuch"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ce := apiError(t, gw.Client.Do(ctx, http.MethodPost, "/api/provisioners", tc.in, nil), tc.status)
			text := ce.Error()
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("refusal %q does not mention %q", text, w)
				}
			}
		})
	}
	t.Run("list shows the built-in provisioner first", func(t *testing.T) {
		t.Parallel()
		var out struct {
			Data []protocol.Provisioner `json:"data"`
		}
		if err := gw.Client.Do(ctx, http.MethodGet, "/api/provisioners", nil, &out); err != nil {
			t.Fatal(err)
		}
		if len(out.Data) < 2 || !out.Data[0].BuiltIn || out.Data[1].ID != first.ID {
			t.Fatalf("list = %+v", out.Data)
		}
	})
}

// dirRegistry is a registry family whose "repository" is a directory: a real resource the
// test can change behind Groundwork's back, so that inspect has drift to find.
type dirRegistry struct{ root string }

const repoMode fs.FileMode = 0o750

func (d dirRegistry) Family() job.Family                       { return job.FamilyRegistry }
func (d dirRegistry) LeaseTTL() time.Duration                  { return time.Minute }
func (d dirRegistry) Validate(context.Context, *job.Job) error { return nil }
func (d dirRegistry) dir(j *job.Job) string                    { return filepath.Join(d.root, j.SpaceID, j.Name) }

func (d dirRegistry) Steps(*job.Job) []pipeline.Step {
	return []pipeline.Step{{
		Name: "create-repository",
		Do: func(_ context.Context, r *pipeline.Run) (pipeline.Result, error) {
			dir := d.dir(r.Job)
			if err := os.MkdirAll(dir, repoMode); err != nil {
				return pipeline.Result{}, fault.System(err)
			}
			if err := os.Chmod(dir, repoMode); err != nil {
				return pipeline.Result{}, fault.System(err)
			}
			// Like a cloud repository, it takes a moment to come up: the step waits (without
			// holding a worker) until then, so an apply repeated at once finds the work going on.
			var readyAt time.Time
			if ok, err := r.Infra("readyAt", &readyAt); err != nil {
				return pipeline.Result{}, fault.System(err)
			} else if !ok {
				readyAt = time.Now().Add(300 * time.Millisecond)
			}
			if time.Now().Before(readyAt) {
				return pipeline.Wait(time.Until(readyAt), "repository coming up", map[string]any{"path": dir, "readyAt": readyAt}), nil
			}
			return pipeline.Done(map[string]any{"path": dir}), nil
		},
		Undo: func(_ context.Context, r *pipeline.Run) (pipeline.Result, error) {
			if err := os.RemoveAll(d.dir(r.Job)); err != nil {
				return pipeline.Result{}, fault.System(err)
			}
			return pipeline.Done(map[string]any{"path": nil}), nil
		},
	}}
}

// Observe reads the directory as it is now.
func (d dirRegistry) Observe(_ context.Context, j *job.Job) ([]protocol.Resource, []protocol.Drift, error) {
	dir := d.dir(j)
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return []protocol.Resource{{Resource: j.Name, Type: "directory", ID: dir}},
			[]protocol.Drift{{Resource: j.Name, Field: "exists", Applied: true, Actual: false}}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	mode := fmt.Sprintf("%04o", fi.Mode().Perm())
	res := []protocol.Resource{{Resource: j.Name, Type: "directory", ID: dir, Exists: true, Properties: map[string]any{"mode": mode}}}
	if fi.Mode().Perm() != repoMode {
		return res, []protocol.Drift{{Resource: j.Name, Field: "mode", Applied: fmt.Sprintf("%04o", repoMode), Actual: mode}}, nil
	}
	return res, nil, nil
}

// TestGroundworkServesTheProtocol runs the conformance suite against Groundwork's own
// /provisioner/ server: every apply is a job in the named space, run by the engine, on each
// store (the request keys that make applies idempotent live there).
func TestGroundworkServesTheProtocol(t *testing.T) {
	t.Parallel()
	stores := map[string]func(t *testing.T) string{
		"sqlite":   func(*testing.T) string { return "" },
		"postgres": func(t *testing.T) string { return pgtest.NewDatabase(t) },
	}
	for name, database := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			repos := dirRegistry{root: t.TempDir()}
			gw := apptest.Start(t, app.Options{
				Database:  database(t),
				Pipelines: []pipeline.Pipeline{repos},
				Protocol:  app.ProtocolOptions{Observers: map[job.Family]jobbackend.Observer{job.FamilyRegistry: repos}},
			})
			space := gw.Space(t, "conformance")
			hc := &http.Client{Timeout: 10 * time.Second, Transport: &apptest.Transport{Token: gw.Token,
				Headers: map[string]string{api.SpaceHeader: space.ID}}}
			protocoltest.Run(t, protocoltest.Target{
				BaseURL:         gw.URL + "/provisioner",
				Pair:            catalog.PairRegistry,
				Settings:        json.RawMessage(`{"name":"images"}`),
				FailingSettings: json.RawMessage(`{"name":"Not A Name"}`),
				HTTPClient:      hc,
				Drift: func(t testing.TB, application string) {
					if err := os.Chmod(filepath.Join(repos.root, space.ID, application), 0o700); err != nil {
						t.Fatalf("change the repository behind Groundwork's back: %v", err)
					}
				},
			})
		})
	}
}

// TestProtocolCallsNeedTokenAndSpace checks the guard in front of /provisioner/.
func TestProtocolCallsNeedTokenAndSpace(t *testing.T) {
	t.Parallel()
	gw := apptest.Start(t, app.Options{Pipelines: []pipeline.Pipeline{dirRegistry{root: t.TempDir()}}})
	space := gw.Space(t, "guarded")
	body := `{"kind":"managed-resource","type":"registry","application":"a","settings":{"name":"images"}}`
	cases := map[string]struct {
		method, path string
		headers      map[string]string
		status       int
	}{
		"healthz is open":          {"GET", "/provisioner/healthz", nil, http.StatusOK},
		"no token":                 {"POST", "/provisioner/plan", map[string]string{api.SpaceHeader: space.ID}, http.StatusUnauthorized},
		"wrong token":              {"POST", "/provisioner/plan", map[string]string{"Authorization": "Bearer nope", api.SpaceHeader: space.ID}, http.StatusUnauthorized},
		"no space":                 {"POST", "/provisioner/apply", map[string]string{"Authorization": "Bearer " + gw.Token}, http.StatusBadRequest},
		"token and space":          {"POST", "/provisioner/plan", map[string]string{"Authorization": "Bearer " + gw.Token, api.SpaceHeader: space.ID}, http.StatusOK},
		"unknown space is a fail":  {"POST", "/provisioner/apply", map[string]string{"Authorization": "Bearer " + gw.Token, api.SpaceHeader: "spc_nope"}, http.StatusOK},
		"unknown operation is 404": {"GET", "/provisioner/operations/job_nope", map[string]string{"Authorization": "Bearer " + gw.Token}, http.StatusNotFound},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var rd *strings.Reader
			if tc.method == "POST" {
				rd = strings.NewReader(body)
			} else {
				rd = strings.NewReader("")
			}
			req, err := http.NewRequest(tc.method, gw.URL+tc.path, rd)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var ans protocol.ApplyAnswer
			_ = json.NewDecoder(resp.Body).Decode(&ans)
			if resp.StatusCode != tc.status {
				t.Fatalf("HTTP %d, want %d (%+v)", resp.StatusCode, tc.status, ans)
			}
			if name == "unknown space is a fail" && (ans.Outcome != protocol.OutcomeFailed || ans.Code != "UnknownSpace") {
				t.Fatalf("apply in an unknown space: %+v, want failed with code UnknownSpace", ans)
			}
		})
	}
}

// An apply through /provisioner/ is a job like any other: it shows in the jobs API, its
// creation and teardown are in the audit log, marked as coming through the protocol.
func TestProtocolApplyIsAnAuditedJob(t *testing.T) {
	t.Parallel()
	repos := dirRegistry{root: t.TempDir()}
	gw := apptest.Start(t, app.Options{Pipelines: []pipeline.Pipeline{repos}})
	space := gw.Space(t, "audited")
	pc, err := protocol.NewClient(gw.URL+"/provisioner", protocol.ClientOptions{HTTPClient: &http.Client{
		Timeout: 10 * time.Second, Transport: &apptest.Transport{Token: gw.Token, Headers: map[string]string{api.SpaceHeader: space.ID}}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := &protocol.Request{Kind: catalog.PairRegistry.Kind, Type: catalog.PairRegistry.Type, Application: "images",
		Settings: json.RawMessage(`{"name":"images"}`)}
	ans, err := pc.Apply(ctx, req)
	if err != nil || ans.Outcome != protocol.OutcomeAccepted {
		t.Fatalf("apply: %+v, %v", ans, err)
	}
	j := waitJob(t, gw.Client, ans.OperationID, 30*time.Second, "completed", func(j *job.Job) bool { return j.Status == job.StatusCompleted })
	if j.Name != "images" || j.SpaceID != space.ID || j.Family != job.FamilyRegistry {
		t.Fatalf("job %+v: want registry job images in space %s", j, space.ID)
	}
	del := *req
	del.Ensure = protocol.EnsureAbsent
	if ans, err := pc.Apply(ctx, &del); err != nil || ans.OperationID != j.ID {
		t.Fatalf("apply absent: %+v, %v; want the teardown of %s", ans, err, j.ID)
	}
	waitJob(t, gw.Client, j.ID, 30*time.Second, "deleted", func(j *job.Job) bool { return j.Status == job.StatusDeleted })
	if _, err := os.Stat(repos.dir(j)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("repository after teardown: %v, want it gone", err)
	}
	// The same applies again, keyed by the same content: the repository is made anew by a new
	// job, and deleted again, not answered from the finished jobs of the first round.
	again, err := pc.Apply(ctx, req)
	if err != nil || again.OperationID == "" || again.OperationID == j.ID {
		t.Fatalf("apply after deletion: %+v, %v; want a new job, not %s", again, err, j.ID)
	}
	j2 := waitJob(t, gw.Client, again.OperationID, 30*time.Second, "completed", func(j *job.Job) bool { return j.Status == job.StatusCompleted })
	if _, err := os.Stat(repos.dir(j2)); err != nil {
		t.Fatalf("repository made again: %v", err)
	}
	if ans, err := pc.Apply(ctx, &del); err != nil || ans.OperationID != j2.ID {
		t.Fatalf("apply absent again: %+v, %v; want the teardown of %s", ans, err, j2.ID)
	}
	waitJob(t, gw.Client, j2.ID, 30*time.Second, "deleted", func(j *job.Job) bool { return j.Status == job.StatusDeleted })
	if ans, err := pc.Apply(ctx, &del); err != nil || ans.OperationID != j2.ID || ans.Outcome != protocol.OutcomeSucceeded {
		t.Fatalf("apply absent once more: %+v, %v; want the same finished deletion %s", ans, err, j2.ID)
	}
	var log struct {
		Data []struct {
			Action     string          `json:"action"`
			ResourceID string          `json:"resourceID"`
			Metadata   json.RawMessage `json:"metadata"`
		} `json:"data"`
	}
	if err := gw.Client.Do(ctx, http.MethodGet, "/api/audit-logs", nil, &log); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range log.Data {
		if e.ResourceID == j.ID && strings.Contains(string(e.Metadata), `"via":"provisioner-protocol"`) {
			seen[e.Action] = true
		}
	}
	if !seen["provisioning-job.create"] || !seen["provisioning-job.delete"] {
		t.Fatalf("audit entries for %s through the protocol: %v, want create and delete", j.ID, seen)
	}
}

// A grant on one space lets a user call Groundwork's provisioner in that space only, and a
// viewer may plan but not apply.
func TestProtocolHonoursScopedGrants(t *testing.T) {
	t.Parallel()
	gw := apptest.Start(t, app.Options{Pipelines: []pipeline.Pipeline{dirRegistry{root: t.TempDir()}}})
	ctx := context.Background()
	mine, other := gw.Space(t, "mine"), gw.Space(t, "other")
	token := func(email, role string) string {
		t.Helper()
		if err := gw.Client.Do(ctx, http.MethodPost, "/api/users", map[string]string{"email": email}, nil); err != nil {
			t.Fatalf("create user: %v", err)
		}
		if err := gw.Client.Do(ctx, http.MethodPost, "/api/role-assignments",
			map[string]string{"email": email, "roleID": role, "scope": "space:" + mine.ID}, nil); err != nil {
			t.Fatalf("assign %s on %s: %v", role, mine.ID, err)
		}
		var tok struct {
			Secret string `json:"secret"`
		}
		if err := gw.Client.Do(ctx, http.MethodPost, "/api/tokens", map[string]string{"name": "t", "email": email}, &tok); err != nil {
			t.Fatalf("token: %v", err)
		}
		return tok.Secret
	}
	editor, viewer := token("editor@example.com", "role_editor"), token("viewer@example.com", "role_viewer")
	body := `{"kind":"managed-resource","type":"registry","application":"scoped","settings":{"name":"images"}}`
	cases := map[string]struct {
		token, call, space string
		status             int
	}{
		"editor plans in its space":    {editor, "plan", mine.ID, http.StatusOK},
		"editor applies in its space":  {editor, "apply", mine.ID, http.StatusAccepted},
		"editor plans elsewhere":       {editor, "plan", other.ID, http.StatusForbidden},
		"editor applies elsewhere":     {editor, "apply", other.ID, http.StatusForbidden},
		"viewer plans in its space":    {viewer, "plan", mine.ID, http.StatusOK},
		"viewer may not apply":         {viewer, "apply", mine.ID, http.StatusForbidden},
		"space of nobody is not found": {editor, "plan", "spc_nope", http.StatusNotFound},
		"admin plans in any space":     {gw.Token, "plan", other.ID, http.StatusOK},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			req, err := http.NewRequest(http.MethodPost, gw.URL+"/provisioner/"+tc.call, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+tc.token)
			req.Header.Set(api.SpaceHeader, tc.space)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("HTTP %d, want %d", resp.StatusCode, tc.status)
			}
		})
	}
}

// The same apply sent at once, several times, makes one job: the request key is claimed in the
// store, and the calls that lose answer the winner's operation (their drafts are cancelled).
func TestConcurrentAppliesMakeOneJob(t *testing.T) {
	t.Parallel()
	stores := map[string]func(t *testing.T) string{
		"sqlite":   func(*testing.T) string { return "" },
		"postgres": func(t *testing.T) string { return pgtest.NewDatabase(t) },
	}
	for name, database := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			gw := apptest.Start(t, app.Options{Database: database(t), Pipelines: []pipeline.Pipeline{dirRegistry{root: t.TempDir()}}})
			space := gw.Space(t, "race")
			pc, err := protocol.NewClient(gw.URL+"/provisioner", protocol.ClientOptions{HTTPClient: &http.Client{
				Timeout: 10 * time.Second, Transport: &apptest.Transport{Token: gw.Token, Headers: map[string]string{api.SpaceHeader: space.ID}}}})
			if err != nil {
				t.Fatal(err)
			}
			const n = 6
			ids := make(chan string, n)
			errs := make(chan error, n)
			for range n {
				go func() {
					ans, err := pc.Apply(context.Background(), &protocol.Request{Kind: catalog.PairRegistry.Kind, Type: catalog.PairRegistry.Type,
						Application: "raced", RequestID: "same-key", Settings: json.RawMessage(`{"name":"images"}`)})
					if err != nil {
						errs <- err
						return
					}
					ids <- ans.OperationID
				}()
			}
			seen := map[string]int{}
			for range n {
				select {
				case id := <-ids:
					seen[id]++
				case err := <-errs:
					t.Fatalf("apply: %v", err)
				}
			}
			if len(seen) != 1 {
				t.Fatalf("%d concurrent applies of one key answered operations %v, want one", n, seen)
			}
			var list struct {
				Data []job.Job `json:"data"`
			}
			if err := gw.Client.Do(context.Background(), http.MethodGet, "/api/provisioning-jobs?spaceID="+space.ID, nil, &list); err != nil {
				t.Fatal(err)
			}
			live := 0
			for _, j := range list.Data {
				if j.Status != job.StatusCancelled {
					live++
				}
			}
			if live != 1 {
				t.Fatalf("%d live jobs for one key (of %d), want 1", live, len(list.Data))
			}
		})
	}
}

// awsOnlyRegistry refuses other providers at Validate, as the AWS families do.
type awsOnlyRegistry struct{ dirRegistry }

type spaceFieldError struct{}

func (spaceFieldError) Error() string { return "registry is not available on the local provider" }
func (spaceFieldError) FieldErrors() []api.FieldError {
	return []api.FieldError{{Field: "spaceID", Rule: "provider", Message: "registry is not available on the local provider"}}
}

func (awsOnlyRegistry) Validate(_ context.Context, j *job.Job) error {
	if j.Provider != "aws" {
		return spaceFieldError{}
	}
	return nil
}

// Plan, apply and inspect agree: a space that does not exist is UnknownSpace for all three, a
// space whose provider cannot serve the pair is UnsupportedProvider for all three (not
// "create" from plan, not UnknownSpace from apply), and no job is left behind.
func TestProtocolCallsAgree(t *testing.T) {
	t.Parallel()
	gw := apptest.Start(t, app.Options{Pipelines: []pipeline.Pipeline{awsOnlyRegistry{dirRegistry{root: t.TempDir()}}}})
	local := gw.Space(t, "local-space")
	body := `{"kind":"managed-resource","type":"registry","application":"images","settings":{"name":"images"}}`
	for _, tc := range []struct{ space, code string }{{"spc_nope", "UnknownSpace"}, {local.ID, "UnsupportedProvider"}} {
		for _, call := range []string{"plan", "apply", "inspect"} {
			t.Run(tc.code+"/"+call, func(t *testing.T) {
				t.Parallel()
				req, err := http.NewRequest("POST", gw.URL+"/provisioner/"+call, strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Authorization", "Bearer "+gw.Token)
				req.Header.Set(api.SpaceHeader, tc.space)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var ans struct {
					Outcome protocol.Outcome `json:"outcome"`
					Code    string           `json:"code"`
					Reason  string           `json:"reason"`
				}
				if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != http.StatusOK || ans.Outcome != protocol.OutcomeFailed || ans.Code != tc.code {
					t.Fatalf("%s in %s: HTTP %d %+v, want failed %s", call, tc.space, resp.StatusCode, ans, tc.code)
				}
			})
		}
	}
	t.Cleanup(func() {
		c := client.New(gw.URL, gw.Token)
		var page struct {
			Data []job.Job `json:"data"`
		}
		if err := c.Do(context.Background(), "GET", "/api/provisioning-jobs", nil, &page); err != nil || len(page.Data) != 0 {
			t.Errorf("refused calls left jobs: %v %+v", err, page.Data)
		}
	})
}
