package protocoltest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/protocol"
)

// RunStore checks a protocol.ProvisionerStore implementation; newStore returns an empty one.
// The store's own tests (SQLite, PostgreSQL) call it so that every implementation keeps the
// same promises, above all that two registrations of one pair cannot both win.
func RunStore(t *testing.T, newStore func(t *testing.T) protocol.ProvisionerStore) {
	t.Helper()
	ctx := context.Background()
	queue := catalog.Pair{Kind: catalog.CategoryConsumedResource, Type: "queue"}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const orgA, orgB = "org_a", "org_b"

	t.Run("OrganisationsAreApart", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		a := protocol.Provisioner{OrgID: orgA, ID: "prv_oa", Name: "a", URL: "http://a", Pairs: []catalog.Pair{queue}, CreatedAt: at}
		b := protocol.Provisioner{OrgID: orgB, ID: "prv_ob", Name: "b", URL: "http://b", Pairs: []catalog.Pair{queue}, CreatedAt: at}
		for _, p := range []protocol.Provisioner{a, b} {
			if err := s.InsertProvisioner(ctx, p); err != nil {
				t.Fatalf("insert %s: one pair is held once per organisation, not once per install: %v", p.ID, err)
			}
		}
		if h, err := s.ProvisionerForPair(ctx, orgA, queue); err != nil || h.ID != "prv_oa" || h.OrgID != orgA {
			t.Fatalf("holder in %s = %+v, %v", orgA, h, err)
		}
		if _, err := s.GetProvisioner(ctx, orgB, "prv_oa"); !errors.Is(err, protocol.ErrProvisionerNotFound) {
			t.Fatalf("%s reads %s's registration: %v", orgB, orgA, err)
		}
		if err := s.DeleteProvisioner(ctx, orgB, "prv_oa"); !errors.Is(err, protocol.ErrProvisionerNotFound) {
			t.Fatalf("%s deletes %s's registration: %v", orgB, orgA, err)
		}
		if list, err := s.ListProvisioners(ctx, orgB); err != nil || len(list) != 1 || list[0].ID != "prv_ob" {
			t.Fatalf("%s lists %+v, %v", orgB, list, err)
		}
		if h, err := s.ProvisionerForPair(ctx, orgA, queue); err != nil || h.URL != "http://a" {
			t.Fatalf("after %s's attempts the holder in %s is %+v, %v", orgB, orgA, h, err)
		}
	})

	t.Run("InsertGetListDelete", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		a := protocol.Provisioner{OrgID: orgA, ID: "prv_a", Name: "a", URL: "http://a", Pairs: []catalog.Pair{catalog.PairBucket, queue}, CreatedAt: at}
		b := protocol.Provisioner{OrgID: orgA, ID: "prv_b", Name: "b", URL: "http://b", Pairs: []catalog.Pair{{Kind: catalog.CategoryTool, Type: "lint"}}, CreatedAt: at.Add(time.Second)}
		for _, p := range []protocol.Provisioner{a, b} {
			if err := s.InsertProvisioner(ctx, p); err != nil {
				t.Fatalf("insert %s: %v", p.ID, err)
			}
		}
		got, err := s.GetProvisioner(ctx, orgA, "prv_a")
		if err != nil || got.Name != "a" || got.URL != "http://a" || len(got.Pairs) != 2 || !got.CreatedAt.Equal(at) {
			t.Fatalf("get = %+v, %v", got, err)
		}
		list, err := s.ListProvisioners(ctx, orgA)
		if err != nil || len(list) != 2 || list[0].ID != "prv_a" || list[1].ID != "prv_b" {
			t.Fatalf("list = %+v, %v; want a then b (by creation)", list, err)
		}
		if h, err := s.ProvisionerForPair(ctx, orgA, queue); err != nil || h.ID != "prv_a" {
			t.Fatalf("holder of %s = %+v, %v", queue, h, err)
		}
		if err := s.DeleteProvisioner(ctx, orgA, "prv_a"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ProvisionerForPair(ctx, orgA, queue); !errors.Is(err, protocol.ErrProvisionerNotFound) {
			t.Fatalf("holder after delete: %v, want ErrProvisionerNotFound", err)
		}
		if _, err := s.GetProvisioner(ctx, orgA, "prv_a"); !errors.Is(err, protocol.ErrProvisionerNotFound) {
			t.Fatalf("get after delete: %v", err)
		}
		if err := s.DeleteProvisioner(ctx, orgA, "prv_a"); !errors.Is(err, protocol.ErrProvisionerNotFound) {
			t.Fatalf("delete twice: %v", err)
		}
	})

	t.Run("ConflictNamesTheHolder", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		if err := s.InsertProvisioner(ctx, protocol.Provisioner{OrgID: orgA, ID: "prv_1", Name: "first", URL: "http://1", Pairs: []catalog.Pair{catalog.PairBucket}, CreatedAt: at}); err != nil {
			t.Fatal(err)
		}
		err := s.InsertProvisioner(ctx, protocol.Provisioner{OrgID: orgA, ID: "prv_2", Name: "second", URL: "http://2", Pairs: []catalog.Pair{queue, catalog.PairBucket}, CreatedAt: at})
		var ce *protocol.PairConflictError
		if !errors.As(err, &ce) || ce.Pair != catalog.PairBucket || ce.HolderID != "prv_1" || ce.HolderName != "first" {
			t.Fatalf("err = %v, want a conflict on %s held by prv_1 (first)", err, catalog.PairBucket)
		}
		// Nothing of the refused registration remains, not even its free pair.
		if _, err := s.ProvisionerForPair(ctx, orgA, queue); !errors.Is(err, protocol.ErrProvisionerNotFound) {
			t.Fatalf("refused registration left %s held: %v", queue, err)
		}
	})

	t.Run("ConcurrentClaimsOneWins", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = s.InsertProvisioner(ctx, protocol.Provisioner{
					OrgID: orgA, ID: fmt.Sprintf("prv_%d", i), Name: fmt.Sprintf("p%d", i), URL: "http://x",
					Pairs: []catalog.Pair{catalog.PairBucket}, CreatedAt: at,
				})
			}()
		}
		wg.Wait()
		wins := 0
		for _, err := range errs {
			var ce *protocol.PairConflictError
			switch {
			case err == nil:
				wins++
			case !errors.As(err, &ce):
				t.Errorf("a losing claim failed with %v, want PairConflictError", err)
			}
		}
		if wins != 1 {
			t.Fatalf("%d registrations of one pair succeeded, want exactly 1", wins)
		}
	})
}
