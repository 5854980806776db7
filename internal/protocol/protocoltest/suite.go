// Package protocoltest is the provisioner protocol's conformance suite: Run drives any
// provisioner (Groundwork's own server, the example provisioner, a reference in-process one)
// over HTTP and checks the promises of docs/provisioner-protocol.md. It also holds Reference, an in-memory
// provisioner that passes the suite.
package protocoltest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/protocol"
)

// Target describes the provisioner under test.
type Target struct {
	// BaseURL is where the protocol is served: BaseURL + "/plan" etc.
	BaseURL string
	// Pair is a pair the provisioner handles.
	Pair catalog.Pair
	// WrongPair is one it does not handle (default consumed-resource/conformance-unhandled).
	WrongPair catalog.Pair
	// Settings are valid settings for Pair.
	Settings json.RawMessage
	// FailingSettings make the work fail (refused settings will do).
	FailingSettings json.RawMessage
	// Drift changes the resource applied for application behind the provisioner's back.
	Drift func(t testing.TB, application string)
	// Synchronous says apply finishes within the call (200) instead of answering 202. The
	// suite then cannot check polling and skips that case.
	Synchronous bool
	// PollTimeout bounds waiting for an operation to become final (default 30s).
	PollTimeout time.Duration
	// HTTPClient is used for the calls (default: a client with a 10s timeout).
	HTTPClient *http.Client
}

type suite struct {
	Target
	hc *http.Client
}

// Run runs the conformance suite against target. Each case uses its own application name, so
// cases run in parallel and the suite can run against a provisioner that holds other state.
func Run(t *testing.T, target Target) {
	t.Helper()
	if target.WrongPair == (catalog.Pair{}) {
		target.WrongPair = catalog.Pair{Kind: catalog.CategoryConsumedResource, Type: "conformance-unhandled"}
	}
	if target.PollTimeout == 0 {
		target.PollTimeout = 30 * time.Second
	}
	s := &suite{Target: target, hc: target.HTTPClient}
	if s.hc == nil {
		s.hc = &http.Client{Timeout: 10 * time.Second}
	}
	t.Run("PlanChangesNothing", s.planChangesNothing)
	t.Run("ApplyTwiceIsIdempotent", s.applyTwice)
	t.Run("SameContentIsIdempotent", s.sameContent)
	t.Run("SlowWorkAnswers202AndPolls", s.slowWork)
	t.Run("FailedWorkIs200", s.failedWork)
	t.Run("WrongPairAnswersFailed", s.wrongPair)
	t.Run("BrokenCallsAreHTTPErrors", s.brokenCalls)
	t.Run("InspectReportsDrift", s.drift)
	t.Run("ApplyAbsentDeletes", s.absent)
	t.Run("HealthzListsPair", s.health)
}

func app(t testing.TB) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if i := strings.LastIndex(name, "-"); i >= 0 && len(name) > 30 {
		name = name[i+1:]
	}
	return "conf-" + strings.Trim(name, "-") + "-" + hex.EncodeToString(b)
}

func (s *suite) req(application string) *protocol.Request {
	return &protocol.Request{Kind: s.Pair.Kind, Type: s.Pair.Type, Application: application, Settings: s.Settings}
}

// post sends body (any JSON value, or raw bytes) and decodes the answer into out.
func (s *suite) post(t testing.TB, path string, body, out any) int {
	t.Helper()
	var raw []byte
	switch b := body.(type) {
	case []byte:
		raw = b
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			t.Fatalf("encode: %v", err)
		}
	}
	return s.do(t, http.MethodPost, path, raw, out)
}

func (s *suite) do(t testing.TB, method, path string, raw []byte, out any) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var rd io.Reader
	if raw != nil {
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(s.BaseURL, "/")+"/"+path, rd)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	if raw != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: HTTP %d, answer %q is not JSON: %v", method, path, resp.StatusCode, data, err)
		}
	}
	if resp.StatusCode >= 400 && !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		t.Errorf("%s %s: HTTP %d with Content-Type %q, want application/problem+json", method, path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return resp.StatusCode
}

