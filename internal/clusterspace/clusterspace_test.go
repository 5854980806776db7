package clusterspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/cluster"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/provider/kube"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/testenv/logbuf"
)

// fakeStore holds spaces by ID and records status writes the way the SQL stores do: a write
// reports a change only when the status differs.
type fakeStore struct {
	mu      sync.Mutex
	spaces  map[string]*store.Space
	getErr  error
	listErr error
	writes  int
}

func newFakeStore(spaces ...*store.Space) *fakeStore {
	f := &fakeStore{spaces: map[string]*store.Space{}}
	for _, sp := range spaces {
		f.spaces[sp.ID] = sp
	}
	return f
}

func (f *fakeStore) GetSpace(_ context.Context, _, id string) (*store.Space, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.getErr != nil {
		return nil, f.getErr
	}
	sp, ok := f.spaces[id]
	if !ok {
		return nil, fmt.Errorf("space %s: %w", id, store.ErrNotFound)
	}
	c := *sp
	return &c, nil
}

func (f *fakeStore) ClusterSpaces(context.Context) ([]*store.Space, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listErr != nil {
		return nil, f.listErr
	}
	var out []*store.Space
	for _, sp := range f.spaces {
		c := *sp
		out = append(out, &c)
	}
	return out, nil
}

func (f *fakeStore) SetSpaceStatus(_ context.Context, id, status string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sp, ok := f.spaces[id]
	if !ok {
		return false, store.ErrNotFound
	}
	if sp.Status == status {
		return false, nil
	}
	sp.Status = status
	f.writes++
	return true, nil
}

func (f *fakeStore) state(id string) (string, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.spaces[id].Status, f.writes
}

// fakeSecrets keeps values by name, whoever the owner.
type fakeSecrets struct {
	mu   sync.Mutex
	vals map[string]string
}

func (f *fakeSecrets) For(secrets.Owner) secrets.SecretStore { return f }

func (f *fakeSecrets) Put(_ context.Context, key, value string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.vals == nil {
		f.vals = map[string]string{}
	}
	f.vals[key] = value
	return "fake:" + key, nil
}

func (f *fakeSecrets) Get(_ context.Context, ref string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.vals[strings.TrimPrefix(ref, "fake:")]
	if !ok {
		return "", secrets.ErrNotFound
	}
	return v, nil
}

func (f *fakeSecrets) Delete(context.Context, string) error { return nil }

func clusterSpace(t *testing.T, id string, sc cluster.SpaceCluster) *store.Space {
	t.Helper()
	cfg, err := json.Marshal(map[string]any{"cluster": sc})
	if err != nil {
		t.Fatal(err)
	}
	return &store.Space{ID: id, OrgID: "org_1", SpaceType: "kubernetes", Config: cfg}
}

func mintToken(tok string) *Minter {
	return &Minter{Token: func(context.Context, *store.Space, kube.SpaceCluster) (string, error) { return tok, nil }}
}

func TestResolverCluster(t *testing.T) {
	t.Parallel()
	mintErr := errors.New("cloud says no")
	stored := cluster.SpaceCluster{Endpoint: "https://k.example:6443", CredentialRef: "local:abc"}
	created := cluster.SpaceCluster{Endpoint: "https://k.example:6443", Auth: kube.AuthCloudToken, ClusterName: "c1"}
	tests := []struct {
		name      string
		store     *fakeStore
		mint      *Minter
		wantClass job.FailureClass
		wantCode  string
		wantErr   error
		wantRef   string
		wantToken string
	}{
		{name: "missing space", store: newFakeStore(),
			wantClass: job.ClassUserAction, wantCode: "SpaceNotFound"},
		{name: "store away", store: &fakeStore{getErr: errors.New("connection reset")},
			wantClass: job.ClassTransient},
		{name: "space without cluster", store: newFakeStore(&store.Space{ID: "spc_1", OrgID: "org_1"}),
			wantClass: job.ClassUserAction, wantCode: "SpaceHasNoCluster"},
		{name: "unreadable config", store: newFakeStore(&store.Space{ID: "spc_1", OrgID: "org_1", Config: json.RawMessage(`{"cluster":7}`)}),
			wantClass: job.ClassSystem},
		{name: "cloud token, no minter", store: newFakeStore(clusterSpace(t, "spc_1", created)),
			wantClass: job.ClassUserAction, wantCode: "NoTokenMinter"},
		{name: "cloud token, minter without provider", store: newFakeStore(clusterSpace(t, "spc_1", created)), mint: &Minter{},
			wantClass: job.ClassUserAction, wantCode: "NoTokenMinter"},
		{name: "cloud token, mint fails", store: newFakeStore(clusterSpace(t, "spc_1", created)),
			mint:    &Minter{Token: func(context.Context, *store.Space, kube.SpaceCluster) (string, error) { return "", mintErr }},
			wantErr: mintErr},
		{name: "cloud token kept by reference", store: newFakeStore(clusterSpace(t, "spc_1", created)), mint: mintToken("tok-1"),
			wantRef: "fake:space-spc_1-minted", wantToken: "tok-1"},
		{name: "stored credential", store: newFakeStore(clusterSpace(t, "spc_1", stored)),
			wantRef: "local:abc"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sec := &fakeSecrets{}
			sc, err := Resolver{Spaces: tc.store, Secrets: sec, Mint: tc.mint}.Cluster(context.Background(), "spc_1")
			if tc.wantClass != "" || tc.wantErr != nil {
				if err == nil {
					t.Fatalf("Cluster = %+v, want an error", sc)
				}
				if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
					t.Errorf("Cluster error = %v, want %v", err, tc.wantErr)
				}
				if fe := fault.As(err); tc.wantClass != "" && (fe.Class != tc.wantClass || fe.Code != tc.wantCode) {
					t.Errorf("Cluster error = %v (%s %q), want %s %q", err, fe.Class, fe.Code, tc.wantClass, tc.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatalf("Cluster: %v", err)
			}
			if sc.CredentialRef != tc.wantRef || sc.Auth != "" {
				t.Errorf("Cluster = ref %q auth %q, want ref %q and no auth", sc.CredentialRef, sc.Auth, tc.wantRef)
			}
			if tc.wantToken != "" {
				if got, _ := sec.Get(context.Background(), sc.CredentialRef); got != tc.wantToken {
					t.Errorf("kept token = %q, want %q", got, tc.wantToken)
				}
			}
		})
	}
}

