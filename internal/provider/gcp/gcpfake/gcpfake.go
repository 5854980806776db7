// Package gcpfake is Google Cloud for tests: one HTTP server per service, speaking the REST
// shapes of the APIs Groundwork's GCP module calls, with state. Names are unique (a second
// create is 409 ALREADY_EXISTS), mutations answer with long-running operations that go
// PENDING → RUNNING → DONE as time passes (every request to a service is a tick), a re-sent
// requestId gets the first call's operation back, and refusals come in Google's error shape
// (error.code, status, errors[].reason and a google.rpc.ErrorInfo detail).
//
// No GCP emulator runs here; the shapes follow Google's REST references and recorded
// traffic of the real APIs. What is not simulated (VMs that boot, clusters that serve,
// databases that answer SQL) is said per service in docs/clouds.md.
package gcpfake

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
)

// Project is the project every fake cloud serves.
const Project = "groundwork-fake"

// ProjectNumber is Project's number, as ErrorInfo's consumer names it.
const ProjectNumber = "424242424242"

// Hosts are the services a Cloud serves, by their Google host name.
var Hosts = []string{
	"compute.googleapis.com", "dns.googleapis.com", "artifactregistry.googleapis.com",
	"sqladmin.googleapis.com", "redis.googleapis.com", "secretmanager.googleapis.com",
	"container.googleapis.com", "iam.googleapis.com", "cloudresourcemanager.googleapis.com",
	"servicenetworking.googleapis.com", "iamcredentials.googleapis.com",
}

// Resource is one thing the fake project holds.
type Resource struct {
	// Service is the host of the API that serves it.
	Service string
	// Kind is its type ("dns#managedZone", "artifactregistry.repository").
	Kind string
	// Name is its full path under the service ("projects/p/managedZones/z").
	Name string
	// Body is the resource as the API answers it.
	Body map[string]any
	// Pending hides a resource whose create operation is under way: reads answer 404, a
	// second create 409, as Google reserves the name until the operation is done.
	Pending bool
}

// Labels are the resource's labels.
func (r Resource) Labels() map[string]string {
	out := map[string]string{}
	if m, ok := r.Body["labels"].(map[string]any); ok {
		for k, v := range m {
			out[k] = fmt.Sprint(v)
		}
	}
	if m, ok := r.Body["labels"].(map[string]string); ok {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// Call is one request the fake answered.
type Call struct {
	Service, Method, Path string
	Status                int
	// Token is the bearer token the request carried ("" without one).
	Token string
}

// Cloud is one fake project.
type Cloud struct {
	Project string

	servers map[string]*httptest.Server
	muxes   map[string]*http.ServeMux

	mu        sync.Mutex
	resources map[string]*Resource // service + " " + name
	ops       map[string]*Op       // service + " " + op name
	requests  map[string]*Op       // service + " " + requestId
	faults    []*faultRule
	disabled  map[string]bool
	denied    []denial
	calls     []Call
	seq       int
	noBoot    map[string]bool
	serial    map[string]string // console output a test set, by instance name
	made      []string          // compute resources made, in order, by full name (Made)
	// Ticks is how many requests to its service an operation takes to finish (default 3):
	// the first answer says PENDING, then RUNNING, then DONE.
	ticks int
}

type faultRule struct {
	service, method, path string
	times                 int
	status                int
	reason                string
}

type denial struct{ service, path, permission string }

// New starts a fake project with every service; the servers stop with the test.
func New(t testing.TB) *Cloud {
	t.Helper()
	c := &Cloud{Project: Project, servers: map[string]*httptest.Server{}, muxes: map[string]*http.ServeMux{},
		resources: map[string]*Resource{}, ops: map[string]*Op{}, requests: map[string]*Op{}, disabled: map[string]bool{}, ticks: 3}
	for _, h := range Hosts {
		mux := http.NewServeMux()
		c.muxes[h] = mux
		host := h
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { c.serve(host, w, r) }))
		c.servers[h] = srv
		t.Cleanup(srv.Close)
	}
	c.registerDNS()
	c.registerArtifactRegistry()
	for _, reg := range registrations {
		reg(c)
	}
	return c
}