// applyToFinal applies req and follows its operation until final.
func (s *suite) applyToFinal(t testing.TB, req *protocol.Request) protocol.Operation {
	t.Helper()
	var ans protocol.ApplyAnswer
	status := s.post(t, "apply", req, &ans)
	switch {
	case status == http.StatusAccepted:
		if ans.Outcome != protocol.OutcomeAccepted || ans.OperationID == "" {
			t.Fatalf("apply: 202 with outcome %q operationId %q, want accepted and an id", ans.Outcome, ans.OperationID)
		}
		return s.poll(t, ans.OperationID)
	case status == http.StatusOK && ans.Outcome.Final():
		return protocol.Operation{OperationID: ans.OperationID, Outcome: ans.Outcome, Resources: ans.Resources, Outputs: ans.Outputs, Failure: ans.Failure}
	default:
		t.Fatalf("apply: HTTP %d outcome %q, want 202 accepted or 200 with a final outcome", status, ans.Outcome)
		return protocol.Operation{}
	}
}

func (s *suite) poll(t testing.TB, id string) protocol.Operation {
	t.Helper()
	deadline := time.Now().Add(s.PollTimeout)
	wait := 10 * time.Millisecond
	for {
		var op protocol.Operation
		if st := s.do(t, http.MethodGet, "operations/"+id, nil, &op); st != http.StatusOK {
			t.Fatalf("GET operations/%s: HTTP %d", id, st)
		}
		if op.OperationID != id {
			t.Fatalf("GET operations/%s answered operationId %q", id, op.OperationID)
		}
		switch op.Outcome {
		case protocol.OutcomeSucceeded, protocol.OutcomeFailed:
			return op
		case protocol.OutcomeInProgress:
		default:
			t.Fatalf("operation %s: outcome %q, want in_progress, succeeded or failed", id, op.Outcome)
		}
		if time.Now().After(deadline) {
			t.Fatalf("operation %s still in progress after %s", id, s.PollTimeout)
		}
		time.Sleep(wait) // polling a condition with a deadline, as a client must
		wait = min(wait*2, 500*time.Millisecond)
	}
}

func (s *suite) inspect(t testing.TB, application string) protocol.InspectAnswer {
	t.Helper()
	var ans protocol.InspectAnswer
	if st := s.post(t, "inspect", s.req(application), &ans); st != http.StatusOK || ans.Outcome != protocol.OutcomeSucceeded {
		t.Fatalf("inspect: HTTP %d outcome %q (%s), want 200 succeeded", st, ans.Outcome, ans.Reason)
	}
	return ans
}

func exists(rs []protocol.Resource) bool {
	for _, r := range rs {
		if r.Exists {
			return true
		}
	}
	return false
}

func (s *suite) planChangesNothing(t *testing.T) {
	t.Parallel()
	a := app(t)
	before := s.inspect(t, a)
	if exists(before.Resources) {
		t.Fatalf("fresh application %s already has resources: %+v", a, before.Resources)
	}
	for range 2 {
		var plan protocol.PlanAnswer
		if st := s.post(t, "plan", s.req(a), &plan); st != http.StatusOK || plan.Outcome != protocol.OutcomeSucceeded {
			t.Fatalf("plan: HTTP %d outcome %q (%s)", st, plan.Outcome, plan.Reason)
		}
		if len(plan.Changes) == 0 {
			t.Fatal("plan of a fresh application lists no change")
		}
		for _, c := range plan.Changes {
			if c.Action != protocol.ActionCreate || len(c.Operations) == 0 || c.Resource == "" {
				t.Fatalf("plan change %+v: want action create naming its resource and operations", c)
			}
		}
	}
	after := s.inspect(t, a)
	if exists(after.Resources) || !reflect.DeepEqual(before.Resources, after.Resources) {
		t.Fatalf("plan changed something: before %+v, after %+v", before.Resources, after.Resources)
	}
	if op := s.applyToFinal(t, s.req(a)); op.Outcome != protocol.OutcomeSucceeded {
		t.Fatalf("apply: %q %s", op.Outcome, op.Reason)
	}
	var plan protocol.PlanAnswer
	s.post(t, "plan", s.req(a), &plan)
	for _, c := range plan.Changes {
		if c.Action != protocol.ActionNone {
			t.Fatalf("plan after apply: change %+v, want action none", c)
		}
	}
}

