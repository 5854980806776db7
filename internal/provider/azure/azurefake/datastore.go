package azurefake

// datastoreServers are filled by the datastore family's work.
func (c *Cloud) datastoreServers() []route { return nil }
