package local

import (
	"context"
	"fmt"
	"os"

	"github.com/groundworkhq/groundwork/internal/discovery"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/plan"
	"github.com/groundworkhq/groundwork/internal/provider"
	"github.com/groundworkhq/groundwork/internal/store"
)

// Name is the provider name of spaces on the Groundwork host itself.
const Name = "local"

// Module is this machine as a cloud module: datastores run as local server processes under
// the data dir, and discovery lists them. There is no account to resolve: every local space
// is this machine.
type Module struct {
	p    *Provider
	wrap func(dspipe.Driver) dspipe.Driver
}

var (
	_ provider.Module           = (*Module)(nil)
	_ provider.DatastoreDrivers = (*Module)(nil)
	_ provider.Listers          = (*Module)(nil)
	_ provider.PlanSources      = (*Module)(nil)
)

// NewModule opens the local provider (servers under o.DataDir/datastores). wrap, if set,
// wraps its datastore driver: tests stop a step at a chosen point with it, as a crash would.
func NewModule(o Options, wrap func(dspipe.Driver) dspipe.Driver) (*Module, error) {
	if err := reachableDataDir(o.DataDir); err != nil {
		return nil, err
	}
	p, err := New(o)
	if err != nil {
		return nil, err
	}
	return &Module{p: p, wrap: wrap}, nil
}

// Name implements provider.Module.
func (m *Module) Name() string { return Name }

// Title implements provider.Module.
func (m *Module) Title() string { return "local" }

// DatastoreDriver implements provider.DatastoreDrivers.
func (m *Module) DatastoreDriver() dspipe.Driver {
	d := m.p.Driver()
	if m.wrap != nil {
		d = m.wrap(d)
	}
	return d
}

// Lister implements provider.Listers.
func (m *Module) Lister(context.Context, *store.Space) (discovery.Lister, error) {
	return Discoverer{P: m.p}, nil
}

// PlanSource implements provider.PlanSources.
func (m *Module) PlanSource() plan.Source { return PlanSource{} }

// reachableDataDir lets the postgres account traverse the data dir when Groundwork runs as
// root: PostgreSQL refuses to run as root, so the local provider runs it as "postgres", which
// must reach its data under DataDir/datastores. Traverse only (0711): the directory cannot be
// listed, and the secret store and key file are 0600 themselves.
func reachableDataDir(dir string) error {
	if os.Geteuid() != 0 || dir == "" {
		return nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if fi.Mode().Perm()&0o011 == 0o011 {
		return nil
	}
	if err := os.Chmod(dir, fi.Mode().Perm()|0o011); err != nil {
		return fmt.Errorf("let the postgres account traverse the data dir: %w", err)
	}
	return nil
}
