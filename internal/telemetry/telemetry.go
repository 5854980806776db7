// Package telemetry sets up OpenTelemetry tracing from the standard OTEL_* variables (off
// unless they ask for it), ties each job's steps into one trace, and puts trace ids into log
// lines.
package telemetry

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"

	"github.com/oklog/ulid/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Enabled reports whether the OTEL_* variables ask for traces: OTEL_TRACES_EXPORTER=otlp, or an
// OTLP endpoint set without OTEL_TRACES_EXPORTER=none; never with OTEL_SDK_DISABLED=true.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	switch strings.ToLower(getenv("OTEL_TRACES_EXPORTER")) {
	case "otlp":
		return true
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	default:
		return false
	}
}

// Setup returns the tracer provider the server uses and its shutdown, which flushes spans
// still buffered. When Enabled is false it is a no-op provider. The exporter speaks OTLP over
// HTTP and reads its endpoint, headers, timeout and TLS settings from the OTEL_EXPORTER_OTLP_*
// variables itself; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES name the service
// (default "groundwork").
func Setup(ctx context.Context, getenv func(string) string) (trace.TracerProvider, func(context.Context) error, error) {
	if !Enabled(getenv) {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", "groundwork")), resource.WithFromEnv())
	if err != nil {
		return nil, nil, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}

// JobContext returns ctx under the job's notional root span. A job runs in many short claims,
// on any replica and across restarts; deriving the trace id from the job id (its ULID is 16
// bytes, a trace id's size) puts all of its steps into one trace without storing anything.
// The root span itself is never exported: trace viewers show the steps under a missing root.
func JobContext(ctx context.Context, jobID string) context.Context {
	var tid trace.TraceID
	// The ids only need to be stable and spread, not secret: FNV costs a fraction of SHA-256,
	// and this runs for every step.
	if id, err := ulid.ParseStrict(strings.TrimPrefix(jobID, "job_")); err == nil {
		tid = trace.TraceID(id)
	} else {
		h := fnv.New128a()
		h.Write([]byte(jobID))
		h.Sum(tid[:0])
	}
	h := fnv.New64a()
	h.Write([]byte("span:"))
	h.Write([]byte(jobID))
	var sid trace.SpanID
	binary.BigEndian.PutUint64(sid[:], h.Sum64())
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// JobTraceID is the trace id of the job's steps (see JobContext).
func JobTraceID(jobID string) trace.TraceID {
	return trace.SpanContextFromContext(JobContext(context.Background(), jobID)).TraceID()
}

// LogAttrs are the trace_id and span_id of span, for a logger's With; none when the span is
// not recording (tracing off).
func LogAttrs(span trace.Span) []any {
	sc := span.SpanContext()
	if !sc.IsValid() || !span.IsRecording() {
		return nil
	}
	return []any{"trace_id", sc.TraceID().String(), "span_id", sc.SpanID().String()}
}

// LogHandler adds trace_id and span_id to every record logged with a context holding a
// recording span (the API's request logs, anything using the *Context logging calls).
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		sc := span.SpanContext()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return logHandler{h.Handler.WithAttrs(as)}
}

func (h logHandler) WithGroup(name string) slog.Handler {
	return logHandler{h.Handler.WithGroup(name)}
}
