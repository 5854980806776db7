package app

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A bootstrap token shorter than 32 characters stops the server before it opens anything.
func TestShortBootstrapTokenIsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		token string
		ttl   time.Duration
		want  string
	}{
		{"gw_short_token", 0, "at least 32"},
		{strings.Repeat("x", 31), 0, "at least 32"},
		{strings.Repeat("x", 40), -time.Hour, "max token TTL"},
	} {
		dir := t.TempDir()
		err := Run(context.Background(), Options{BootstrapToken: tc.token, MaxTokenTTL: tc.ttl, DataDir: dir, Addr: "127.0.0.1:0"})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("token of %d characters, ttl %s: %v", len(tc.token), tc.ttl, err)
		}
	}
}

// The server's limits are set: slow or oversized requests cannot hold a connection for ever.
func TestHTTPServerLimits(t *testing.T) {
	t.Parallel()
	s := newHTTPServer(nil)
	if s.ReadHeaderTimeout <= 0 || s.ReadTimeout <= 0 || s.WriteTimeout <= 0 || s.IdleTimeout <= 0 || s.MaxHeaderBytes <= 0 ||
		s.MaxHeaderBytes > 1<<20 {
		t.Fatalf("limits %v %v %v %v %d", s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout, s.MaxHeaderBytes)
	}
}
