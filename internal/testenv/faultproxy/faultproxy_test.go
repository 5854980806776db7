package faultproxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// upstream counts the calls it served and answers each with 200 "ok".
func upstream(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		hits.Add(1)
		w.Header().Set("X-Upstream", "yes")
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(s.Close)
	return s, &hits
}

func start(t *testing.T, up string, p Profile, cfg Config) *Proxy {
	t.Helper()
	cfg.Logf = t.Logf
	px, err := Start(up, p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Close)
	return px
}

const authEC2 = "AWS4-HMAC-SHA256 Credential=testing/20260101/eu-west-1/ec2/aws4_request, SignedHeaders=host, Signature=x"

func ec2Call(t *testing.T, base, action string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/", strings.NewReader(url.Values{"Action": {action}, "Version": {"2016-11-15"}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	req.Header.Set("Authorization", authEC2)
	// A fresh connection per call: a reset must not be blamed on a pooled one.
	return (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
}

func TestFaults(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		cfg    Config
		action string
		// wantHits is how many calls the upstream served; wantErr whether the client got no answer.
		wantHits   int64
		wantErr    bool
		wantStatus int
		wantKind   Kind
	}{
		"throttle answers for the cloud, upstream untouched": {cfg: Config{Throttle: 1}, action: "CreateVpc", wantStatus: http.StatusServiceUnavailable, wantKind: Throttle},
		"drop answer after the upstream acted":               {cfg: Config{DropAnswer: 1}, action: "CreateVpc", wantHits: 1, wantErr: true, wantKind: DropAnswer},
		"a read is never dropped":                            {cfg: Config{DropAnswer: 1}, action: "DescribeVpcs", wantHits: 1, wantStatus: http.StatusOK},
		"reset before forwarding":                            {cfg: Config{Reset: 1}, action: "DescribeVpcs", wantErr: true, wantKind: Reset},
		"delay keeps the answer":                             {cfg: Config{Delay: 1, MaxDelay: 20 * time.Millisecond}, action: "CreateVpc", wantHits: 1, wantStatus: http.StatusOK, wantKind: Delay},
		"no faults":                                          {cfg: Config{}, action: "CreateVpc", wantHits: 1, wantStatus: http.StatusOK},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			up, hits := upstream(t)
			px := start(t, up.URL, AWS, tc.cfg)
			resp, err := ec2Call(t, px.URL, tc.action)
			if tc.wantErr {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("got answer %d, want the connection to fail", resp.StatusCode)
				}
			} else {
				if err != nil {
					t.Fatalf("call: %v", err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.wantStatus {
					t.Fatalf("status %d (%s), want %d", resp.StatusCode, b, tc.wantStatus)
				}
				if tc.wantKind == Throttle && !strings.Contains(string(b), "<Code>RequestLimitExceeded</Code>") {
					t.Fatalf("throttle answer %s is not EC2's", b)
				}
				if tc.wantStatus == http.StatusOK && (string(b) != "ok" || resp.Header.Get("X-Upstream") != "yes") {
					t.Fatalf("answer %q, headers %v: not the upstream's", b, resp.Header)
				}
			}
			if got := hits.Load(); got != tc.wantHits {
				t.Fatalf("upstream served %d calls, want %d", got, tc.wantHits)
			}
			f := px.Faults()
			if tc.wantKind == "" {
				if len(f) != 0 {
					t.Fatalf("faults %v, want none", f)
				}
				return
			}
			if len(f) != 1 || f[0].Kind != tc.wantKind || f[0].Operation != "ec2:"+tc.action || f[0].N != 0 {
				t.Fatalf("faults %+v, want one %s on ec2:%s #0", f, tc.wantKind, tc.action)
			}
			if tc.wantKind == DropAnswer && f[0].Upstream != http.StatusOK {
				t.Fatalf("dropped answer's upstream status %d, want 200", f[0].Upstream)
			}
		})
	}
}

// run sends the same sequence of calls through a proxy with seed and returns its faults.
func run(t *testing.T, seed uint64, ops []string) []Fault {
	t.Helper()
	up, _ := upstream(t)
	px := start(t, up.URL, AWS, Config{Seed: seed, Throttle: 0.2, DropAnswer: 0.3, Reset: 0.1})
	for _, op := range ops {
		if resp, err := ec2Call(t, px.URL, op); err == nil {
			resp.Body.Close()
		}
	}
	return px.Faults()
}

func TestSeedReplays(t *testing.T) {
	t.Parallel()
	var ops []string
	for range 20 {
		ops = append(ops, "CreateSubnet", "DescribeSubnets")
	}
	a, b := run(t, 7, ops), run(t, 7, ops)
	if len(a) == 0 || !reflect.DeepEqual(a, b) {
		t.Fatalf("seed 7 twice:\n%+v\n%+v\nwant the same, non-empty faults", a, b)
	}
	if c := run(t, 8, ops); reflect.DeepEqual(a, c) {
		t.Fatalf("seeds 7 and 8 injected the same faults %+v", a)
	}
	// Other calls in between do not move an operation's faults: the fate of the n-th
	// CreateSubnet depends on the seed and n only.
	var mixed []string
	for range 20 {
		mixed = append(mixed, "CreateSubnet", "DescribeSubnets", "DescribeVpcs", "DescribeVpcs")
	}
	only := func(fs []Fault, op string) []Fault {
		var out []Fault
		for _, f := range fs {
			if f.Operation == op {
				out = append(out, f)
			}
		}
		return out
	}
	if x, y := only(a, "ec2:CreateSubnet"), only(run(t, 7, mixed), "ec2:CreateSubnet"); !reflect.DeepEqual(x, y) {
		t.Fatalf("CreateSubnet faults moved with other calls:\n%+v\n%+v", x, y)
	}
}

