package netguard

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	private, _ := ParseAllow("10.0.0.0/8, 192.0.2.7")
	cases := map[string]struct {
		allow []netip.Prefix
		ip    string
		ok    bool
	}{
		"metadata v4":              {nil, "169.254.169.254", false},
		"metadata v4 mapped in v6": {nil, "::ffff:169.254.169.254", false},
		"metadata v6":              {nil, "fd00:ec2::254", false},
		"link-local v6":            {nil, "fe80::1", false},
		"alibaba metadata":         {nil, "100.100.100.200", false},
		"this network":             {nil, "0.0.0.0", false},
		"loopback by default":      {nil, "127.0.0.1", true},
		"private by default":       {nil, "10.1.2.3", true},
		"public by default":        {nil, "203.0.113.9", true},
		"inside the allowlist":     {private, "10.9.9.9", true},
		"a single allowed host":    {private, "192.0.2.7", true},
		"outside the allowlist":    {private, "127.0.0.1", false},
		"metadata even if allowed": {[]netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}, "169.254.169.254", false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := New(c.allow).Check(netip.MustParseAddr(c.ip))
			if (err == nil) != c.ok || err != nil && !errors.Is(err, ErrRefused) {
				t.Fatalf("Check(%s) = %v, want ok=%v", c.ip, err, c.ok)
			}
		})
	}
}

func TestParseAllowRefusesGarbage(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"10.0.0.0/33", "example.com", "10.0.0.0/8,nope"} {
		if _, err := ParseAllow(s); err == nil {
			t.Errorf("ParseAllow(%q) accepted", s)
		}
	}
}

// The check runs on the address dialled after resolution: a name is no way around it.
func TestDialChecksTheResolvedAddress(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	only10 := New([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")})
	if _, err := only10.DialContext(ctx, "tcp", net.JoinHostPort("localhost", port)); !errors.Is(err, ErrRefused) {
		t.Fatalf("dial localhost outside the allowlist: %v", err)
	}
	c, err := New(nil).DialContext(ctx, "tcp", net.JoinHostPort("localhost", port))
	if err != nil {
		t.Fatalf("dial localhost with no allowlist: %v", err)
	}
	_ = c.Close()
	if _, err := New(nil).DialContext(ctx, "tcp", "169.254.169.254:80"); !errors.Is(err, ErrRefused) {
		t.Fatalf("dial the metadata address: %v", err)
	}
}

// A redirect to the metadata service is refused when it is dialled.
func TestRedirectToMetadataIsRefused(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	}))
	defer srv.Close()
	resp, err := New(nil).HTTPClient(5 * time.Second).Get(srv.URL)
	if err == nil {
		resp.Body.Close()
		t.Fatal("the redirect was followed")
	}
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("err = %v, want ErrRefused", err)
	}
}
