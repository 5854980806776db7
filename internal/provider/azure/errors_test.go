package azure

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
)

// Each class of Azure refusal, as the fake answers it over HTTP, is classified once with the
// hint a user needs.
func TestErrorClasses(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		status      int
		code        string
		message     string
		unregister  bool
		class       job.FailureClass
		hint, where string
	}{
		"denied":       {status: 403, code: "AuthorizationFailed", message: "The client does not have authorization to perform action 'Microsoft.Network/networkSecurityGroups/write'", class: job.ClassUserAction, hint: "Contributor", where: "portal.azure.com"},
		"quota":        {status: 409, code: "QuotaExceeded", message: "Operation could not be completed as it results in exceeding approved quota.", class: job.ClassUserAction, hint: "quota", where: "usagesAndQuota"},
		"unregistered": {unregister: true, class: job.ClassUserAction, hint: "az provider register --namespace Microsoft.Network", where: "resourceProviders"},
		"throttled":    {status: 429, code: "TooManyRequests", message: "slow down", class: job.ClassTransient},
		"busy":         {status: 409, code: "AnotherOperationInProgress", message: "Another operation on this or dependent resource is in progress.", class: job.ClassTransient},
		"server":       {status: 503, code: "ServiceUnavailable", message: "try later", class: job.ClassTransient},
		"invalid":      {status: 400, code: "InvalidRequestFormat", message: "bad", class: job.ClassSystem},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, cloud := testClient(t)
			if tc.unregister {
				cloud.Unregister("Microsoft.Network")
			} else {
				cloud.Fail(http.MethodPut, "/networkSecurityGroups/", tc.status, tc.code, tc.message, 10)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			j := &job.Job{ID: "job_01JERRORCLASS", OrgID: "org_a", SpaceID: "spc_a", Provider: Name}
			_, err := NetworkDriver{C: c}.EnsureNetwork(ctx, j, network.Config{})
			var fe *fault.Error
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not classified", err)
			}
			if fe.Class != tc.class || !strings.Contains(fe.FixHint, tc.hint) || !strings.Contains(fe.ConsoleURL, tc.where) {
				t.Fatalf("%v: class %s, hint %q, url %q; want %s with %q and %q", err, fe.Class, fe.FixHint, fe.ConsoleURL, tc.class, tc.hint, tc.where)
			}
		})
	}
}