func TestAWSProfile(t *testing.T) {
	t.Parallel()
	mk := func(method, path, target, auth, body string) Call {
		r := httptest.NewRequest(method, "http://proxy"+path, nil)
		if target != "" {
			r.Header.Set("X-Amz-Target", target)
			r.Header.Set("Content-Type", "application/x-amz-json-1.1")
		} else if body != "" {
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=k/20260101/us-east-1/"+auth+"/aws4_request, SignedHeaders=host, Signature=x")
		return Call{Req: r, Body: []byte(body)}
	}
	cases := map[string]struct {
		call       Call
		op         string
		mutating   bool
		status     int
		answerPart string
	}{
		"ec2 query":        {mk("POST", "/", "", "ec2", "Action=CreateSubnet&Version=1"), "ec2:CreateSubnet", true, 503, "RequestLimitExceeded"},
		"ec2 describe":     {mk("POST", "/", "", "ec2", "Action=DescribeSubnets"), "ec2:DescribeSubnets", false, 503, "RequestLimitExceeded"},
		"rds query":        {mk("POST", "/", "", "rds", "Action=CreateDBInstance"), "rds:CreateDBInstance", true, 400, "<Code>Throttling</Code>"},
		"ecr json":         {mk("POST", "/", "AmazonEC2ContainerRegistry_V20150921.CreateRepository", "ecr", "{}"), "ecr:CreateRepository", true, 400, "ThrottlingException"},
		"secrets get":      {mk("POST", "/", "secretsmanager.GetSecretValue", "secretsmanager", "{}"), "secretsmanager:GetSecretValue", false, 400, "ThrottlingException"},
		"eks rest create":  {mk("POST", "/clusters/c1/node-groups", "", "eks", "{}"), "eks:POST /clusters/*/node-groups", true, 429, "Rate exceeded"},
		"eks rest read":    {mk("GET", "/clusters/c1", "", "eks", ""), "eks:GET /clusters/*", false, 429, "Rate exceeded"},
		"route53 rest xml": {mk("POST", "/2013-04-01/hostedzone", "", "route53", "<x/>"), "route53:POST /*/hostedzone", true, 400, "<Code>Throttling</Code>"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := AWS.Operation(tc.call); got != tc.op {
				t.Errorf("operation %q, want %q", got, tc.op)
			}
			if got := AWS.Mutating(tc.call); got != tc.mutating {
				t.Errorf("mutating %v, want %v", got, tc.mutating)
			}
			w := httptest.NewRecorder()
			AWS.Throttled(w, tc.call)
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.answerPart) {
				t.Errorf("throttled answer %d %s, want %d with %q", w.Code, w.Body, tc.status, tc.answerPart)
			}
		})
	}
}

func TestSeeds(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cases := map[string]struct {
		env  map[string]string
		want []uint64
	}{
		"default": {nil, []uint64{1, 2, 3}},
		"replay":  {map[string]string{SeedsEnv: "42", SeedCountEnv: "9"}, []uint64{42}},
		"longer":  {map[string]string{SeedCountEnv: "5"}, []uint64{1, 2, 3, 4, 5}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := Seeds(env(tc.env), 1, 2, 3); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Seeds = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDropFirst(t *testing.T) {
	t.Parallel()
	up, hits := upstream(t)
	px := start(t, up.URL, AWS, Config{DropFirst: true})
	for i, want := range []bool{true, false, false} {
		resp, err := ec2Call(t, px.URL, "CreateVpc")
		if err == nil {
			resp.Body.Close()
		}
		if (err != nil) != want {
			t.Fatalf("CreateVpc #%d: err %v, want failed=%v", i, err, want)
		}
	}
	if resp, err := ec2Call(t, px.URL, "DescribeVpcs"); err != nil {
		t.Fatalf("a read lost its answer: %v", err)
	} else {
		resp.Body.Close()
	}
	if hits.Load() != 4 || px.Count(DropAnswer) != 1 {
		t.Fatalf("upstream served %d, %d answers dropped; want 4 and 1", hits.Load(), px.Count(DropAnswer))
	}
}

func TestRESTProfiles(t *testing.T) {
	t.Parallel()
	for _, p := range []Profile{GCP, Azure} {
		t.Run(p.Name, func(t *testing.T) {
			t.Parallel()
			put := Call{Req: httptest.NewRequest(http.MethodPut, "http://proxy/subscriptions/s1/resourceGroups/rg-7", nil)}
			get := Call{Req: httptest.NewRequest(http.MethodGet, "http://proxy/compute/v1/projects/p1/zones/z9/instances", nil)}
			if !p.Mutating(put) || p.Mutating(get) {
				t.Fatalf("mutating: PUT %v, GET %v; want true, false", p.Mutating(put), p.Mutating(get))
			}
			if got := p.Operation(put); got != "PUT /subscriptions/*/resourceGroups/*" {
				t.Fatalf("operation %q", got)
			}
			w := httptest.NewRecorder()
			p.Throttled(w, put)
			if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), `"error"`) {
				t.Fatalf("throttled answer %d %v %s", w.Code, w.Header(), w.Body)
			}
		})
	}
}
