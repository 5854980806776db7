// Package faultproxy is an HTTP reverse proxy for tests that puts a bad network between a
// provider and a cloud emulator (moto, or the GCP and Azure fakes). It throttles a share of
// calls with the cloud's own throttling answer, drops the answer of a share of mutating calls
// after the upstream has acted on them, resets connections before forwarding, and delays
// answers. Every decision comes from the seed, the call's key (its operation) and how many
// calls of that key came before, so the same seed injects the same faults into the same
// sequence of calls even when unrelated calls interleave differently; each injected fault is
// logged with the seed so a failing run can be replayed.
package faultproxy

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sort"
	"sync"
	"time"
)

// Kind is one kind of injected fault.
type Kind string

// The faults the proxy injects.
const (
	// Throttle answers the call with the cloud's throttling answer; the upstream never sees it.
	Throttle Kind = "throttle"
	// DropAnswer forwards a mutating call, lets the upstream act, then closes the connection
	// without an answer: the caller cannot know the call succeeded.
	DropAnswer Kind = "drop-answer"
	// Reset closes the connection with a TCP reset before forwarding.
	Reset Kind = "reset"
	// Delay holds the upstream's answer back for a while.
	Delay Kind = "delay"
)

// Call is what a Profile sees of a request: the request and its whole body (already read).
type Call struct {
	Req  *http.Request
	Body []byte
}

// Profile is what the proxy needs to know of one cloud's API.
type Profile struct {
	// Name goes into log lines.
	Name string
	// Operation names the call (e.g. "ec2:CreateSubnet"); it keys the fault decisions.
	Operation func(c Call) string
	// Mutating reports whether the call changes state (only those get their answer dropped).
	Mutating func(c Call) bool
	// Throttled writes the cloud's "slow down" answer for the call.
	Throttled func(w http.ResponseWriter, c Call)
}

// Config says how often each fault happens. Shares are probabilities in [0, 1].
type Config struct {
	Seed     uint64
	Throttle float64
	// DropAnswer applies to mutating calls only.
	DropAnswer float64
	// DropFirst drops the answer of the first call of every mutating operation, whatever the
	// shares say: every kind of create and delete then meets its own lost answer at least once.
	DropFirst bool
	Reset     float64
	Delay     float64
	// MaxDelay bounds one delay (default 100ms).
	MaxDelay time.Duration
	// Logf receives one line per injected fault (t.Logf in tests); nil logs nothing.
	Logf func(format string, args ...any)
}

// Fault is one injected fault, as logged.
type Fault struct {
	Kind      Kind
	Operation string
	// N is the call's index among calls of the same operation (from 0).
	N int
	// Upstream is the status the upstream answered a call whose answer was dropped or delayed.
	Upstream int
}

// Proxy is a running fault proxy.
type Proxy struct {
	// URL is where clients send their calls instead of the upstream.
	URL string

	cfg      Config
	profile  Profile
	upstream *url.URL
	rp       *httputil.ReverseProxy
	srv      *httptest.Server

	mu     sync.Mutex
	seen   map[string]int
	faults []Fault
	calls  int
}

// Start runs a proxy in front of upstream (a base URL such as http://127.0.0.1:5000).
func Start(upstream string, p Profile, cfg Config) (*Proxy, error) {
	u, err := url.Parse(upstream)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("faultproxy: upstream %q is not a base URL", upstream)
	}
	if cfg.MaxDelay <= 0 {
		cfg.MaxDelay = 100 * time.Millisecond
	}
	px := &Proxy{cfg: cfg, profile: p, upstream: u, seen: map[string]int{}}
	px.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u); r.Out.Host = r.In.Host },
		// No pooled connections to the upstream outlive a test.
		Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
	}
	px.srv = httptest.NewServer(http.HandlerFunc(px.serve))
	px.URL = px.srv.URL
	return px, nil
}

// Close stops the proxy.
func (px *Proxy) Close() { px.srv.Close() }

// Faults returns the faults injected so far, in order.
func (px *Proxy) Faults() []Fault {
	px.mu.Lock()
	defer px.mu.Unlock()
	return append([]Fault(nil), px.faults...)
}

// Count returns how many faults of kind were injected.
func (px *Proxy) Count(kind Kind) int {
	n := 0
	for _, f := range px.Faults() {
		if f.Kind == kind {
			n++
		}
	}
	return n
}

// Calls returns how many calls reached the proxy.
func (px *Proxy) Calls() int {
	px.mu.Lock()
	defer px.mu.Unlock()
	return px.calls
}

