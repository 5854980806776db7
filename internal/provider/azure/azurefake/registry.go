package azurefake

// registryServers are filled by the registry family's work.
func (c *Cloud) registryServers() []route { return nil }
