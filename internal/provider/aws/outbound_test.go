package aws

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/netguard"
)

// A user-given account endpoint is dialled through the outbound policy: a host name resolving
// to an address outside the operator's allowlist gets no request (signed or not), and the
// failure is the user's to fix, with a code that says why.
func TestAccountEndpointDialledThroughOutboundPolicy(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	endpoint := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1) // a name, resolved at dial time
	p, err := Open(context.Background(), Account{AuthMethod: AuthStaticKeys, Region: "eu-west-1",
		AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret", Endpoint: endpoint, MaxAttempts: 3,
		Outbound: netguard.New([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")})})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.AccountID(context.Background())
	if !errors.Is(err, netguard.ErrRefused) {
		t.Fatalf("AccountID through a refused endpoint: %v; want netguard.ErrRefused", err)
	}
	if fe := fault.As(err); fe.Class != job.ClassUserAction || fe.Code != CodeOutboundRefused {
		t.Errorf("classified %s/%s; want %s/%s", fe.Class, fe.Code, job.ClassUserAction, CodeOutboundRefused)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the refused endpoint got %d requests", n)
	}
}
