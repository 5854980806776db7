package api

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/auth"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
	"github.com/groundworkhq/groundwork/internal/rbac"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/store/sqlite"
)

type streamEnv struct {
	url, token, tokenID, jobID string
	hub                        *Hub
}

// newStreamEnv serves a store with one admin holding one stored token, one space and one draft
// job (a draft never settles, so its stream stays open), over a server whose WriteTimeout is
// writeTimeout.
func newStreamEnv(t *testing.T, writeTimeout time.Duration) *streamEnv {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	const org, email = "org_s", "ops@s.example.com"
	now := time.Now()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.CreateOrg(ctx, &store.Org{ID: org, Name: org, CreatedAt: now}))
	must(st.CreateUser(ctx, &store.User{OrgID: org, Email: email, CreatedAt: now}))
	must(st.CreateAssignment(ctx, &rbac.Assignment{ID: "ras_1", OrgID: org, Email: email, RoleID: rbac.RoleAdmin, CreatedAt: now}))
	secret, err := auth.NewSecret()
	must(err)
	must(st.CreateToken(ctx, &store.Token{ID: "tok_s", OrgID: org, Email: email, Name: "s", Hash: auth.Hash(secret), CreatedAt: now}))
	must(st.CreateSpace(ctx, &store.Space{ID: "spc_s", OrgID: org, Name: "s", Provider: "local", Region: "local",
		SpaceType: "kubernetes", Status: "ready", CreatedAt: now}))
	j, err := st.CreateJob(ctx, &store.CreateJobParams{Now: now, Job: &job.Job{ID: "job_s", OrgID: org, SpaceID: "spc_s",
		Kind: job.KindProvisioning, Family: testfamily.Family, Provider: "local", Mode: job.ModeCreate,
		Config: json.RawMessage(`{}`), Infra: json.RawMessage(`{}`), Status: job.StatusDraft, Phase: job.PhaseApply,
		Steps: []job.StepRecord{{Name: "step1", Status: job.StepPending}}, LeaseTTL: time.Minute, NextRunAt: now}})
	must(err)
	reg, err := pipeline.NewRegistry(&testfamily.Pipeline{N: 1})
	must(err)
	hub := NewHub()
	hub.Keepalive = 100 * time.Millisecond
	srv := httptest.NewUnstartedServer(New(Config{Store: st, Pipelines: reg, Hub: hub,
		Auth: TokenAuth{Auth: &auth.Authenticator{Store: st}}}))
	srv.Config.WriteTimeout = writeTimeout
	srv.Start()
	t.Cleanup(srv.Close)
	return &streamEnv{url: srv.URL, token: secret, tokenID: "tok_s", jobID: j.ID, hub: hub}
}

func (e *streamEnv) do(t *testing.T, method, path, body string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, e.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// stream opens the job's event stream and returns its events ("job" data lines) as they
// arrive; the channel closes when the stream ends.
func (e *streamEnv) stream(t *testing.T) (<-chan string, *http.Response) {
	t.Helper()
	resp := e.do(t, "GET", "/api/provisioning-jobs/"+e.jobID+"/events", "")
	if resp.StatusCode != 200 {
		return nil, resp
	}
	t.Cleanup(func() { resp.Body.Close() })
	events := make(chan string, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events <- data
			}
		}
	}()
	return events, resp
}

func next(t *testing.T, events <-chan string, within time.Duration) (string, bool) {
	t.Helper()
	select {
	case ev, ok := <-events:
		return ev, ok
	case <-time.After(within):
		t.Fatalf("no event and no end within %s", within)
	}
	return "", false
}

// A stream outlives the server's WriteTimeout: it sets its own deadline per write, so a
// change committed long after the timeout still reaches the client.
func TestStreamOutlivesWriteTimeout(t *testing.T) {
	t.Parallel()
	const writeTimeout = 300 * time.Millisecond
	e := newStreamEnv(t, writeTimeout)
	events, _ := e.stream(t)
	if _, ok := next(t, events, 5*time.Second); !ok {
		t.Fatal("no first event")
	}
	<-time.After(3 * writeTimeout) // the condition under test: the server's write timeout has passed
	resp := e.do(t, "PATCH", "/api/provisioning-jobs/"+e.jobID, `{"name":"late"}`)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("rename: %d", resp.StatusCode)
	}
	ev, ok := next(t, events, 5*time.Second)
	if !ok || !strings.Contains(ev, `"name":"late"`) {
		t.Fatalf("after the write timeout the stream gave %q (open %v)", ev, ok)
	}
}

// Revoking the token ends the streams it opened.
func TestStreamEndsWhenTokenIsRevoked(t *testing.T) {
	t.Parallel()
	e := newStreamEnv(t, time.Minute)
	events, _ := e.stream(t)
	if _, ok := next(t, events, 5*time.Second); !ok {
		t.Fatal("no first event")
	}
	resp := e.do(t, "DELETE", "/api/tokens/"+e.tokenID, "")
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("revoke: %d", resp.StatusCode)
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-events:
			if !ok {
				return // ended
			}
		case <-deadline:
			t.Fatal("the stream is still open 5s after its token was revoked")
		}
	}
}

// One token may hold MaxStreams streams; the next is a 429 problem, and closing one frees a slot.
func TestStreamCapPerToken(t *testing.T) {
	t.Parallel()
	e := newStreamEnv(t, time.Minute)
	e.hub.MaxStreams = 2
	var open []*http.Response
	for i := range 2 {
		events, resp := e.stream(t)
		if events == nil {
			t.Fatalf("stream %d: %d", i, resp.StatusCode)
		}
		if _, ok := next(t, events, 5*time.Second); !ok {
			t.Fatalf("stream %d gave nothing", i)
		}
		open = append(open, resp)
	}
	events, resp := e.stream(t)
	if events != nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("third stream: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	resp.Body.Close()
	open[0].Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		events, resp := e.stream(t)
		if events != nil {
			break
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatalf("no slot freed after closing a stream: %d", resp.StatusCode)
		}
		<-time.After(20 * time.Millisecond)
	}
}
