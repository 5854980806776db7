package api

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/groundworkhq/groundwork/internal/testenv/logbuf"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A handler that panics (here: a server wired without a store, so the first store call is a
// nil dereference) answers a 500 problem naming the request id and nothing else; the stack is
// in the log under that id, and the server keeps serving.
func TestHandlerPanicIsA500Problem(t *testing.T) {
	t.Parallel()
	logs := &logbuf.Buffer{}
	reg := prometheus.NewRegistry()
	s := New(Config{Auth: StaticToken{Token: "tok", OrgID: "org1"}, Metrics: reg,
		Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)

	for i, sent := range []string{"", "gateway-chose-this-1"} {
		req, _ := http.NewRequest("GET", srv.URL+"/api/spaces", nil)
		req.Header.Set("Authorization", "Bearer tok")
		if sent != "" {
			req.Header.Set(requestIDHeader, sent)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v (the panic took the connection down)", i, err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 500 || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("answer %d %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
		}
		var pr Problem
		if err := json.Unmarshal(raw, &pr); err != nil {
			t.Fatalf("not a problem: %s", raw)
		}
		id := resp.Header.Get(requestIDHeader)
		if id == "" || pr.RequestID != id || (sent != "" && id != sent) {
			t.Fatalf("request id: header %q, problem %q, sent %q", id, pr.RequestID, sent)
		}
		for _, leak := range []string{"goroutine", "panic", "nil pointer", ".go:"} {
			if strings.Contains(string(raw), leak) {
				t.Fatalf("the answer leaks %q: %s", leak, raw)
			}
		}
		var logged bool
		for line := range strings.SplitSeq(logs.String(), "\n") {
			if strings.Contains(line, `"handler panicked"`) && strings.Contains(line, `"request_id":"`+id+`"`) &&
				strings.Contains(line, "runtime/debug.Stack") {
				logged = true
			}
		}
		if !logged {
			t.Fatalf("no log line with the stack under request id %s:\n%s", id, logs.String())
		}
	}
	// A caller-chosen id that could forge log lines is replaced.
	req, _ := http.NewRequest("GET", srv.URL+"/healthz", nil)
	req.Header.Set(requestIDHeader, "x\" injected=1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("healthz after the panics: %d", resp.StatusCode)
	}
	if got := resp.Header.Get(requestIDHeader); got == "" || strings.Contains(got, `"`) {
		t.Fatalf("request id %q", got)
	}
	if n := testutil.ToFloat64(s.panics); n != 2 {
		t.Fatalf("panic counter %v, want 2", n)
	}
}
