package api

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/protocol"
)

// requestTypes is every body the API decodes; each fuzzed body goes through decode into each.
func requestTypes() []func() any {
	return []func() any{
		func() any { return &createJobRequest{} }, func() any { return &patchJobRequest{} },
		func() any { return &createSpaceRequest{} }, func() any { return &createAccountRequest{} },
		func() any { return &patchAccountRequest{} }, func() any { return &createTokenRequest{} },
		func() any { return &createRoleRequest{} }, func() any { return &createAssignmentRequest{} },
		func() any { return &createUserRequest{} }, func() any { return &createTeamRequest{} },
		func() any { return &patchTeamRequest{} }, func() any { return &revealRequest{} },
		func() any { return &createConnectionRequest{} }, func() any { return &datastore.CreateDatabaseParams{} },
		func() any { return &installComponentRequest{} }, func() any { return &registerClusterRequest{} },
		func() any { return &protocol.RegisterInput{} },
		func() any { return &updatePlanRequest{} }, func() any { return &rollbackRequest{} },
	}
}

// Every request decoder answers any body with a value or a 400 problem naming what is wrong,
// never a panic or another status; and If-Match is read the same way.
func FuzzRequestDecoders(f *testing.F) {
	f.Add([]byte(`{"spaceID":"spc_1","kind":"datastore","config":{"engine":"postgres"}}`), `"3"`)
	f.Add([]byte(`{"vmOp":"attach_lb"}`), "")
	f.Add([]byte(`{"name":1}`), `W/"x"`)
	f.Fuzz(func(t *testing.T, body []byte, ifMatch string) {
		for _, mk := range requestTypes() {
			r := httptest.NewRequest("POST", "/api/x", bytes.NewReader(body))
			v := mk()
			pr := decode(r, v)
			if pr != nil && (pr.Status != http.StatusBadRequest || pr.Detail == "") {
				t.Fatalf("%T: problem %d %q", v, pr.Status, pr.Detail)
			}
		}
		r := httptest.NewRequest("PATCH", "/api/x", nil)
		r.Header.Set("If-Match", ifMatch)
		if _, err := requestVersion(r, nil); err != nil {
			if pr, ok := err.(*Problem); !ok || pr.Status != http.StatusBadRequest {
				t.Fatalf("If-Match %q: %v", ifMatch, err)
			}
		}
	})
}

// A bare null leaves a Go value untouched, so without its own check a PATCH of null answered
// 200. Every request body is an object: null is a 400 naming the body, whatever the spacing.
func TestDecodeRefusesNull(t *testing.T) {
	t.Parallel()
	for _, body := range []string{"null", " null", "\n\tnull \n", "null\n"} {
		for _, mk := range requestTypes() {
			v := mk()
			pr := decode(httptest.NewRequest("PATCH", "/api/x", bytes.NewReader([]byte(body))), v)
			if pr == nil || pr.Status != http.StatusBadRequest || len(pr.Errors) != 1 || pr.Errors[0].Field != "(body)" {
				t.Fatalf("%T with body %q: got %+v, want a 400 on (body)", v, body, pr)
			}
		}
	}
	// A value that merely starts like null is the decoder's to refuse, and {} is a valid body.
	if pr := decode(httptest.NewRequest("PATCH", "/api/x", bytes.NewReader([]byte("{}"))), &patchTeamRequest{}); pr != nil {
		t.Fatalf("{}: %+v", pr)
	}
	pr := decode(httptest.NewRequest("PATCH", "/api/x", bytes.NewReader([]byte("nullx"))), &patchTeamRequest{})
	if pr == nil || strings.Contains(pr.Detail, "not null") {
		t.Fatalf("nullx: got %+v, want the decoder's syntax error", pr)
	}
}
