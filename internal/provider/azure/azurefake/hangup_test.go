package azurefake

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestARequestWholeIsCarriedOutAfterItsCallerHangsUp: Azure acts on a PUT it received even if
// the caller is gone before the answer. A server under test that is SIGKILLed mid-call must
// find, on restart, what its last whole request made, or it sends the PUT again.
func TestARequestWholeIsCarriedOutAfterItsCallerHangsUp(t *testing.T) {
	t.Parallel()
	c := New(t)
	rg := "/subscriptions/" + Subscription + "/resourceGroups/hangup"
	send := func(ctx context.Context, method, path, api, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequestWithContext(ctx, method, path+"?api-version=2024-05-01", strings.NewReader(body))
		req.Header.Set(HeaderAPIName, api)
		req.Header.Set(HeaderHost, "management.azure.com")
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		c.serve(rec, req)
		return rec
	}
	if rec := send(t.Context(), http.MethodPut, "/subscriptions/"+Subscription+"/resourcegroups/hangup", "ResourceGroupsClient.CreateOrUpdate", `{"location":"westeurope"}`); rec.Code >= 300 {
		t.Fatalf("make the group: %d %s", rec.Code, rec.Body)
	}
	gone, hangUp := context.WithCancel(t.Context())
	hangUp()
	for i := range 20 {
		nsg := fmt.Sprintf("%s/providers/Microsoft.Network/networkSecurityGroups/nsg-%d", rg, i)
		rec := send(gone, http.MethodPut, nsg, "SecurityGroupsClient.BeginCreateOrUpdate", `{"location":"westeurope","properties":{}}`)
		if rec.Code != http.StatusCreated {
			t.Fatalf("PUT %s from a caller that hung up: %d %s; want 201, carried out", nsg, rec.Code, rec.Body)
		}
		if rec := send(t.Context(), http.MethodGet, nsg, "SecurityGroupsClient.Get", ""); rec.Code != http.StatusOK {
			t.Fatalf("GET %s after the hang-up: %d %s", nsg, rec.Code, rec.Body)
		}
	}
}
