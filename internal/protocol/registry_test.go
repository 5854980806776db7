package protocol_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/protocol"
	"github.com/groundworkhq/groundwork/internal/protocol/protocoltest"
)

const testOrg = "org_test"

func newRegistry(t *testing.T) *protocol.Registry {
	t.Helper()
	cat, err := catalog.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	return protocol.NewRegistry(protocol.NewMemoryStore(), protocol.RegistryOptions{
		BuiltIn: protocol.Provisioner{Name: "groundwork", Pairs: catalog.BuiltinPairs()},
		Catalog: cat,
	})
}

// remote starts a real protocol server holding the bucket pair.
func remote(t *testing.T, pairs ...catalog.Pair) string {
	t.Helper()
	m := protocol.NewMux()
	for _, p := range pairs {
		_ = m.Handle(p, protocoltest.NewReference(p, 1))
	}
	srv := httptest.NewServer(protocol.NewServer(m, protocol.ServerOptions{}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestRegistryRefusesHeldPairs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRegistry(t)
	url := remote(t, catalog.PairBucket, catalog.PairPostgres)

	first, err := r.Register(ctx, testOrg, protocol.RegisterInput{Name: "buckets", URL: url, Pairs: []catalog.Pair{catalog.PairBucket}})
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	cases := map[string]struct {
		pair       catalog.Pair
		holderName string
		holderID   string
	}{
		"held by a registered provisioner": {catalog.PairBucket, "buckets", first.ID},
		"held by the built-in provisioner": {catalog.PairPostgres, "groundwork", "builtin"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := r.Register(ctx, testOrg, protocol.RegisterInput{Name: "rival", URL: url, Pairs: []catalog.Pair{tc.pair}})
			var ce *protocol.PairConflictError
			if !errors.As(err, &ce) || ce.Pair != tc.pair || ce.HolderName != tc.holderName || ce.HolderID != tc.holderID {
				t.Fatalf("err = %v, want a conflict naming %s and holder %s (%s)", err, tc.pair, tc.holderName, tc.holderID)
			}
		})
	}
}

func TestRegistryLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRegistry(t)
	url := remote(t, catalog.PairBucket)
	if h, err := r.Lookup(ctx, testOrg, catalog.PairKubernetes); err != nil || !h.BuiltIn {
		t.Fatalf("built-in pair: %+v, %v", h, err)
	}
	if _, err := r.Lookup(ctx, testOrg, catalog.PairBucket); !errors.Is(err, protocol.ErrProvisionerNotFound) {
		t.Fatalf("unheld pair: err = %v", err)
	}
	p, err := r.Register(ctx, testOrg, protocol.RegisterInput{Name: "buckets", URL: url + "/", Pairs: []catalog.Pair{catalog.PairBucket}})
	if err != nil {
		t.Fatal(err)
	}
	if h, err := r.Lookup(ctx, testOrg, catalog.PairBucket); err != nil || h.ID != p.ID || h.URL != url {
		t.Fatalf("Lookup = %+v, %v; want %s at %s", h, err, p.ID, url)
	}
	list, err := r.List(ctx, testOrg)
	if err != nil || len(list) != 2 || !list[0].BuiltIn || list[1].ID != p.ID {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if err := r.Remove(ctx, testOrg, "builtin"); !errors.Is(err, protocol.ErrBuiltIn) {
		t.Fatalf("removing the built-in: %v", err)
	}
	if err := r.Remove(ctx, testOrg, p.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get(ctx, testOrg, p.ID); !errors.Is(err, protocol.ErrProvisionerNotFound) {
		t.Fatalf("Get after Remove: %v", err)
	}
	// The pair is free again.
	if _, err := r.Register(ctx, testOrg, protocol.RegisterInput{Name: "buckets-2", URL: url, Pairs: []catalog.Pair{catalog.PairBucket}}); err != nil {
		t.Fatalf("re-register: %v", err)
	}
}

func TestRegistryRefusesBadRegistrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRegistry(t)
	up := remote(t, catalog.PairBucket)
	downSrv := httptest.NewServer(nil)
	down := downSrv.URL
	downSrv.Close()
	queue := catalog.Pair{Kind: catalog.CategoryConsumedResource, Type: "queue"}
	cases := map[string]struct {
		in          protocol.RegisterInput
		field       string // for *InvalidRegistrationError
		unreachable bool
	}{
		"no name":           {in: protocol.RegisterInput{URL: up, Pairs: []catalog.Pair{catalog.PairBucket}}, field: "name"},
		"bad url":           {in: protocol.RegisterInput{Name: "x", URL: "ftp://h", Pairs: []catalog.Pair{catalog.PairBucket}}, field: "url"},
		"no pairs":          {in: protocol.RegisterInput{Name: "x", URL: up}, field: "pairs"},
		"artifact category": {in: protocol.RegisterInput{Name: "x", URL: up, Pairs: []catalog.Pair{{Kind: "artifact", Type: "image"}}}, field: "pairs[0]"},
		"pair twice":        {in: protocol.RegisterInput{Name: "x", URL: up, Pairs: []catalog.Pair{catalog.PairBucket, catalog.PairBucket}}, field: "pairs[1]"},
		"not in catalog":    {in: protocol.RegisterInput{Name: "x", URL: up, Pairs: []catalog.Pair{queue}}, field: "pairs[0]"},
		"remote down":       {in: protocol.RegisterInput{Name: "x", URL: down, Pairs: []catalog.Pair{catalog.PairBucket}}, unreachable: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := r.Register(ctx, testOrg, tc.in)
			if tc.unreachable {
				var ue *protocol.UnreachableError
				if !errors.As(err, &ue) {
					t.Fatalf("err = %v, want UnreachableError", err)
				}
				return
			}
			var ie *protocol.InvalidRegistrationError
			if !errors.As(err, &ie) || ie.Fields[0].Field != tc.field {
				t.Fatalf("err = %v, want invalid field %s", err, tc.field)
			}
		})
	}
}

