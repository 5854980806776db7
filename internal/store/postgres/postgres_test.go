package postgres_test

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/store/postgres"
	"github.com/groundworkhq/groundwork/internal/store/storetest"
	"github.com/groundworkhq/groundwork/internal/testenv/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

func open(t *testing.T, url string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, pgtest.NewDatabase(t)) })
}

// A job queued through one replica's store wakes another replica's listener.
func TestNotifyReachesOtherReplica(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	a, b := open(t, url), open(t, url)
	storetest.WakeAcross(t, a, b)
}

func TestMigrateTwiceIsHarmless(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	open(t, url)
	open(t, url)
}

// The engine's batches, claims and heartbeats and the API's reads run side by side; each
// connection released among them must stay open for the next query.
func TestPoolKeepsIdleConnections(t *testing.T) {
	t.Parallel()
	storetest.KeepsIdle(t, open(t, pgtest.NewDatabase(t)).DB(), 20)
}
