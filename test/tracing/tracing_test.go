// Package tracing runs a Groundwork server with the standard OTEL_* variables pointing at an
// in-process OTLP/HTTP receiver and checks what arrives: a span per API request, and one
// trace per job holding its steps.
package tracing

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
	"github.com/groundworkhq/groundwork/internal/telemetry"
	"github.com/groundworkhq/groundwork/internal/testenv/serverproc"
)

func TestMain(m *testing.M) {
	serverproc.Main(m, func(o *app.Options) error {
		o.Pipelines = []pipeline.Pipeline{&testfamily.Pipeline{N: 3}}
		return nil
	})
}

// receiver is an OTLP/HTTP trace endpoint keeping every span it is sent.
type receiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req collectortrace.ExportTraceServiceRequest
	if err != nil || r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			rc.spans = append(rc.spans, ss.Spans...)
		}
	}
	rc.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (rc *receiver) names(traceID []byte) []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []string
	for _, s := range rc.spans {
		if traceID == nil || string(s.TraceId) == string(traceID) {
			out = append(out, s.Name)
		}
	}
	return out
}

func TestOTLPExportOfRequestsAndJobSteps(t *testing.T) {
	rc := &receiver{}
	otlp := httptest.NewServer(rc)
	t.Cleanup(otlp.Close)
	srv := serverproc.Start(t, serverproc.Options{Env: []string{
		"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_ENDPOINT=" + otlp.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_BSP_SCHEDULE_DELAY=50", "OTEL_SERVICE_NAME=groundwork-test",
	}})
	var sp, j struct{ ID string }
	if st, raw := srv.Call(t, "POST", "/api/spaces", map[string]string{"name": "traced", "provider": "local", "region": "local"}); st != 201 || json.Unmarshal(raw, &sp) != nil {
		t.Fatalf("create space: %d %s", st, raw)
	}
	if st, raw := srv.Call(t, "POST", "/api/provisioning-jobs", map[string]any{"spaceID": sp.ID, "kind": "test"}); st != 201 || json.Unmarshal(raw, &j) != nil {
		t.Fatalf("create job: %d %s", st, raw)
	}
	// A caller's traceparent continues the caller's trace.
	callerTrace := []byte{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	req, _ := http.NewRequest("GET", srv.URL+"/api/spaces", nil)
	req.Header.Set("Authorization", "Bearer "+srv.Token)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	tid := telemetry.JobTraceID(j.ID)
	deadline := time.Now().Add(30 * time.Second)
	for {
		steps := strings.Join(rc.names(tid[:]), ",")
		all := strings.Join(rc.names(nil), ",")
		caller := strings.Join(rc.names(callerTrace), ",")
		if steps == "step1,step2,step3" && strings.Contains(all, "POST /api/provisioning-jobs") && caller == "GET /api/spaces" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("spans received: job trace [%s], caller's trace [%s], all [%s]", steps, caller, all)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The step log lines name the job's trace.
	b, err := os.ReadFile(srv.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"trace_id":"`+tid.String()+`"`) {
		t.Errorf("no server log line carries the job's trace id %s:\n%s", tid, b)
	}
}
