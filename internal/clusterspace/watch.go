package clusterspace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/groundworkhq/groundwork/internal/api"
	"github.com/groundworkhq/groundwork/internal/cluster"
	"github.com/groundworkhq/groundwork/internal/netguard"
	"github.com/groundworkhq/groundwork/internal/provider/kube"
	"github.com/groundworkhq/groundwork/internal/store"
)

// Statuses lists the spaces of registered clusters, of every org, and records whether each
// answers; SetSpaceStatus reports whether the status changed.
type Statuses interface {
	ClusterSpaces(ctx context.Context) ([]*store.Space, error)
	SetSpaceStatus(ctx context.Context, id, status string) (bool, error)
}

// DefaultInterval is how often a Watcher with no Interval checks.
const DefaultInterval = 30 * time.Second

// Watcher keeps the status of every cluster space current: ready while its API server answers
// with the stored credential, unreachable otherwise.
type Watcher struct {
	Spaces  Statuses // nil: no checks
	Secrets Secrets
	Mint    *Minter
	// Outbound checks the address dialled for a cluster whose credential the user gave.
	Outbound *netguard.Policy
	// Interval between checks; zero is DefaultInterval, negative turns the checks off.
	Interval time.Duration
	Log      *slog.Logger
}

// Run checks at start and then every interval until ctx ends. Every replica may run it: the
// writes are idempotent and only a change is written.
func (w Watcher) Run(ctx context.Context) {
	if w.Spaces == nil || w.Interval < 0 {
		return
	}
	interval := w.Interval
	if interval == 0 {
		interval = DefaultInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		w.checkAll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (w Watcher) checkAll(ctx context.Context) {
	list, err := w.Spaces.ClusterSpaces(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.Log.Warn("list cluster spaces", "error", err)
		}
		return
	}
	for _, sp := range list {
		if ctx.Err() != nil {
			return
		}
		status, reason := cluster.SpaceReady, error(nil)
		if err := w.ping(ctx, sp); err != nil {
			status, reason = cluster.SpaceUnreachable, err
		}
		if ctx.Err() != nil {
			return
		}
		changed, err := w.Spaces.SetSpaceStatus(ctx, sp.ID, status)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			w.Log.Warn("record space status", "space", sp.ID, "error", err)
		case changed:
			w.Log.Info("space status changed", "space", sp.ID, "status", status, "reason", reason)
		}
	}
}

// ping asks the space's API server for its version with the stored credential.
func (w Watcher) ping(ctx context.Context, sp *store.Space) error {
	sc, ok, err := api.SpaceClusterOf(sp)
	if err != nil || !ok {
		return fmt.Errorf("space config holds no cluster: %v", err)
	}
	creds, err := w.Mint.credentials(ctx, w.Secrets, sp, sc)
	if err != nil {
		return err
	}
	if sc.Auth != kube.AuthCloudToken {
		creds.Dial = w.Outbound.DialContext
	}
	cl, err := kube.Connect(creds)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = cl.Ping(pctx)
	return err
}