func TestRegistryRemoteMustServeThePair(t *testing.T) {
	t.Parallel()
	r := newRegistry(t)
	// The remote answers /healthz but lists only another pair.
	url := remote(t, catalog.Pair{Kind: catalog.CategoryTool, Type: "other"})
	_, err := r.Register(context.Background(), testOrg, protocol.RegisterInput{Name: "x", URL: url, Pairs: []catalog.Pair{catalog.PairBucket}})
	var ue *protocol.UnreachableError
	if !errors.As(err, &ue) {
		t.Fatalf("err = %v, want the registration refused", err)
	}
}

func TestMemoryStoreSettlesRaces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := protocol.NewMemoryStore()
	if err := s.InsertProvisioner(ctx, protocol.Provisioner{ID: "a", Name: "a", Pairs: []catalog.Pair{catalog.PairBucket}}); err != nil {
		t.Fatal(err)
	}
	err := s.InsertProvisioner(ctx, protocol.Provisioner{ID: "b", Name: "b", Pairs: []catalog.Pair{catalog.PairBucket}})
	var ce *protocol.PairConflictError
	if !errors.As(err, &ce) || ce.HolderID != "a" {
		t.Fatalf("err = %v, want conflict with a", err)
	}
}

func TestHTTPStatus(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		err  error
		want int
	}{
		"conflict":  {&protocol.PairConflictError{Pair: catalog.PairBucket}, 409},
		"built-in":  {protocol.ErrBuiltIn, 409},
		"invalid":   {&protocol.InvalidRegistrationError{}, 422},
		"down":      {&protocol.UnreachableError{URL: "http://x", Err: errors.New("refused")}, 422},
		"not found": {errors.Join(errors.New("x"), protocol.ErrProvisionerNotFound), 404},
		"other":     {errors.New("db down"), 500},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := protocol.HTTPStatus(tc.err); got != tc.want {
				t.Fatalf("HTTPStatus(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
}
