// Package secretstest is the conformance suite every SecretStore implementation runs (the local
// store now, cloud secret managers later), so that callers can rely on one behaviour.
package secretstest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/groundworkhq/groundwork/internal/secrets"
)

// Run exercises the SecretStore contract. newStore returns an empty store; each subtest gets
// its own.
func Run(t *testing.T, newStore func(t *testing.T) secrets.SecretStore) {
	t.Helper()
	ctx := context.Background()

	t.Run("PutGetRoundTrip", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		values := []string{"s3cr3t", "", "quote' \" back\\slash; DROP", "ünïcødé ✓", strings.Repeat("x", 64<<10)}
		for i, v := range values {
			ref, err := s.Put(ctx, "app/value-"+string(rune('a'+i)), v)
			if err != nil {
				t.Fatalf("Put: %v", err)
			}
			if !secrets.IsRef(ref) {
				t.Fatalf("Put returned %q, not a reference", ref)
			}
			if strings.Contains(ref, v) && v != "" {
				t.Fatalf("reference %q carries the value", ref)
			}
			got, err := s.Get(ctx, ref)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if got != v {
				t.Fatalf("Get = %q, want %q", got, v)
			}
		}
	})

	t.Run("SameNameSameRef", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		r1, err := s.Put(ctx, "job_1/admin", "one")
		if err != nil {
			t.Fatal(err)
		}
		r2, err := s.Put(ctx, "job_1/admin", "two")
		if err != nil {
			t.Fatal(err)
		}
		if r1 != r2 {
			t.Fatalf("re-put of a name made a new reference: %q then %q", r1, r2)
		}
		if got, _ := s.Get(ctx, r1); got != "two" {
			t.Fatalf("Get after re-put = %q, want two", got)
		}
		r3, err := s.Put(ctx, "job_2/admin", "other")
		if err != nil {
			t.Fatal(err)
		}
		if r3 == r1 {
			t.Fatal("two names share one reference")
		}
	})

	t.Run("ReplaceByRef", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ref, err := s.Put(ctx, "rotate", "old")
		if err != nil {
			t.Fatal(err)
		}
		ref2, err := s.Put(ctx, ref, "new")
		if err != nil {
			t.Fatalf("Put by ref: %v", err)
		}
		if ref2 != ref {
			t.Fatalf("Put by ref returned %q, want %q", ref2, ref)
		}
		if got, _ := s.Get(ctx, ref); got != "new" {
			t.Fatalf("Get = %q, want new", got)
		}
		// The name still points at the same reference after a replace by ref.
		if ref3, _ := s.Put(ctx, "rotate", "newer"); ref3 != ref {
			t.Fatalf("name rebound after replace by ref: %q", ref3)
		}
	})

	t.Run("DeleteIsIdempotent", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ref, err := s.Put(ctx, "gone", "v")
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := s.Delete(ctx, ref); err != nil {
				t.Fatalf("Delete: %v", err)
			}
		}
		if _, err := s.Get(ctx, ref); !errors.Is(err, secrets.ErrNotFound) {
			t.Fatalf("Get after Delete = %v, want ErrNotFound", err)
		}
		// After a delete, the name may be used again and yields a working reference.
		ref2, err := s.Put(ctx, "gone", "again")
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Get(ctx, ref2); got != "again" {
			t.Fatalf("Get = %q", got)
		}
	})

	t.Run("UnknownRef", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ref, err := s.Put(ctx, "known", "v")
		if err != nil {
			t.Fatal(err)
		}
		backend, _, _ := strings.Cut(ref, ":")
		for _, bad := range []string{backend + ":sec_01ARZ3NDEKTSV4RRFFQ69G5FAV", backend + ":../../etc/passwd", "nope:x"} {
			if _, err := s.Get(ctx, bad); !errors.Is(err, secrets.ErrNotFound) {
				t.Errorf("Get(%q) = %v, want ErrNotFound", bad, err)
			}
		}
	})

	t.Run("ConcurrentPutsOfOneName", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		refs := make([]string, 8)
		var wg sync.WaitGroup
		for i := range refs {
			wg.Go(func() {
				ref, err := s.Put(ctx, "raced", "v")
				if err != nil {
					t.Errorf("Put: %v", err)
				}
				refs[i] = ref
			})
		}
		wg.Wait()
		for _, r := range refs[1:] {
			if r != refs[0] {
				t.Fatalf("concurrent Puts of one name made different references: %v", refs)
			}
		}
	})
}
