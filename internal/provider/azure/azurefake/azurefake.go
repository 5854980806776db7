// Package azurefake is an Azure Resource Manager test target built on the fake servers the
// azure-sdk-for-go arm* modules ship (each module's fake.ServerFactory), given state: a
// resource PUT is there to GET until it is DELETEd, in the resource group it names, which must
// exist.
//
// It is an HTTP server, so that a server process under test (one that is SIGKILLed and
// restarted, say) reaches the same cloud as the test that checks it. Around the modules' fakes
// it adds what Azure Resource Manager does and the fakes leave to the caller:
//   - long-running operations as Azure runs them: a PUT answers 201 and a DELETE 202, with an
//     Azure-AsyncOperation URL that reports InProgress for a few polls and then Succeeded;
//     meanwhile the resource reads as Creating/Updating (or Deleting);
//   - Azure's error body, {"error": {"code", "message"}}, with its status;
//   - resource providers a subscription has not registered (MissingSubscriptionRegistration)
//     and refusals injected by a test (Fail), to check how each error class is handled.
//
// The modules' fakes dispatch on the API name the SDK puts in a request's context. That name
// does not cross HTTP, so clients reach the server through Transport, which carries it in a
// header; the server's own code is unchanged (the module takes the transport as an option).
package azurefake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
)

// HeaderAPIName carries the SDK's API name ("VirtualNetworksClient.BeginCreateOrUpdate")
// from Transport to the server.
const HeaderAPIName = "X-Azurefake-Api"

// Subscription is the subscription every Cloud serves.
const Subscription = "00000000-0000-0000-0000-00000000fa4e"

// PollsInProgress is how many polls of an operation answer InProgress before it succeeds.
const PollsInProgress = 3

// Cloud is one fake Azure subscription.
type Cloud struct {
	// URL is the base URL to give the Azure module as an account's endpoint.
	URL string
	srv *httptest.Server

	mu           sync.Mutex
	objs         map[string]json.RawMessage // by lower-case resource id
	ops          map[string]*operation      // by operation id
	inflight     map[string]*operation      // by lower-case resource id
	fails        []*failure
	unregistered map[string]bool // lower-case namespace
	nextOp       int
	calls        []string // "PUT /subscriptions/...", in order
	actions      []string // every request's RBAC action, in order (actions.go)
	polls        int      // GETs of operation status URLs
	vaults       map[string]vaultSecrets
	redisKeys    map[string][2]string // a cache's access keys, by lower-case id

	routes []route
}

type route struct {
	prefix string // the API name's client ("VirtualNetworksClient")
	tr     policy.Transporter
	// namespace, when set, is the resource provider the route serves: two modules name a
	// client alike (PostgreSQL's and MySQL's ServersClient), the path tells them apart.
	namespace string
}

type operation struct {
	id        string
	resource  string // lower-case id
	method    string
	pollsLeft int
	snapshot  json.RawMessage // the resource as it was, while a DELETE is in flight
	err       *azcore.ResponseError
}

type failure struct {
	method, pathContains string
	status               int
	code, message        string
	times                int
}

// New starts a fake subscription for the test's life.
func New(t testing.TB) *Cloud {
	c := &Cloud{objs: map[string]json.RawMessage{}, ops: map[string]*operation{}, inflight: map[string]*operation{},
		unregistered: map[string]bool{}}
	c.routes = c.servers()
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	c.URL = c.srv.URL
	t.Cleanup(c.srv.Close)
	return c
}

// Fail makes the next times requests whose method is method and whose path contains
// pathContains answer status with Azure's error body.
func (c *Cloud) Fail(method, pathContains string, status int, code, message string, times int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fails = append(c.fails, &failure{method: method, pathContains: strings.ToLower(pathContains), status: status, code: code, message: message, times: times})
}

// Unregister makes the subscription refuse writes to a resource provider namespace
// ("Microsoft.ContainerService") as not registered, as a new subscription does.
func (c *Cloud) Unregister(namespace string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unregistered[strings.ToLower(namespace)] = true
}

// Resource is one thing the subscription holds.
type Resource struct {
	ID, Type, Name string
	Tags           map[string]string
}

// Resources lists everything the subscription holds (resource groups included), sorted by id.
func (c *Cloud) Resources() []Resource {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Resource
	for _, raw := range c.objs {
		var r struct {
			ID, Type, Name string
			Tags           map[string]*string
		}
		_ = json.Unmarshal(raw, &r)
		tags := map[string]string{}
		for k, v := range r.Tags {
			if v != nil {
				tags[k] = *v
			}
		}
		out = append(out, Resource{ID: r.ID, Type: r.Type, Name: r.Name, Tags: tags})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Calls returns the mutating requests made so far ("PUT /subscriptions/…").
func (c *Cloud) Calls() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.calls...)
}

// OperationPolls is how many times a long-running operation's status was read: a poller
// resumed from its token reads it, a GET of the resource does not.
func (c *Cloud) OperationPolls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.polls
}

