package local_test

import (
	"context"
	"testing"

	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/discovery"
	"github.com/groundworkhq/groundwork/internal/provider/local"
	"github.com/groundworkhq/groundwork/internal/provider/local/localtest"
)

// A local space offers the loopback network and the installed server versions.
func TestDiscoverLocal(t *testing.T) {
	t.Parallel()
	localtest.RequireEngine(t, datastore.EnginePostgres)
	p, err := local.New(local.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	d := local.Discoverer{P: p}
	ctx := context.Background()
	nets, err := d.Discover(ctx, discovery.KindNetworks)
	if err != nil {
		t.Fatal(err)
	}
	if len(nets) == 0 || nets[0].CIDR != "127.0.0.0/8" {
		t.Fatalf("networks = %+v; want the loopback", nets)
	}
	versions, err := d.Discover(ctx, discovery.KindVersions)
	if err != nil {
		t.Fatal(err)
	}
	pg, err := p.Installed(ctx, datastore.EnginePostgres)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, v := range versions {
		found = found || (v.Engine == "postgres" && v.Version == pg)
	}
	if !found {
		t.Fatalf("versions = %+v; want postgres %s", versions, pg)
	}
	if z, err := d.Discover(ctx, discovery.KindDNSZones); err != nil || len(z) != 0 {
		t.Fatalf("dns zones = %+v, %v; want none", z, err)
	}
}
