package protocol

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/groundworkhq/groundwork/internal/catalog"
)

// fuzzBackend serves every pair and answers every call with an empty answer.
type fuzzBackend struct{}

func (fuzzBackend) Handler(context.Context, catalog.Pair) (Handler, bool) { return fuzzHandler{}, true }
func (fuzzBackend) Operation(context.Context, string) (Operation, error) {
	return Operation{}, ErrUnknownOperation
}
func (fuzzBackend) Pairs(context.Context) []catalog.Pair { return nil }

type fuzzHandler struct{}

func (fuzzHandler) Plan(context.Context, *Request) (PlanAnswer, error)   { return PlanAnswer{}, nil }
func (fuzzHandler) Apply(context.Context, *Request) (ApplyAnswer, error) { return ApplyAnswer{}, nil }
func (fuzzHandler) Inspect(context.Context, *Request) (InspectAnswer, error) {
	return InspectAnswer{}, nil
}

// The protocol's request parser answers any body with 200 (an answer, maybe a failure) or a
// 400 problem, never a panic or a 5xx; a request it accepts has a stable idempotency key.
func FuzzProtocolRequest(f *testing.F) {
	cat, err := catalog.Builtin()
	if err != nil {
		f.Fatal(err)
	}
	srv := NewServer(fuzzBackend{}, ServerOptions{Catalog: cat})
	f.Add([]byte(`{"kind":"managed-resource","type":"bucket","application":"shop","settings":{"versioning":true}}`))
	f.Add([]byte(`{"kind":"datastore","type":"postgres","application":"a","ensure":"absent"}`))
	f.Add([]byte(`{"kind":"x","type":"y","application":"z","settings":[1]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, call := range []string{"/plan", "/apply", "/inspect"} {
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, httptest.NewRequest("POST", call, bytes.NewReader(body)))
			if rec.Code != http.StatusOK && rec.Code != http.StatusBadRequest {
				t.Fatalf("%s answered %d: %s", call, rec.Code, rec.Body)
			}
		}
		var req Request
		if json.Unmarshal(body, &req) == nil && req.Check() == nil && req.Key() != req.Key() {
			t.Fatal("the idempotency key changed between two reads")
		}
	})
}