// Summary is one line for a test log: the seed and the count of each kind of fault.
func (px *Proxy) Summary() string {
	counts := map[Kind]int{}
	for _, f := range px.Faults() {
		counts[f.Kind]++
	}
	kinds := make([]string, 0, len(counts))
	for k, n := range counts {
		kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(kinds)
	return fmt.Sprintf("faultproxy %s seed=%d calls=%d faults %v", px.profile.Name, px.cfg.Seed, px.Calls(), kinds)
}

// decision is what happens to one call.
type decision struct {
	op       string
	n        int
	throttle bool
	reset    bool
	drop     bool
	delay    time.Duration
}

// decide draws the call's fate from a generator seeded by (seed, operation, n): the same
// seed gives the n-th call of an operation the same fate in every run.
func (px *Proxy) decide(c Call) decision {
	op := px.profile.Operation(c)
	px.mu.Lock()
	n := px.seen[op]
	px.seen[op]++
	px.calls++
	px.mu.Unlock()
	h := fnv.New64a()
	_, _ = h.Write([]byte(op))
	var nb [8]byte
	binary.LittleEndian.PutUint64(nb[:], uint64(n))
	_, _ = h.Write(nb[:])
	rng := rand.New(rand.NewPCG(px.cfg.Seed, h.Sum64()))
	d := decision{op: op, n: n}
	// Every draw is made whatever the outcome, so one share never shifts another's.
	throttle, reset, drop, delay, length := rng.Float64(), rng.Float64(), rng.Float64(), rng.Float64(), rng.Float64()
	switch {
	case px.cfg.DropFirst && n == 0 && px.profile.Mutating(c):
		d.drop = true
	case throttle < px.cfg.Throttle:
		d.throttle = true
	case reset < px.cfg.Reset:
		d.reset = true
	case drop < px.cfg.DropAnswer && px.profile.Mutating(c):
		d.drop = true
	}
	if delay < px.cfg.Delay {
		d.delay = time.Duration(length * float64(px.cfg.MaxDelay))
	}
	return d
}

func (px *Proxy) record(f Fault) {
	px.mu.Lock()
	px.faults = append(px.faults, f)
	px.mu.Unlock()
	if px.cfg.Logf != nil {
		extra := ""
		if f.Upstream != 0 {
			extra = fmt.Sprintf(" (upstream answered %d)", f.Upstream)
		}
		px.cfg.Logf("faultproxy %s seed=%d: %s on %s #%d%s", px.profile.Name, px.cfg.Seed, f.Kind, f.Operation, f.N, extra)
	}
}

func (px *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "faultproxy: read request: "+err.Error(), http.StatusBadGateway)
		return
	}
	c := Call{Req: r, Body: body}
	d := px.decide(c)
	switch {
	case d.throttle:
		px.record(Fault{Kind: Throttle, Operation: d.op, N: d.n})
		px.profile.Throttled(w, c)
		return
	case d.reset:
		px.record(Fault{Kind: Reset, Operation: d.op, N: d.n})
		resetConn(w)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	rec := httptest.NewRecorder()
	px.rp.ServeHTTP(rec, r)
	if d.drop {
		// The upstream has acted; the caller never hears of it.
		px.record(Fault{Kind: DropAnswer, Operation: d.op, N: d.n, Upstream: rec.Code})
		resetConn(w)
		return
	}
	if d.delay > 0 {
		px.record(Fault{Kind: Delay, Operation: d.op, N: d.n, Upstream: rec.Code})
		t := time.NewTimer(d.delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	for k, vs := range rec.Header() {
		w.Header()[k] = vs
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// resetConn takes the connection from the server and closes it with a TCP reset (linger 0),
// so the client sees its request fail with no answer at all.
func resetConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // aborts the answer all the same
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// SeedsEnv names one seed to replay (GROUNDWORK_FAULT_SEED=42) and SeedCountEnv asks for a
// longer run over seeds 1..N (GROUNDWORK_FAULT_SEEDS=50).
const (
	SeedsEnv     = "GROUNDWORK_FAULT_SEED"
	SeedCountEnv = "GROUNDWORK_FAULT_SEEDS"
)

// Seeds returns the seeds a test runs: the one in SeedsEnv when set (a replay), else 1..N for
// N in SeedCountEnv, else def.
func Seeds(getenv func(string) string, def ...uint64) []uint64 {
	if v := getenv(SeedsEnv); v != "" {
		var s uint64
		if _, err := fmt.Sscan(v, &s); err == nil {
			return []uint64{s}
		}
	}
	if v := getenv(SeedCountEnv); v != "" {
		var n uint64
		if _, err := fmt.Sscan(v, &n); err == nil && n > 0 {
			out := make([]uint64, n)
			for i := range out {
				out[i] = uint64(i) + 1
			}
			return out
		}
	}
	return def
}