func (s *suite) applyTwice(t *testing.T) {
	t.Parallel()
	req := s.req(app(t))
	req.RequestID = "req-" + req.Application
	var first, second protocol.ApplyAnswer
	st1 := s.post(t, "apply", req, &first)
	st2 := s.post(t, "apply", req, &second)
	if st1 != st2 || first.OperationID != second.OperationID {
		t.Fatalf("same apply twice: HTTP %d op %q, then HTTP %d op %q; want the same", st1, first.OperationID, st2, second.OperationID)
	}
	op := s.applyToFinal(t, req)
	if op.Outcome != protocol.OutcomeSucceeded {
		t.Fatalf("apply: %q %s", op.Outcome, op.Reason)
	}
	if first.OperationID != "" && op.OperationID != "" && op.OperationID != first.OperationID {
		t.Fatalf("third apply started operation %q, want %q", op.OperationID, first.OperationID)
	}
	again := s.applyToFinal(t, req)
	if again.Outcome != op.Outcome || !reflect.DeepEqual(again.Resources, op.Resources) || !reflect.DeepEqual(again.Outputs, op.Outputs) {
		t.Fatalf("apply after completion gave a different result:\n first %+v\nsecond %+v", op, again)
	}
}

func (s *suite) sameContent(t *testing.T) {
	t.Parallel()
	req := s.req(app(t)) // no requestId: the key is the content
	var first, second protocol.ApplyAnswer
	s.post(t, "apply", req, &first)
	s.post(t, "apply", req, &second)
	if first.OperationID != second.OperationID {
		t.Fatalf("same content twice started operations %q and %q", first.OperationID, second.OperationID)
	}
	if op := s.applyToFinal(t, req); op.Outcome != protocol.OutcomeSucceeded {
		t.Fatalf("apply: %q %s", op.Outcome, op.Reason)
	}
}

func (s *suite) slowWork(t *testing.T) {
	t.Parallel()
	if s.Synchronous {
		t.Skip("target applies synchronously")
	}
	req := s.req(app(t))
	var ans protocol.ApplyAnswer
	if st := s.post(t, "apply", req, &ans); st != http.StatusAccepted || ans.Outcome != protocol.OutcomeAccepted || ans.OperationID == "" {
		t.Fatalf("apply: HTTP %d outcome %q operationId %q, want 202 accepted with an id", st, ans.Outcome, ans.OperationID)
	}
	op := s.poll(t, ans.OperationID)
	if op.Outcome != protocol.OutcomeSucceeded {
		t.Fatalf("operation: %q %s", op.Outcome, op.Reason)
	}
	if !exists(op.Resources) {
		t.Fatalf("succeeded operation reports no existing resource: %+v", op.Resources)
	}
	if !exists(s.inspect(t, req.Application).Resources) {
		t.Fatal("inspect after a succeeded apply finds nothing")
	}
	var prob protocol.Problem
	if st := s.do(t, http.MethodGet, "operations/no-such-operation", nil, &prob); st != http.StatusNotFound {
		t.Fatalf("unknown operation: HTTP %d, want 404", st)
	}
}

func (s *suite) failedWork(t *testing.T) {
	t.Parallel()
	req := s.req(app(t))
	req.Settings = s.FailingSettings
	op := s.applyToFinal(t, req) // fails the test on any HTTP error
	if op.Outcome != protocol.OutcomeFailed || op.Reason == "" {
		t.Fatalf("apply of failing settings: outcome %q reason %q, want failed with a reason", op.Outcome, op.Reason)
	}
}

