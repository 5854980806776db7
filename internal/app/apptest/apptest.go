// Package apptest starts a whole Groundwork server in-process, as `groundwork serve` would
// (app.Run with a temporary SQLite data dir on a random port), for end-to-end tests that talk
// to it over HTTP.
package apptest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/client"
	"github.com/groundworkhq/groundwork/internal/store"
)

// Server is a running Groundwork.
type Server struct {
	// URL is the base URL, e.g. http://127.0.0.1:41234.
	URL string
	// Token is the bootstrap admin token.
	Token  string
	Client *client.Client
}

// Start runs app.Run with o, filling in what a test needs: a temporary data dir (SQLite), a
// random port, a known admin token, fast polling and a logger into the test's output. The
// server stops (and Run has returned) before the test's other cleanups that ran before Start.
func Start(t testing.TB, o app.Options) *Server {
	t.Helper()
	if o.DataDir == "" {
		o.DataDir = t.TempDir()
	}
	o.Addr = "127.0.0.1:0"
	if o.BootstrapToken == "" {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		o.BootstrapToken = "gw_test_" + hex.EncodeToString(b)
	}
	if o.PollInterval == 0 {
		o.PollInterval = 200 * time.Millisecond
	}
	if o.ShutdownGrace == 0 {
		o.ShutdownGrace = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	addr := make(chan string, 1)
	o.Listening = func(a string) { addr <- a }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("groundwork stopped with: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("groundwork did not stop within 30s")
		}
	})
	select {
	case a := <-addr:
		s := &Server{URL: "http://" + a, Token: o.BootstrapToken}
		s.Client = client.New(s.URL, s.Token)
		return s
	case err := <-done:
		t.Fatalf("groundwork did not start: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("groundwork did not listen within 30s")
	}
	return nil
}

// Space creates a local space and returns it.
func (s *Server) Space(t testing.TB, name string) *store.Space {
	t.Helper()
	var sp store.Space
	req := map[string]string{"name": name, "provider": "local", "region": "local"}
	if err := s.Client.Do(context.Background(), http.MethodPost, "/api/spaces", req, &sp); err != nil {
		t.Fatalf("create space %s: %v", name, err)
	}
	return &sp
}

// Transport adds the admin token, and headers, to every request; give it to a client that
// is not the API client (the provisioner-protocol conformance suite).
type Transport struct {
	Token   string
	Headers map[string]string
	Base    http.RoundTripper
}

func (tr *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tr.Token)
	for k, v := range tr.Headers {
		r.Header.Set(k, v)
	}
	base := tr.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}
