package gcpfake

import "net/netip"

func validCIDR(s string) bool {
	p, err := netip.ParsePrefix(s)
	return err == nil && p.Addr().Is4() && p.Masked() == p
}

func overlaps(a, b string) bool {
	pa, err1 := netip.ParsePrefix(a)
	pb, err2 := netip.ParsePrefix(b)
	return err1 == nil && err2 == nil && pa.Overlaps(pb)
}

// gateway is a subnet's first usable address, which Google gives its gateway.
func gateway(cidr string) string {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return ""
	}
	return p.Masked().Addr().Next().String()
}