// Transport is the client side: it sends the SDK's requests to the cloud at base (a Cloud's
// URL, possibly one in another process) with the API name in a header.
func Transport(base string) policy.Transporter {
	u, err := url.Parse(strings.TrimSuffix(base, "/"))
	if err != nil {
		panic(fmt.Sprintf("azurefake: base URL %q: %v", base, err)) // a test's own constant
	}
	return transport{scheme: u.Scheme, host: u.Host, c: &http.Client{}}
}

type transport struct {
	scheme, host string
	c            *http.Client
}

func (t transport) Do(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	if name, ok := req.Context().Value(runtime.CtxAPINameKey{}).(string); ok {
		r.Header.Set(HeaderAPIName, name)
	}
	r.Header.Set(HeaderHost, req.URL.Host)
	u := *req.URL
	u.Scheme, u.Host = t.scheme, t.host
	r.URL, r.Host, r.RequestURI = &u, "", ""
	return t.c.Do(r)
}

var asyncPath = regexp.MustCompile(`(?i)/operation(?:Statuses|Results)/([^/?]+)$`)

func (c *Cloud) serve(w http.ResponseWriter, req *http.Request) {
	path := req.URL.Path
	host := req.Header.Get(HeaderHost)
	c.noteAction(req, strings.Contains(host, ".vault."))
	if strings.Contains(host, ".vault.") {
		c.serveVault(w, req, host)
		return
	}
	if m := asyncPath.FindStringSubmatch(path); m != nil {
		c.serveOperation(w, req, m[1], strings.Contains(strings.ToLower(path), "operationresults"))
		return
	}
	// A request is Azure's to act on once it has arrived whole: read it all before it counts
	// as a call. A client killed while sending leaves a torn body, which Azure never sees.
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	if req.Method != http.MethodGet {
		c.mu.Lock()
		c.calls = append(c.calls, req.Method+" "+path)
		c.mu.Unlock()
	}
	if f := c.injected(req); f != nil {
		writeError(w, f.status, f.code, f.message)
		return
	}
	if ns := namespaceOf(path); ns != "" && req.Method != http.MethodGet && c.isUnregistered(ns) {
		writeError(w, http.StatusConflict, "MissingSubscriptionRegistration",
			fmt.Sprintf("The subscription is not registered to use namespace '%s'. See https://aka.ms/rps-not-found for how to register subscriptions.", ns))
		return
	}
	if !strings.HasPrefix(strings.ToLower(path), "/subscriptions/"+Subscription) {
		writeError(w, http.StatusNotFound, "SubscriptionNotFound", "The subscription '"+subscriptionOf(path)+"' could not be found.")
		return
	}
	id := resourceID(path)
	name := req.Header.Get(HeaderAPIName)
	if name == "" {
		// The poller's final GET of a resource carries no API name: answer it from state.
		if req.Method != http.MethodGet {
			writeError(w, http.StatusBadRequest, "InvalidRequest", "no API name on a "+req.Method)
			return
		}
		c.mu.Lock()
		raw, ok := c.objs[id]
		c.mu.Unlock()
		if !ok {
			writeError(w, http.StatusNotFound, "ResourceNotFound", "The Resource '"+path+"' was not found.")
			return
		}
		writeJSON(w, http.StatusOK, raw)
		return
	}
	var tr policy.Transporter
	for _, r := range c.routes {
		if strings.HasPrefix(name, r.prefix+".") && (r.namespace == "" || strings.EqualFold(r.namespace, namespaceOf(path))) {
			tr = r.tr
		}
	}
	if tr == nil {
		writeError(w, http.StatusBadRequest, "NotImplemented", "the fake has no server for "+name)
		return
	}
	var before json.RawMessage
	if req.Method == http.MethodDelete {
		c.mu.Lock()
		before = c.objs[id]
		c.mu.Unlock()
	}
	// Azure carries out a request that arrived whether or not its caller waits for the answer,
	// so the modules' fakes get a context the caller's hang-up does not cancel. (They give up
	// on a cancelled request midway, leaving a PUT applied or not at random, and can then
	// panic sending their result on a closed channel.)
	in := req.Clone(context.WithValue(context.WithoutCancel(req.Context()), runtime.CtxAPINameKey{}, name))
	in.Body = io.NopCloser(bytes.NewReader(body))
	in.URL.Scheme, in.URL.Host = "https", "management.azure.com"
	resp, err := tr.Do(in)
	if err != nil {
		var re *azcore.ResponseError
		if errors.As(err, &re) {
			writeError(w, re.StatusCode, re.ErrorCode, messageOf(re.ErrorCode, req))
			return
		}
		writeError(w, http.StatusInternalServerError, "InternalServerError", err.Error())
		return
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	long := resp.Header.Get("Fake-Poller-Status") != ""
	if long && resp.StatusCode != http.StatusNoContent && (req.Method == http.MethodPut || req.Method == http.MethodDelete || req.Method == http.MethodPatch) {
		c.startOperation(w, req, id, out, before)
		return
	}
	if req.Method == http.MethodGet && resp.StatusCode == http.StatusOK {
		out = c.duringOperation(id, out)
	}
	for k, vs := range resp.Header {
		if k == "Fake-Poller-Status" {
			continue
		}
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(out)
}

// startOperation answers a long-running PUT, PATCH or DELETE as Azure does: 201 (PUT) or
// 202 with an Azure-AsyncOperation URL to poll.
func (c *Cloud) startOperation(w http.ResponseWriter, req *http.Request, id string, out, before json.RawMessage) {
	c.mu.Lock()
	c.nextOp++
	op := &operation{id: fmt.Sprintf("op-%06d", c.nextOp), resource: id, method: req.Method, pollsLeft: PollsInProgress, snapshot: before}
	c.ops[op.id] = op
	c.inflight[id] = op
	c.mu.Unlock()
	base := "http://" + req.Host + "/subscriptions/" + Subscription + "/providers/" + orDefault(namespaceOf(req.URL.Path), "Microsoft.Resources") + "/locations/fake"
	w.Header().Set("Azure-AsyncOperation", base+"/operationStatuses/"+op.id)
	w.Header().Set("Retry-After", "0")
	if req.Method == http.MethodDelete || req.Method == http.MethodPatch {
		// A PATCH is accepted as a DELETE is: 202, no body; the poller reads the resource
		// once the operation is done.
		w.Header().Set("Location", base+"/operationResults/"+op.id)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	status := http.StatusCreated
	if len(out) > 0 {
		out = c.duringOperation(id, out)
	}
	writeJSON(w, status, out)
}

func (c *Cloud) serveOperation(w http.ResponseWriter, _ *http.Request, id string, result bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	op, ok := c.ops[id]
	if !ok {
		writeError(w, http.StatusNotFound, "OperationNotFound", "operation "+id+" not found")
		return
	}
	c.polls++
	if op.pollsLeft > 0 && !result {
		op.pollsLeft--
		writeJSON(w, http.StatusOK, json.RawMessage(`{"id":"`+id+`","name":"`+id+`","status":"InProgress"}`))
		return
	}
	delete(c.inflight, op.resource)
	if result {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, http.StatusOK, json.RawMessage(`{"id":"`+id+`","name":"`+id+`","status":"Succeeded"}`))
}

// duringOperation shows a resource with an operation in flight as Azure does: Creating (or
// Updating) until it is done. A resource being deleted reads as it was, Deleting.
func (c *Cloud) duringOperation(id string, out []byte) []byte {
	c.mu.Lock()
	op := c.inflight[id]
	if op != nil && op.pollsLeft > 0 {
		// Azure finishes an operation whether or not anyone polls it; here a read of the
		// resource moves it on as a poll does, so that progress needs no clock.
		op.pollsLeft--
	} else {
		op = nil
	}
	c.mu.Unlock()
	if op == nil {
		return out
	}
	state, serverState := "Creating", "Starting"
	switch {
	case op.method == http.MethodDelete:
		state, serverState = "Deleting", "Dropping"
		if op.snapshot != nil {
			out = op.snapshot
		}
	case op.method == http.MethodPatch:
		state, serverState = "Updating", "Updating"
	}
	var m map[string]any
	if json.Unmarshal(out, &m) != nil {
		return out
	}
	props, _ := m["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
		m["properties"] = props
	}
	props["provisioningState"] = state
	if _, ok := props["state"]; ok {
		// A flexible server reports its life in state, not provisioningState: it is not
		// Ready while an operation on it runs.
		props["state"] = serverState
	}
	b, _ := json.Marshal(m)
	return b
}

func (c *Cloud) injected(req *http.Request) *failure {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := strings.ToLower(req.URL.Path)
	for _, f := range c.fails {
		if f.times > 0 && (f.method == "" || f.method == req.Method) && strings.Contains(p, f.pathContains) {
			f.times--
			return f
		}
	}
	return nil
}

func (c *Cloud) isUnregistered(ns string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.unregistered[strings.ToLower(ns)]
}

var nsPattern = regexp.MustCompile(`(?i)/providers/(Microsoft\.[A-Za-z]+)/`)

func namespaceOf(path string) string {
	if m := nsPattern.FindStringSubmatch(path); m != nil {
		return m[1]
	}
	return ""
}

func subscriptionOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) > 1 {
		return parts[1]
	}
	return ""
}

// resourceID is a request path as the key of what it names.
func resourceID(path string) string { return strings.ToLower(strings.TrimSuffix(path, "/")) }

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func writeJSON(w http.ResponseWriter, status int, body json.RawMessage) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": message}})
	w.Header().Set("x-ms-error-code", code)
	writeJSON(w, status, b)
}

// messageOf is the message Azure gives with a code, as near as the fake knows it.
func messageOf(code string, req *http.Request) string {
	switch code {
	case "ResourceNotFound":
		return "The Resource '" + req.URL.Path + "' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix"
	case "ResourceGroupNotFound":
		return "Resource group of '" + req.URL.Path + "' could not be found."
	}
	return code + ": the request " + req.Method + " " + req.URL.Path + " was refused."
}
