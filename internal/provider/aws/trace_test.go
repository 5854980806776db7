package aws

import (
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// With a tracer, every AWS API call (the STS calls of assume_role included) is a span under the
// span of the context it is made with, as a job step's cloud calls are under the step.
func TestCloudCallsAreSpansUnderTheCaller(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	ctx, step := tp.Tracer("test").Start(testCtx(t), "step")
	acct := newAccount()
	p, err := Open(ctx, Account{
		AuthMethod: AuthAssumeRole, Region: "eu-west-1", Endpoint: motoEnv.Endpoint(t),
		AccessKeyID: "testing", SecretAccessKey: "testing", RoleARN: "arn:aws:iam::" + acct + ":role/groundwork",
		Tracer: tp,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.AccountID(ctx); err != nil {
		t.Fatal(err)
	}
	step.End()
	var calls []string
	for _, s := range exp.GetSpans().Snapshots() {
		if s.Name() == "step" {
			continue
		}
		calls = append(calls, s.Name())
		if s.SpanContext().TraceID() != step.SpanContext().TraceID() {
			t.Errorf("AWS span %s is in another trace", s.Name())
		}
	}
	found := false
	for _, c := range calls {
		found = found || c == "STS.GetCallerIdentity"
	}
	if !found {
		t.Fatalf("AWS spans = %v, want STS.GetCallerIdentity among them", calls)
	}
}