func (s *suite) wrongPair(t *testing.T) {
	t.Parallel()
	req := s.req(app(t))
	req.Kind, req.Type = s.WrongPair.Kind, s.WrongPair.Type
	for _, call := range []string{"plan", "apply", "inspect"} {
		var ans struct {
			Outcome protocol.Outcome `json:"outcome"`
			Reason  string           `json:"reason"`
		}
		if st := s.post(t, call, req, &ans); st != http.StatusOK || ans.Outcome != protocol.OutcomeFailed || ans.Reason == "" {
			t.Errorf("%s for %s: HTTP %d outcome %q reason %q, want 200 failed with a reason", call, s.WrongPair, st, ans.Outcome, ans.Reason)
		}
	}
}

func (s *suite) brokenCalls(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		path string
		body []byte
	}{
		{"bad json", "apply", []byte(`{"kind":`)},
		{"not an object", "plan", []byte(`[1]`)},
		{"no application", "inspect", []byte(`{"kind":"` + string(s.Pair.Kind) + `","type":"` + s.Pair.Type + `"}`)},
		{"no kind", "apply", []byte(`{"type":"` + s.Pair.Type + `","application":"x"}`)},
	}
	for _, tc := range cases {
		var prob protocol.Problem
		st := s.post(t, tc.path, tc.body, &prob)
		if st < 400 || st >= 500 || prob.Status != st || prob.Title == "" {
			t.Errorf("%s: HTTP %d problem %+v, want a 4xx problem+json", tc.name, st, prob)
		}
	}
}

func (s *suite) drift(t *testing.T) {
	t.Parallel()
	a := app(t)
	if op := s.applyToFinal(t, s.req(a)); op.Outcome != protocol.OutcomeSucceeded {
		t.Fatalf("apply: %q %s", op.Outcome, op.Reason)
	}
	clean := s.inspect(t, a)
	if len(clean.Drift) != 0 || !exists(clean.Resources) {
		t.Fatalf("inspect right after apply: drift %+v resources %+v, want no drift and the resource", clean.Drift, clean.Resources)
	}
	if s.Target.Drift == nil {
		t.Fatal("Target.Drift is required")
	}
	s.Target.Drift(t, a)
	drifted := s.inspect(t, a)
	if len(drifted.Drift) == 0 {
		t.Fatalf("inspect after a change behind the provisioner's back reports no drift (resources %+v)", drifted.Resources)
	}
	for _, d := range drifted.Drift {
		if d.Resource == "" || d.Field == "" {
			t.Errorf("drift %+v must name the resource and the field", d)
		}
	}
}

func (s *suite) absent(t *testing.T) {
	t.Parallel()
	a := app(t)
	if op := s.applyToFinal(t, s.req(a)); op.Outcome != protocol.OutcomeSucceeded {
		t.Fatalf("apply: %q %s", op.Outcome, op.Reason)
	}
	del := s.req(a)
	del.Ensure = protocol.EnsureAbsent
	var plan protocol.PlanAnswer
	s.post(t, "plan", del, &plan)
	if len(plan.Changes) == 0 || plan.Changes[0].Action != protocol.ActionDelete {
		t.Fatalf("plan of ensure absent: %+v, want a delete", plan.Changes)
	}
	for range 2 { // deleting what is gone succeeds too
		if op := s.applyToFinal(t, del); op.Outcome != protocol.OutcomeSucceeded {
			t.Fatalf("apply absent: %q %s", op.Outcome, op.Reason)
		}
	}
	if exists(s.inspect(t, a).Resources) {
		t.Fatal("resource still exists after apply absent")
	}
}

func (s *suite) health(t *testing.T) {
	t.Parallel()
	var h protocol.Health
	if st := s.do(t, http.MethodGet, "healthz", nil, &h); st != http.StatusOK || h.Status != "ok" {
		t.Fatalf("healthz: HTTP %d %+v", st, h)
	}
	if len(h.Pairs) > 0 {
		for _, p := range h.Pairs {
			if p == s.Pair {
				return
			}
		}
		t.Fatalf("healthz lists %v, not %s", h.Pairs, s.Pair)
	}
}