// registrations are the services other files of this package add (each file's init).
var registrations []func(*Cloud)

// Endpoints are the servers' base URLs by host: an account's config.endpoints.
func (c *Cloud) Endpoints() map[string]string {
	out := map[string]string{}
	for h, s := range c.servers {
		out[h] = s.URL + "/"
	}
	return out
}

// SetTicks sets how many requests to its service an operation takes to finish.
func (c *Cloud) SetTicks(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ticks = n
}

// Handle serves pattern (an http.ServeMux pattern) on the service at host.
func (c *Cloud) Handle(host, pattern string, h http.HandlerFunc) {
	c.muxes[host].HandleFunc(pattern, h)
}

func (c *Cloud) serve(host string, w http.ResponseWriter, r *http.Request) {
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		c.mu.Lock()
		c.calls = append(c.calls, Call{Service: host, Method: r.Method, Path: r.URL.Path, Status: rec.status,
			Token: strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")})
		c.mu.Unlock()
	}()
	c.mu.Lock()
	c.tick(host)
	if c.disabled[host] {
		c.mu.Unlock()
		WriteError(rec, http.StatusForbidden, "PERMISSION_DENIED",
			fmt.Sprintf("%s API has not been used in project %s before or it is disabled. Enable it by visiting https://console.developers.google.com/apis/api/%s/overview?project=%s then retry.", host, ProjectNumber, host, ProjectNumber),
			"accessNotConfigured", ErrorInfo("SERVICE_DISABLED", map[string]string{"service": host, "consumer": "projects/" + ProjectNumber}))
		return
	}
	for _, d := range c.denied {
		if d.service == host && strings.Contains(r.URL.Path, d.path) {
			c.mu.Unlock()
			WriteError(rec, http.StatusForbidden, "PERMISSION_DENIED",
				fmt.Sprintf("Permission '%s' denied on resource (or it may not exist).", d.permission),
				"forbidden", ErrorInfo("IAM_PERMISSION_DENIED", map[string]string{"permission": d.permission}))
			return
		}
	}
	for _, f := range c.faults {
		if f.times != 0 && f.service == host && (f.method == "" || f.method == r.Method) && strings.Contains(r.URL.Path, f.path) {
			f.times--
			c.mu.Unlock()
			WriteError(rec, f.status, statusName(f.status), "injected: "+f.reason, f.reason)
			return
		}
	}
	c.mu.Unlock()
	if _, pattern := c.muxes[host].Handler(r); pattern == "" {
		WriteError(rec, http.StatusNotFound, "NOT_FOUND", "The requested URL "+r.URL.Path+" was not found on this server.", "notFound")
		return
	}
	c.muxes[host].ServeHTTP(rec, r)
}

type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) { r.status = code; r.ResponseWriter.WriteHeader(code) }

// Disable answers every request to the service at host as Google does for an API the
// project has not enabled (403 SERVICE_DISABLED); Enable undoes it.
func (c *Cloud) Disable(host string) { c.mu.Lock(); c.disabled[host] = true; c.mu.Unlock() }

// Enable undoes Disable.
func (c *Cloud) Enable(host string) { c.mu.Lock(); delete(c.disabled, host); c.mu.Unlock() }

// Deny answers requests to the service at host whose path holds path as a caller without
// permission (403 IAM_PERMISSION_DENIED naming permission).
func (c *Cloud) Deny(host, path, permission string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.denied = append(c.denied, denial{service: host, path: path, permission: permission})
}

// Fail answers the next times requests (method "" for any) to host whose path holds path
// with status and reason; times < 0 fails them all.
func (c *Cloud) Fail(host, method, path string, times, status int, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults = append(c.faults, &faultRule{service: host, method: method, path: path, times: times, status: status, reason: reason})
}

