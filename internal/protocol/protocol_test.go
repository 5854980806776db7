package protocol_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/protocol"
	"github.com/groundworkhq/groundwork/internal/protocol/protocoltest"
)

var refPair = catalog.Pair{Kind: catalog.CategoryConsumedResource, Type: "reference"}

func serve(t *testing.T, b protocol.Backend, opts protocol.ServerOptions) (*httptest.Server, *protocol.Client) {
	t.Helper()
	srv := httptest.NewServer(protocol.NewServer(b, opts))
	t.Cleanup(srv.Close)
	c, err := protocol.NewClient(srv.URL, protocol.ClientOptions{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

// erring is a handler whose every call returns err, to check how the server maps errors.
type erring struct{ err error }

func (e erring) Plan(context.Context, *protocol.Request) (protocol.PlanAnswer, error) {
	return protocol.PlanAnswer{}, e.err
}
func (e erring) Apply(context.Context, *protocol.Request) (protocol.ApplyAnswer, error) {
	return protocol.ApplyAnswer{}, e.err
}
func (e erring) Inspect(context.Context, *protocol.Request) (protocol.InspectAnswer, error) {
	return protocol.InspectAnswer{}, e.err
}

func TestClientClassifiesErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := map[string]struct {
		handlerErr error
		class      job.FailureClass
		code       string
		workFailed bool
	}{
		"user action becomes a failed outcome": {fault.UserAction(errors.New("quota exceeded"), "QuotaExceeded", "raise the quota", ""), job.ClassUserAction, "QuotaExceeded", true},
		"transient becomes 503":                {fault.Transient(errors.New("cloud throttled")), job.ClassTransient, "", false},
		"unclassified becomes 500":             {errors.New("nil pointer"), job.ClassTransient, "", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := protocol.NewMux()
			_ = m.Handle(refPair, erring{tc.handlerErr})
			_, c := serve(t, m, protocol.ServerOptions{})
			_, err := c.Apply(ctx, &protocol.Request{Kind: refPair.Kind, Type: refPair.Type, Application: "a"})
			fe := fault.As(err)
			if err == nil || fe.Class != tc.class {
				t.Fatalf("Apply err = %v (class %v), want class %s", err, fault.ClassOf(err), tc.class)
			}
			if tc.code != "" && fe.Code != tc.code {
				t.Fatalf("code = %q, want %q", fe.Code, tc.code)
			}
			var wf *protocol.WorkFailedError
			if errors.As(err, &wf) != tc.workFailed {
				t.Fatalf("err %v: WorkFailedError = %v, want %v", err, !tc.workFailed, tc.workFailed)
			}
		})
	}
}

func TestClientRemoteDownIsTransient(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	c, err := protocol.NewClient("http://"+addr, protocol.ClientOptions{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Plan(context.Background(), &protocol.Request{Kind: refPair.Kind, Type: refPair.Type, Application: "a"})
	if fault.ClassOf(err) != job.ClassTransient || fault.As(err).Code != "ProvisionerUnreachable" {
		t.Fatalf("err = %v (class %s), want transient ProvisionerUnreachable", err, fault.ClassOf(err))
	}
}

func TestClientWorkFailureAndRetryable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ref := protocoltest.NewReference(refPair, 1)
	_, c := serve(t, ref.Backend(), protocol.ServerOptions{})
	req := &protocol.Request{Kind: refPair.Kind, Type: refPair.Type, Application: "a", Settings: json.RawMessage(`{"fail":"disk full"}`)}
	ans, err := c.Apply(ctx, req)
	if err != nil || ans.Outcome != protocol.OutcomeAccepted {
		t.Fatalf("Apply = %+v, %v", ans, err)
	}
	op, err := c.Operation(ctx, ans.OperationID)
	var wf *protocol.WorkFailedError
	if !errors.As(err, &wf) || wf.Reason != "disk full" || fault.ClassOf(err) != job.ClassUserAction || op.Outcome != protocol.OutcomeFailed {
		t.Fatalf("Operation = %+v, %v; want failed user_action carrying the reason", op, err)
	}
	if _, err := c.Operation(ctx, "nope"); !protocol.IsUnknownOperation(err) || fault.ClassOf(err) != job.ClassSystem {
		t.Fatalf("unknown operation: err = %v, want a system 404", err)
	}
	// A wrong pair is a failed outcome, which the client reports as user_action.
	_, err = c.Plan(ctx, &protocol.Request{Kind: catalog.CategoryTool, Type: "other", Application: "a"})
	if !errors.As(err, &wf) || wf.Code != "UnsupportedPair" {
		t.Fatalf("wrong pair: err = %v", err)
	}
}

func TestServerValidatesSettingsAgainstCatalog(t *testing.T) {
	t.Parallel()
	cat, err := catalog.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	ref := protocoltest.NewReference(catalog.PairVMPool, 1)
	srv, _ := serve(t, ref.Backend(), protocol.ServerOptions{Catalog: cat})
	body := `{"kind":"target","type":"vm-pool","application":"a","settings":{"name":"p","instanceType":"t","mode":"spot"}}`
	resp, err := http.Post(srv.URL+"/plan", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans protocol.PlanAnswer
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || ans.Outcome != protocol.OutcomeFailed || ans.Code != "InvalidSettings" ||
		len(ans.Fields) != 1 || ans.Fields[0].Field != "mode" || ans.Fields[0].Rule != "enum" {
		t.Fatalf("HTTP %d %+v, want 200 failed InvalidSettings naming mode/enum", resp.StatusCode, ans)
	}
	// Valid settings reach the handler with defaults filled in.
	body = `{"kind":"target","type":"vm-pool","application":"a","settings":{"name":"p","instanceType":"t"}}`
	resp2, err := http.Post(srv.URL+"/plan", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	var ok protocol.PlanAnswer
	_ = json.NewDecoder(resp2.Body).Decode(&ok)
	after, _ := ok.Changes[0].After.(map[string]any)
	if ok.Outcome != protocol.OutcomeSucceeded || after["mode"] != "fixed" {
		t.Fatalf("plan of valid settings: %+v, want defaults applied (mode fixed)", ok)
	}
}

func TestRequestKey(t *testing.T) {
	t.Parallel()
	a := protocol.Request{Kind: "tool", Type: "x", Application: "app", Settings: json.RawMessage(`{"a":1,"b":2}`)}
	b := a
	b.Settings = json.RawMessage(`{ "b":2, "a":1 }`)
	if a.Key() != b.Key() {
		t.Fatal("key depends on key order or spacing of settings")
	}
	c := a
	c.Ensure = protocol.EnsureAbsent
	if a.Key() == c.Key() {
		t.Fatal("present and absent share a key")
	}
	d := a
	d.RequestID = "job_1:apply"
	if d.Key() != "job_1:apply" {
		t.Fatalf("key = %q, want the request id", d.Key())
	}
}
