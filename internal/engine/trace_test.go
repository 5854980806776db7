package engine_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/groundworkhq/groundwork/internal/engine"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
	"github.com/groundworkhq/groundwork/internal/telemetry"
	"github.com/groundworkhq/groundwork/internal/testenv/logbuf"
)

// One job's steps, run over several claims, form one trace with a span per execution; a call
// made with the step's context (as the cloud SDKs are) nests under that step; the step's log
// lines carry the trace id; another job has its own trace.
func TestStepsOfAJobFormOneTrace(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	b := setup(t, 3, func(ctx context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
		_, span := tp.Tracer("cloud").Start(ctx, "cloud-call "+c.Step)
		span.End()
		if c.Step == "step2" && c.Attempt == 1 {
			return pipeline.Wait(10*time.Millisecond, "provisioning", nil), nil
		}
		return pipeline.Done(map[string]any{c.Step: "ok"}), nil
	})
	var logs logbuf.Buffer
	b.start(t, func(c *engine.Config) {
		c.Tracer = tp
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	j1, j2 := b.submit(t), b.submit(t)
	b.waitStatus(t, j1.ID, job.StatusCompleted)
	b.waitStatus(t, j2.ID, job.StatusCompleted)

	want := telemetry.JobTraceID(j1.ID)
	if want == telemetry.JobTraceID(j2.ID) {
		t.Fatal("two jobs share a trace id")
	}
	steps := map[string]sdktrace.ReadOnlySpan{}
	var names []string
	for _, s := range exp.GetSpans().Snapshots() {
		if s.SpanContext().TraceID() != want {
			continue
		}
		names = append(names, s.Name())
		if !strings.HasPrefix(s.Name(), "cloud-call") {
			steps[s.SpanContext().SpanID().String()] = s
		}
	}
	// step2 ran twice (wait, then done): four step spans and four cloud calls in j1's trace.
	if len(names) != 8 || len(steps) != 4 {
		t.Fatalf("spans in job %s's trace: %v", j1.ID, names)
	}
	for _, s := range exp.GetSpans().Snapshots() {
		if s.SpanContext().TraceID() != want || !strings.HasPrefix(s.Name(), "cloud-call") {
			continue
		}
		parent, ok := steps[s.Parent().SpanID().String()]
		if !ok || "cloud-call "+parent.Name() != s.Name() {
			t.Errorf("%s is not under its step's span (parent %v)", s.Name(), s.Parent().SpanID())
		}
	}
	if !strings.Contains(logs.String(), `"trace_id":"`+want.String()+`"`) {
		t.Errorf("no log line carries job %s's trace id %s:\n%s", j1.ID, want, logs.String())
	}
}
