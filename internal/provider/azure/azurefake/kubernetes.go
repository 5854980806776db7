package azurefake

// kubernetesServers are filled by the kubernetes family's work.
func (c *Cloud) kubernetesServers() []route { return nil }