// Calls are the requests answered so far.
func (c *Cloud) Calls() []Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Call(nil), c.calls...)
}

// Mutations counts the answered non-GET requests to host whose path holds path.
func (c *Cloud) Mutations(host, path string) int {
	n := 0
	for _, call := range c.Calls() {
		if call.Service == host && call.Method != http.MethodGet && strings.Contains(call.Path, path) {
			n++
		}
	}
	return n
}

// Resources lists what the project holds, pending creates left out, by service and name.
func (c *Cloud) Resources() []Resource {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Resource
	for _, r := range c.resources {
		if !r.Pending {
			out = append(out, clone(*r))
		}
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Service+out[i].Name < out[k].Service+out[k].Name })
	return out
}

// Put stores r (a test's resource made behind Groundwork's back, or a handler's).
func (c *Cloud) Put(r Resource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.put(r)
}

func (c *Cloud) put(r Resource) {
	cp := clone(r)
	c.resources[r.Service+" "+r.Name] = &cp
}

// Lookup finds a resource by service and name; pending ones too.
func (c *Cloud) Lookup(service, name string) (Resource, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.resources[service+" "+name]
	if !ok {
		return Resource{}, false
	}
	return clone(*r), true
}

// Remove deletes a resource by service and name.
func (c *Cloud) Remove(service, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.resources, service+" "+name)
}

// Under lists the resources of service whose name is parent + "/" + one more segment pair
// (a collection's members), pending ones left out, by name.
func (c *Cloud) Under(service, collection string) []Resource {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Resource
	prefix := collection + "/"
	for _, r := range c.resources {
		if r.Service == service && !r.Pending && strings.HasPrefix(r.Name, prefix) && !strings.Contains(r.Name[len(prefix):], "/") {
			out = append(out, clone(*r))
		}
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Name < out[k].Name })
	return out
}

// Update changes a stored resource under the lock.
func (c *Cloud) Update(service, name string, f func(r *Resource)) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.resources[service+" "+name]
	if ok {
		f(r)
	}
	return ok
}

func clone(r Resource) Resource {
	b, _ := json.Marshal(r.Body)
	var body map[string]any
	_ = json.Unmarshal(b, &body)
	r.Body = body
	return r
}

func (c *Cloud) next() int { c.seq++; return c.seq }

// ReadJSON decodes a request body into v; a malformed one is answered 400.
func ReadJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid JSON payload received. "+err.Error(), "badRequest")
		return false
	}
	return true
}

// WriteJSON answers v with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// ErrorInfo is a google.rpc.ErrorInfo detail.
func ErrorInfo(reason string, metadata map[string]string) map[string]any {
	return map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason,
		"domain": "googleapis.com", "metadata": metadata}
}

// WriteError answers Google's REST error shape: code, message and status, the errors[] items
// of the older front end with their reason, and details.
func WriteError(w http.ResponseWriter, code int, status, message, reason string, details ...map[string]any) {
	body := map[string]any{"code": code, "message": message, "status": status,
		"errors": []map[string]any{{"message": message, "domain": "global", "reason": reason}}}
	if len(details) > 0 {
		body["details"] = details
	}
	WriteJSON(w, code, map[string]any{"error": body})
}

func statusName(code int) string {
	switch code {
	case 400:
		return "INVALID_ARGUMENT"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 409:
		return "ALREADY_EXISTS"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 503:
		return "UNAVAILABLE"
	}
	if code >= 500 {
		return "INTERNAL"
	}
	return "UNKNOWN"
}

// NotFound answers 404 for the resource named.
func NotFound(w http.ResponseWriter, what string) {
	WriteError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("The resource '%s' was not found", what), "notFound")
}

// AlreadyExists answers 409 for the resource named.
func AlreadyExists(w http.ResponseWriter, what string) {
	WriteError(w, http.StatusConflict, "ALREADY_EXISTS", fmt.Sprintf("The resource '%s' already exists", what), "alreadyExists")
}

// newUUID is a random version-4 UUID, as Google's operation ids are.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
