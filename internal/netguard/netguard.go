// Package netguard is the one outbound-address policy for every client that dials an address a
// user gave (a remote provisioner's URL, a chart repository, a registered cluster's endpoint,
// an adopted datastore's host). It answers server-side request forgery: without it, a user
// could make the server fetch the cloud's metadata service (and the instance's credentials),
// or probe the network the server sits in.
//
// The check runs on the address actually dialled, after name resolution, for every connection
// (net.Dialer.Control): a name that resolves to a refused address is refused however it was
// reached, by a redirect or by a DNS answer that changed since it was first looked up.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// EnvAllow names the environment variable that may carry the allowlist (comma-separated CIDRs).
const EnvAllow = "GROUNDWORK_OUTBOUND_ALLOW"

// ErrRefused is wrapped by every refusal.
var ErrRefused = errors.New("address refused by the outbound policy")

// denied are refused whatever the allowlist says: link-local ranges (where every cloud's
// instance metadata service answers, 169.254.169.254 and fd00:ec2::254 among them), the other
// clouds' metadata addresses, and addresses that are not a single remote host.
var denied = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),     // IPv4 link-local: AWS, GCP, Azure, OpenStack metadata
	netip.MustParsePrefix("fe80::/10"),          // IPv6 link-local
	netip.MustParsePrefix("fd00:ec2::254/128"),  // AWS metadata over IPv6
	netip.MustParsePrefix("100.100.100.200/32"), // Alibaba Cloud metadata
	netip.MustParsePrefix("0.0.0.0/8"),          // "this network": reaches the host itself
	netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("224.0.0.0/4"), // multicast
	netip.MustParsePrefix("ff00::/8"),
	netip.MustParsePrefix("255.255.255.255/32"),
}

// Policy decides which addresses user-given destinations may reach. The zero value (and a nil
// *Policy) refuses only the always-denied ranges.
type Policy struct {
	allow []netip.Prefix
}

// New returns a policy; allow, when not empty, is the only set of addresses user-given
// destinations may reach (the always-denied ranges stay refused inside it).
func New(allow []netip.Prefix) *Policy { return &Policy{allow: append([]netip.Prefix(nil), allow...)} }

// ParseAllow parses a comma-separated list of CIDRs (a bare address is one host).
func ParseAllow(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !strings.Contains(part, "/") {
			a, err := netip.ParseAddr(part)
			if err != nil {
				return nil, fmt.Errorf("outbound allowlist: %q is not an address or CIDR", part)
			}
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			return nil, fmt.Errorf("outbound allowlist: %q is not a CIDR", part)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Allowlist returns the allowlist, for logs.
func (p *Policy) Allowlist() []netip.Prefix {
	if p == nil {
		return nil
	}
	return append([]netip.Prefix(nil), p.allow...)
}

// Check refuses ip when it is always denied, or outside a non-empty allowlist.
func (p *Policy) Check(ip netip.Addr) error {
	ip = ip.Unmap()
	if !ip.IsValid() {
		return fmt.Errorf("invalid address: %w", ErrRefused)
	}
	for _, d := range denied {
		if d.Contains(ip) {
			return fmt.Errorf("%s is a link-local, metadata or non-unicast address: %w", ip, ErrRefused)
		}
	}
	if p == nil || len(p.allow) == 0 {
		return nil
	}
	for _, a := range p.allow {
		if a.Contains(ip) {
			return nil
		}
	}
	return fmt.Errorf("%s is outside the operator's outbound allowlist: %w", ip, ErrRefused)
}

// control is a net.Dialer Control function: it sees the resolved address of every connection.
func (p *Policy) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("dial %s: %w", address, ErrRefused)
	}
	return p.Check(ap.Addr())
}

// Dialer returns a dialer whose every connection is checked; timeout 0 means none.
func (p *Policy) Dialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, Control: p.control}
}

// DialContext dials through a checked dialer.
func (p *Policy) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return p.Dialer(10*time.Second).DialContext(ctx, network, address)
}

// Transport returns an HTTP transport that dials through the policy and ignores proxy
// settings (a proxy would make the connection on the server's behalf, past the check).
func (p *Policy) Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = p.Dialer(10 * time.Second).DialContext
	return t
}

// CheckRedirect refuses a redirect to anything but http(s), and more than five of them. The
// address a redirect leads to is checked when it is dialled.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return fmt.Errorf("stopped after 5 redirects: %w", ErrRefused)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return fmt.Errorf("redirect to a %s URL: %w", req.URL.Scheme, ErrRefused)
	}
	return nil
}

// HTTPClient returns a client for user-given URLs: checked dials, checked redirects.
func (p *Policy) HTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: p.Transport(), CheckRedirect: CheckRedirect}
}