// refusedEndpoint is the URL of a port nothing listens on any more.
func refusedEndpoint(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

func TestWatcherStatus(t *testing.T) {
	t.Parallel()
	apiServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/version" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"gitVersion":"v1.30.0"}`))
	}))
	t.Cleanup(apiServer.Close)
	tests := []struct {
		name     string
		endpoint string
		from     string
		mint     *Minter
		want     string
		changes  int
	}{
		{name: "refused becomes unreachable", endpoint: refusedEndpoint(t), from: cluster.SpaceReady, mint: mintToken("t"),
			want: cluster.SpaceUnreachable, changes: 1},
		{name: "no minter is unreachable", endpoint: apiServer.URL, from: cluster.SpaceReady,
			want: cluster.SpaceUnreachable, changes: 1},
		{name: "answering becomes ready", endpoint: apiServer.URL, from: cluster.SpaceUnreachable, mint: mintToken("t"),
			want: cluster.SpaceReady, changes: 1},
		{name: "unchanged is not written", endpoint: refusedEndpoint(t), from: cluster.SpaceUnreachable, mint: mintToken("t"),
			want: cluster.SpaceUnreachable, changes: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sp := clusterSpace(t, "spc_1", cluster.SpaceCluster{Endpoint: tc.endpoint, Auth: kube.AuthCloudToken, ClusterName: "c1"})
			sp.Status = tc.from
			st := newFakeStore(sp)
			logs := &logbuf.Buffer{}
			w := Watcher{Spaces: st, Secrets: &fakeSecrets{}, Mint: tc.mint, Log: slog.New(slog.NewTextHandler(logs, nil))}
			// The second round finds the status already current: nothing more is written or logged.
			for range 2 {
				w.checkAll(context.Background())
			}
			status, writes := st.state("spc_1")
			if status != tc.want || writes != tc.changes {
				t.Errorf("after two checks: status %q with %d writes, want %q with %d", status, writes, tc.want, tc.changes)
			}
			if n := strings.Count(logs.String(), "space status changed"); n != tc.changes {
				t.Errorf("logged %d status changes, want %d:\n%s", n, tc.changes, logs)
			}
		})
	}
}

// A watcher with no interval checks on the default pace rather than refusing to start, and
// stops when its context ends; a negative interval turns it off.
func TestWatcherRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		interval  time.Duration
		wantCheck bool
	}{
		{name: "default interval", interval: 0, wantCheck: true},
		{name: "off", interval: -1, wantCheck: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := newFakeStore(&store.Space{ID: "spc_1", OrgID: "org_1", Status: cluster.SpaceReady})
			w := Watcher{Spaces: st, Interval: tc.interval, Log: slog.New(slog.DiscardHandler)}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); w.Run(ctx) }()
			if tc.wantCheck {
				// A space without a cluster is unreachable; the first check records that.
				deadline := time.Now().Add(10 * time.Second)
				for {
					if status, _ := st.state("spc_1"); status == cluster.SpaceUnreachable {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("the watcher did not check within 10s")
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			if !tc.wantCheck {
				// Turned off, Run returns at once, without its context ending.
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Fatal("Run of a watcher turned off did not return")
				}
				if _, writes := st.state("spc_1"); writes != 0 {
					t.Errorf("a watcher turned off wrote %d statuses", writes)
				}
			}
			cancel()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return after its context ended")
			}
		})
	}
}
