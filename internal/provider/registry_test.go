package provider_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
	"github.com/groundworkhq/groundwork/internal/provider"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// cloud is a module offering the network family, keeping the secrets named "cloud/...".
type cloud struct {
	name, title string
	vault       secrets.SecretStore
}

func (c cloud) Name() string  { return c.name }
func (c cloud) Title() string { return c.title }

// NetworkDriver answers with no driver: the tests look at which module was asked.
func (c cloud) NetworkDriver(context.Context, *job.Job) (struct{ From string }, error) {
	return struct{ From string }{c.name}, nil
}

func (c cloud) SecretStoreFor(_ context.Context, key string) (secrets.SecretStore, error) {
	if strings.HasPrefix(key, "cloud/") {
		return c.vault, nil
	}
	return nil, nil
}

// bare is a module with no abilities.
type bare struct{}

func (bare) Name() string  { return "bare" }
func (bare) Title() string { return "Bare" }

type networks interface {
	NetworkDriver(context.Context, *job.Job) (struct{ From string }, error)
}

func newRegistry(t *testing.T, vault secrets.SecretStore) *provider.Registry {
	t.Helper()
	r, err := provider.NewRegistry(cloud{name: "acme", title: "Acme", vault: vault}, bare{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRegisterTwiceIsRefused(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, nil)
	if err := r.Register(bare{}); err == nil {
		t.Fatal("a second module named bare was registered")
	}
}

func TestLoaderDispatchesOnTheJobsProvider(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, nil)
	load := provider.Loader(r, job.FamilyNetwork, networks.NetworkDriver)
	cases := []struct {
		provider string
		from     string // the module asked; "" for a refusal
	}{
		{"acme", "acme"},
		{"bare", ""},   // registered, without the family
		{"nimbus", ""}, // not registered
	}
	for _, tc := range cases {
		t.Run(tc.provider, func(t *testing.T) {
			t.Parallel()
			d, err := load(t.Context(), &job.Job{ID: "job_1", Provider: tc.provider})
			if tc.from != "" {
				if err != nil || d.From != tc.from {
					t.Fatalf("driver %+v, %v; want one from %s", d, err, tc.from)
				}
				return
			}
			f := fault.As(err)
			if err == nil || f.Class != job.ClassUserAction || f.Code != "WrongProvider" || !strings.Contains(f.FixHint, "Acme spaces only") {
				t.Fatalf("err = %v (%+v), want WrongProvider naming Acme", err, f)
			}
		})
	}
}

func TestFamilyRefusesProvidersWithoutTheFamily(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, nil)
	fam := provider.Family{Pipeline: &testfamily.Pipeline{N: 1}, Providers: provider.Offering[networks](r)}
	err := fam.Validate(t.Context(), &job.Job{Provider: "bare", Config: []byte(`{}`)})
	fields, ok := validation.Fields(err)
	if !ok || len(fields) != 1 || fields[0].Field != "spaceID" || fields[0].Rule != "provider" ||
		fields[0].Message != "test is not available on the bare provider; use a space on an Acme cloud account" {
		t.Fatalf("err = %v, want a refusal of spaceID naming Acme", err)
	}
	if err := fam.Validate(t.Context(), &job.Job{Provider: "acme", Config: []byte(`{}`)}); err != nil {
		t.Fatalf("acme job refused: %v", err)
	}
}

// later is a module that does not offer the test family yet and says when it will.
type later struct{ bare }

func (later) Name() string { return "later" }
func (later) NotOffered(f job.Family) string {
	if f == "test" {
		return "test families come to Later next year"
	}
	return ""
}

// A module that does not offer a family gives its own reason in the refusal; one that gives
// none gets the generic refusal.
func TestFamilyRefusalCarriesTheModulesNote(t *testing.T) {
	t.Parallel()
	r, err := provider.NewRegistry(cloud{name: "acme", title: "Acme"}, bare{}, later{})
	if err != nil {
		t.Fatal(err)
	}
	fam := provider.Family{Pipeline: &testfamily.Pipeline{N: 1}, Providers: provider.Offering[networks](r), All: r}
	err = fam.Validate(t.Context(), &job.Job{Provider: "later", Config: []byte(`{}`)})
	fields, ok := validation.Fields(err)
	if !ok || len(fields) != 1 || fields[0].Field != "spaceID" || fields[0].Message != "test families come to Later next year" {
		t.Fatalf("err = %v, want the module's note on spaceID", err)
	}
	err = fam.Validate(t.Context(), &job.Job{Provider: "bare", Config: []byte(`{}`)})
	if fields, _ := validation.Fields(err); len(fields) != 1 || !strings.Contains(fields[0].Message, "use a space on an Acme cloud account") {
		t.Fatalf("err = %v, want the generic refusal", err)
	}
}

// mapStore is a secret store in memory; refs are the keys prefixed with the store's name.
type mapStore struct {
	name string
	m    map[string]string
}

func (s mapStore) Put(_ context.Context, key, value string) (string, error) {
	s.m[key] = value
	return s.name + ":" + key, nil
}

func (s mapStore) Get(_ context.Context, ref string) (string, error) {
	v, ok := s.m[strings.TrimPrefix(ref, s.name+":")]
	if !ok {
		return "", secrets.ErrNotFound
	}
	return v, nil
}

func (s mapStore) Delete(_ context.Context, ref string) error {
	delete(s.m, strings.TrimPrefix(ref, s.name+":"))
	return nil
}

func TestSecretsGoWhereTheirModuleSays(t *testing.T) {
	t.Parallel()
	own, theirs := mapStore{"own", map[string]string{}}, mapStore{"acme", map[string]string{}}
	s := provider.Secrets{Local: own, Modules: newRegistry(t, theirs)}
	ctx := t.Context()
	for key, want := range map[string]mapStore{"cloud/job_1/admin": theirs, "account/acc_1": own} {
		ref, err := s.Put(ctx, key, "v")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(ref, want.name+":") || want.m[key] != "v" {
			t.Fatalf("%s stored as %s; want it in %s", key, ref, want.name)
		}
		if err := s.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, key); !errors.Is(err, secrets.ErrNotFound) {
			t.Fatalf("%s still there after Delete: %v", key, err)
		}
	}
}
