package local

import (
	"context"
	"fmt"

	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
)

// Servers adapts the Provider to the datastore pipeline's Servers interface.
type Servers struct{ P *Provider }

// Network is the local provider's network step: servers listen on the loopback address, so
// there is nothing to create; the step records that.
type Network struct{}

// Driver returns the datastore pipeline driver for the local provider.
func (p *Provider) Driver() dspipe.Driver {
	return dspipe.Driver{Servers: Servers{P: p}, Network: Network{}}
}

var (
	_ dspipe.Servers = Servers{}
	_ dspipe.Network = Network{}
)

// Check implements dspipe.Servers: the engine must be installed in the requested version;
// cloud sizing settings are accepted and reported as not applicable.
func (s Servers) Check(ctx context.Context, p dspipe.CheckParams) (dspipe.CheckResult, error) {
	b, err := s.P.resolve(ctx, p.Engine)
	if err != nil {
		return dspipe.CheckResult{}, err
	}
	if err := checkVersion(p.Engine, p.Version, b); err != nil {
		return dspipe.CheckResult{}, err
	}
	res := dspipe.CheckResult{Version: b.version}
	for _, k := range []string{"instanceClass", "allocatedStorageGB", "multiAZ", "backupRetentionDays"} {
		if _, ok := p.Settings[k]; ok {
			res.NotApplicable = append(res.NotApplicable, k)
		}
	}
	return res, nil
}

// Create implements dspipe.Servers.
func (s Servers) Create(ctx context.Context, p dspipe.CreateParams) (dspipe.ServerInfo, error) {
	srv, err := s.P.Ensure(ctx, ServerSpec{JobID: p.JobID, Engine: p.Engine, Version: p.Version, AdminPassword: p.AdminPassword})
	if err != nil {
		return dspipe.ServerInfo{}, err
	}
	return dspipe.ServerInfo{ID: fmt.Sprintf("local/%s/%s", p.Engine, p.JobID), Host: srv.Host, Port: srv.Port,
		AdminUser: srv.AdminUser, Version: srv.Version}, nil
}

// Status implements dspipe.Servers. A server that died is started again on its data (same
// port, same password), so a reboot of the machine heals on the next check.
func (s Servers) Status(ctx context.Context, p dspipe.StatusParams) (dspipe.ServerStatus, error) {
	srv, alive, err := s.P.Find(ctx, p.JobID)
	if err != nil {
		return dspipe.ServerStatus{}, err
	}
	if !alive && srv.Port != 0 {
		if _, err := s.P.Ensure(ctx, ServerSpec{JobID: p.JobID, Engine: p.Engine, AdminPassword: p.AdminPassword}); err != nil {
			return dspipe.ServerStatus{}, err
		}
		return dspipe.ServerStatus{Message: "server restarted; waiting for it to accept connections"}, nil
	}
	ok, err := s.P.Ready(ctx, p.JobID, p.AdminPassword)
	if err != nil {
		return dspipe.ServerStatus{}, err
	}
	return dspipe.ServerStatus{Ready: ok}, nil
}

// Delete implements dspipe.Servers.
// The local server is stopped and removed in the call.
func (s Servers) Delete(ctx context.Context, p dspipe.DeleteParams) (bool, error) {
	if err := s.P.Delete(ctx, p.JobID); err != nil {
		return false, err
	}
	return true, nil
}

// Ensure implements dspipe.Network.
func (Network) Ensure(context.Context, dspipe.NetworkParams) (map[string]any, error) {
	return map[string]any{"kind": "loopback", "address": "127.0.0.1"}, nil
}

// Delete implements dspipe.Network.
func (Network) Delete(context.Context, dspipe.NetworkParams) (bool, error) { return true, nil }
