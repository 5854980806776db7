package discovery

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

type counting struct {
	calls atomic.Int32
	n     int
}

func (c *counting) Discover(_ context.Context, kind string) ([]Item, error) {
	call := c.calls.Add(1)
	out := make([]Item, c.n)
	for i := range out {
		out[i] = Item{ID: fmt.Sprintf("%s-%d-%d", kind, call, i)}
	}
	return out, nil
}

func TestCacheRefreshAndCursor(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	l := &counting{n: 5}
	s := New(func(context.Context, string, string) (Lister, error) { return l, nil }, Options{TTL: 30 * time.Second, PageSize: 2, Now: func() time.Time { return now }})
	ctx := context.Background()
	p1, err := s.List(ctx, "o", "s", KindNetworks, "", false)
	if err != nil || len(p1.Items) != 2 || p1.NextCursor == "" {
		t.Fatalf("page 1 = %+v, %v", p1, err)
	}
	p2, _ := s.List(ctx, "o", "s", KindNetworks, p1.NextCursor, false)
	p3, _ := s.List(ctx, "o", "s", KindNetworks, p2.NextCursor, false)
	if len(p2.Items) != 2 || len(p3.Items) != 1 || p3.NextCursor != "" || l.calls.Load() != 1 {
		t.Fatalf("pages %d, %d (next %q) after %d cloud listings; want 2, 1, last, 1", len(p2.Items), len(p3.Items), p3.NextCursor, l.calls.Load())
	}
	if _, _ = s.List(ctx, "o", "s", KindNetworks, "", true); l.calls.Load() != 2 {
		t.Fatalf("refresh did not ask the cloud: %d listings", l.calls.Load())
	}
	now = now.Add(31 * time.Second)
	if p, _ := s.List(ctx, "o", "s", KindNetworks, "", false); l.calls.Load() != 3 || p.Items[0].ID != "networks-3-0" {
		t.Fatalf("an expired listing was served: %d listings, %+v", l.calls.Load(), p.Items)
	}
	if _, _ = s.List(ctx, "o2", "s", KindNetworks, "", false); l.calls.Load() != 4 {
		t.Fatal("another org's space was served from this one's cache")
	}
	if _, err := s.List(ctx, "o", "s", "vpcs", "", false); !errors.Is(err, ErrUnknownKind) {
		t.Fatalf("unknown kind: %v", err)
	}
	if _, err := s.List(ctx, "o", "s", KindNetworks, "!!", false); !errors.Is(err, ErrBadCursor) {
		t.Fatalf("bad cursor: %v", err)
	}
}
