package azurefake

// dnsServers are filled by the dns family's work.
func (c *Cloud) dnsServers() []route { return nil }
