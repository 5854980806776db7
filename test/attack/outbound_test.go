package attack

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/netguard"
)

// Finding 6: user-given addresses reaching the cloud metadata service, or anything the
// operator has not allowed, are refused before any connection, and a remote's answer is never
// echoed back (the server is no port scanner).
func TestOutboundAddressesAreGuarded(t *testing.T) {
	t.Parallel()
	pair := catalog.PairBucket
	reg := func(url string) string {
		return fmt.Sprintf(`{"name":"p","url":%q,"pairs":[{"kind":%q,"type":%q}]}`, url, pair.Kind, pair.Type)
	}
	onEachStore(t, func(t *testing.T, w *world) {
		// The metadata service, directly and through a redirect from an innocent-looking host.
		r := w.call(t, w.adminA, "POST", "/api/provisioners", reg("http://169.254.169.254/latest"))
		if r.Status != 422 || !strings.Contains(string(r.Raw), "outbound policy") {
			t.Errorf("provisioner at the metadata address: %d %s; want 422 refused by the outbound policy", r.Status, r.Raw)
		}
		redirect := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
			http.Redirect(rw, req, "http://169.254.169.254/latest/meta-data/iam/", http.StatusFound)
		}))
		defer redirect.Close()
		r = w.call(t, w.adminA, "POST", "/api/provisioners", reg(redirect.URL))
		if r.Status != 422 || !strings.Contains(string(r.Raw), "outbound policy") {
			t.Errorf("provisioner redirecting to the metadata address: %d %s", r.Status, r.Raw)
		}
		// Whatever answers at a user's URL is not read back to them.
		const banner = "SSH-2.0-OpenSSH_internal-banner-7f3a"
		chatty := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
			rw.WriteHeader(http.StatusInternalServerError)
			_, _ = rw.Write([]byte(banner + " internal service answer"))
		}))
		defer chatty.Close()
		r = w.call(t, w.adminA, "POST", "/api/provisioners", reg(chatty.URL))
		if r.Status != 422 || strings.Contains(string(r.Raw), banner) {
			t.Errorf("registration echoes the remote's body: %d %s", r.Status, r.Raw)
		}
		// Adopting the metadata address as a datastore host.
		var sp struct {
			ID string `json:"id"`
		}
		w.must(t, w.editorB, "POST", "/api/spaces", `{"name":"s","provider":"local","region":"local"}`, 201).Decode(t, &sp)
		w.refused(t, w.editorB, "POST", "/api/provisioning-jobs", `{"spaceID":"`+sp.ID+`","kind":"datastore","mode":"adopt",
			"config":{"engine":"redis","host":"169.254.169.254","port":80,"adminPassword":"x-password-1"}}`, 400, "config.host")
		// Registering a cluster whose endpoint is the metadata address.
		w.refused(t, w.editorB, "POST", "/api/spaces/register-cluster", `{"name":"c","cluster":{"endpoint":"https://169.254.169.254","token":"t0k3n"}}`,
			400, "cluster.endpoint")
		// An AWS account whose endpoint is the metadata address: the SDK would send it signed requests.
		w.refused(t, w.editorB, "POST", "/api/cloud-accounts", `{"name":"a","provider":"aws","region":"eu-west-1","config":{"endpoint":"http://169.254.169.254/"}}`,
			400, "config.endpoint")
		if n := w.listLen(t, w.adminA, "/api/provisioners"); n != 1 {
			t.Errorf("%d provisioners listed; only the built-in one may be", n)
		}
	})
}

// With an operator allowlist, every user-given address outside it is refused, loopback too.
func TestOutboundAllowlistLimitsUserAddresses(t *testing.T) {
	t.Parallel()
	allow, err := netguard.ParseAllow("10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	onEachStoreWith(t, app.Options{Outbound: netguard.New(allow)}, func(t *testing.T, w *world) {
		var calls atomic.Int32
		url := healthyRemote(t, &calls)
		r := w.call(t, w.adminA, "POST", "/api/provisioners",
			fmt.Sprintf(`{"name":"p","url":%q,"pairs":[{"kind":%q,"type":%q}]}`, url, catalog.PairBucket.Kind, catalog.PairBucket.Type))
		if r.Status != 422 || !strings.Contains(string(r.Raw), "outbound") {
			t.Errorf("provisioner outside the allowlist: %d %s", r.Status, r.Raw)
		}
		if n := calls.Load(); n != 0 {
			t.Errorf("the refused provisioner got %d calls", n)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		port := netip.MustParseAddrPort(ln.Addr().String()).Port()
		var sp struct {
			ID string `json:"id"`
		}
		w.must(t, w.adminA, "POST", "/api/spaces", `{"name":"s","provider":"local","region":"local"}`, 201).Decode(t, &sp)
		w.refused(t, w.adminA, "POST", "/api/provisioning-jobs", fmt.Sprintf(`{"spaceID":%q,"kind":"datastore","mode":"adopt",
			"config":{"engine":"redis","host":"127.0.0.1","port":%d,"adminPassword":"x-password-1"}}`, sp.ID, port), 400, "config.host")
	})
}
