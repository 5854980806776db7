package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"time"
)

// The one pair this provisioner handles.
const (
	pairKind = "managed-resource"
	pairType = "bucket"
)

// The protocol's shapes, written out here so that this program depends on nothing but the
// protocol document.

type request struct {
	Kind        string          `json:"kind"`
	Type        string          `json:"type"`
	Application string          `json:"application"`
	RequestID   string          `json:"requestId,omitempty"`
	Ensure      string          `json:"ensure,omitempty"`
	Settings    json.RawMessage `json:"settings,omitempty"`
}

type failure struct {
	Reason    string `json:"reason,omitempty"`
	Code      string `json:"code,omitempty"`
	FixHint   string `json:"fixHint,omitempty"`
	Retryable bool   `json:"retryable,omitempty"`
}

type resource struct {
	Resource   string         `json:"resource"`
	Type       string         `json:"resourceType"`
	ID         string         `json:"id,omitempty"`
	Exists     bool           `json:"exists"`
	Properties map[string]any `json:"properties,omitempty"`
}

type change struct {
	Resource   string   `json:"resource"`
	Type       string   `json:"resourceType"`
	Action     string   `json:"action"`
	Before     any      `json:"before,omitempty"`
	After      any      `json:"after,omitempty"`
	Operations []string `json:"operations"`
}

type drift struct {
	Resource string `json:"resource"`
	Field    string `json:"field"`
	Applied  any    `json:"applied"`
	Actual   any    `json:"actual"`
}

type operation struct {
	OperationID string         `json:"operationId"`
	Outcome     string         `json:"outcome"` // in_progress, succeeded, failed
	Kind        string         `json:"kind"`
	Type        string         `json:"type"`
	Application string         `json:"application"`
	Progress    string         `json:"progress,omitempty"`
	Resources   []resource     `json:"resources,omitempty"`
	Outputs     map[string]any `json:"outputs,omitempty"`
	failure
}

// spec is a bucket's settings, after defaults.
type spec struct {
	Mode        string `json:"mode"`
	Description string `json:"description"`
}

// savedOp is how an operation is kept on disk (its internal fields included).
type savedOp struct {
	Op        operation `json:"op"`
	Ensure    string    `json:"ensure"`
	Spec      spec      `json:"spec"`
	StartedAt time.Time `json:"startedAt"`
}

// state is everything that must survive a restart.
type state struct {
	Operations map[string]savedOp `json:"operations"`
	Keys       map[string]string  `json:"keys"`    // idempotency key → operation id
	Applied    map[string]spec    `json:"applied"` // application → what was last applied
}

type provisioner struct {
	root, statePath string
	delay           time.Duration
	log             *slog.Logger

	mu sync.Mutex
	st state
	wg sync.WaitGroup
}

func newProvisioner(root, statePath string, delay time.Duration, log *slog.Logger) (*provisioner, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("root: %w", err)
	}
	p := &provisioner{root: root, statePath: statePath, delay: delay, log: log,
		st: state{Operations: map[string]savedOp{}, Keys: map[string]string{}, Applied: map[string]spec{}}}
	data, err := os.ReadFile(statePath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read state: %w", err)
	default:
		if err := json.Unmarshal(data, &p.st); err != nil {
			return nil, fmt.Errorf("decode state %s: %w", statePath, err)
		}
	}
	return p, nil
}

// save writes the state atomically (temp file + rename), so that a kill never leaves half a
// file. The caller holds p.mu.
func (p *provisioner) save() error {
	data, err := json.MarshalIndent(p.st, "", "  ")
	if err != nil {
		return err
	}
	tmp := p.statePath + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, p.statePath)
}

// resume restarts the work of every operation left in progress by a previous run.
func (p *provisioner) resume(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, so := range p.st.Operations {
		if so.Op.Outcome == "in_progress" {
			p.log.Info("resuming operation", "operationId", id, "application", so.Op.Application)
			so.Op.Progress = "resumed after a restart"
			p.st.Operations[id] = so
			p.start(ctx, id)
		}
	}
}

func (p *provisioner) wait() { p.wg.Wait() }

func (p *provisioner) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /plan", p.handlePlan)
	mux.HandleFunc("POST /apply", p.handleApply)
	mux.HandleFunc("POST /inspect", p.handleInspect)
	mux.HandleFunc("GET /operations/{id}", p.handleOperation)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"status": "ok", "name": "example-bucket-provisioner",
			"pairs": []map[string]string{{"kind": pairKind, "type": pairType}}})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		problem(w, 404, "unknown call", r.Method+" "+r.URL.Path+" is not a call of the provisioner protocol")
	})
	return mux
}

var appName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
var modeRe = regexp.MustCompile(`^0?[0-7]{3}$`)

// decode reads a request; it answers (and returns false) when the call is broken or names
// another pair.
func decode(w http.ResponseWriter, r *http.Request, failed func(failure) any) (*request, bool) {
	var req request
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	if err := dec.Decode(&req); err != nil {
		problem(w, 400, "malformed request", err.Error())
		return nil, false
	}
	if req.Kind == "" || req.Type == "" || req.Application == "" {
		problem(w, 400, "malformed request", "kind, type and application are required")
		return nil, false
	}
	if req.Ensure != "" && req.Ensure != "present" && req.Ensure != "absent" {
		problem(w, 400, "malformed request", "ensure must be present or absent")
		return nil, false
	}
	if req.Kind != pairKind || req.Type != pairType {
		writeJSON(w, 200, failed(failure{Code: "UnsupportedPair", Reason: fmt.Sprintf("this provisioner does not handle %s/%s", req.Kind, req.Type)}))
		return nil, false
	}
	if !appName.MatchString(req.Application) {
		writeJSON(w, 200, failed(failure{Code: "InvalidApplication", Reason: "application must be lower-case letters, digits, '.', '_' or '-'"}))
		return nil, false
	}
	if req.Ensure == "" {
		req.Ensure = "present"
	}
	return &req, true
}

// specOf reads and checks the settings; a refusal is a failure of the work, not of the call.
func specOf(req *request) (spec, *failure) {
	s := spec{Mode: "0755"}
	if len(req.Settings) > 0 && string(req.Settings) != "null" {
		if err := json.Unmarshal(req.Settings, &s); err != nil {
			return s, &failure{Code: "InvalidSettings", Reason: "settings: " + err.Error()}
		}
	}
	if !modeRe.MatchString(s.Mode) {
		return s, &failure{Code: "InvalidSettings", Reason: fmt.Sprintf("settings.mode %q must be octal permission bits such as 0750", s.Mode), FixHint: "use three octal digits"}
	}
	if len(s.Mode) == 3 {
		s.Mode = "0" + s.Mode
	}
	return s, nil
}

// key is the apply's idempotency key: its requestId, or a hash of what it asks for.
func key(req *request, s spec) string {
	if req.RequestID != "" {
		return req.RequestID
	}
	b, _ := json.Marshal([]any{req.Kind, req.Type, req.Application, req.Ensure, s})
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func (p *provisioner) dir(app string) string { return filepath.Join(p.root, app) }

const descFile = "BUCKET.txt"

// observe reads a bucket as it is on disk.
func (p *provisioner) observe(app string) resource {
	res := resource{Resource: app, Type: "directory", ID: p.dir(app)}
	fi, err := os.Stat(p.dir(app))
	if err != nil || !fi.IsDir() {
		return res
	}
	res.Exists = true
	desc, _ := os.ReadFile(filepath.Join(p.dir(app), descFile))
	res.Properties = map[string]any{
		"mode":        fmt.Sprintf("%04o", fi.Mode().Perm()),
		"description": string(desc),
	}
	return res
}

func (p *provisioner) handlePlan(w http.ResponseWriter, r *http.Request) {
	failed := func(f failure) any {
		return struct {
			Outcome string   `json:"outcome"`
			Changes []change `json:"changes"`
			failure
		}{"failed", []change{}, f}
	}
	req, ok := decode(w, r, failed)
	if !ok {
		return
	}
	s, f := specOf(req)
	if f != nil && req.Ensure == "present" {
		writeJSON(w, 200, failed(*f))
		return
	}
	cur := p.observe(req.Application)
	ch := change{Resource: req.Application, Type: "directory", Operations: []string{}}
	switch {
	case req.Ensure == "absent" && cur.Exists:
		ch.Action, ch.Before, ch.Operations = "delete", cur.Properties, []string{"rm -r " + p.dir(req.Application)}
	case req.Ensure == "absent":
		ch.Action = "none"
	case !cur.Exists:
		ch.Action, ch.After = "create", s
		ch.Operations = []string{"mkdir " + p.dir(req.Application), "chmod " + s.Mode, "write " + descFile}
	default:
		ch.Before, ch.After = cur.Properties, s
		if cur.Properties["mode"] != s.Mode {
			ch.Operations = append(ch.Operations, "chmod "+s.Mode)
		}
		if cur.Properties["description"] != s.Description {
			ch.Operations = append(ch.Operations, "write "+descFile)
		}
		ch.Action = "update"
		if len(ch.Operations) == 0 {
			ch.Action = "none"
		}
	}
	writeJSON(w, 200, map[string]any{"outcome": "succeeded", "changes": []change{ch}})
}

func (p *provisioner) handleApply(w http.ResponseWriter, r *http.Request) {
	failed := func(f failure) any {
		return struct {
			Outcome string `json:"outcome"`
			failure
		}{"failed", f}
	}
	req, ok := decode(w, r, failed)
	if !ok {
		return
	}
	s, f := specOf(req)
	if f != nil && req.Ensure == "present" {
		writeJSON(w, 200, failed(*f))
		return
	}
	k := key(req, s)

	p.mu.Lock()
	defer p.mu.Unlock()
	// The same key gives the same operation, unless it failed: repeating a failed apply is how
	// a caller retries.
	if id, ok := p.st.Keys[k]; ok {
		if so, ok := p.st.Operations[id]; ok && so.Op.Outcome != "failed" {
			answerApply(w, so.Op)
			return
		}
	}
	id := newID()
	so := savedOp{
		Op: operation{OperationID: id, Outcome: "in_progress", Kind: pairKind, Type: pairType,
			Application: req.Application, Progress: "accepted"},
		Ensure: req.Ensure, Spec: s, StartedAt: time.Now().UTC(),
	}
	p.st.Operations[id] = so
	p.st.Keys[k] = id
	// Saved before answering 202: an operation the caller was told about survives a crash.
	if err := p.save(); err != nil {
		delete(p.st.Operations, id)
		delete(p.st.Keys, k)
		p.log.Error("save state", "err", err)
		problem(w, 500, "state not saved", "the provisioner could not save its state")
		return
	}
	p.start(context.Background(), id)
	answerApply(w, so.Op)
}

func answerApply(w http.ResponseWriter, op operation) {
	if op.Outcome == "in_progress" {
		w.Header().Set("Location", "operations/"+op.OperationID)
		writeJSON(w, 202, map[string]any{"outcome": "accepted", "operationId": op.OperationID})
		return
	}
	writeJSON(w, 200, struct {
		Outcome     string         `json:"outcome"`
		OperationID string         `json:"operationId"`
		Resources   []resource     `json:"resources,omitempty"`
		Outputs     map[string]any `json:"outputs,omitempty"`
		failure
	}{op.Outcome, op.OperationID, op.Resources, op.Outputs, op.failure})
}

// start does an operation's work in the background. The caller holds p.mu.
func (p *provisioner) start(ctx context.Context, id string) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTimer(p.delay) // the slow part of the work, standing in for a cloud call
		defer t.Stop()
		select {
		case <-ctx.Done():
			return // left in progress; resumed at the next start
		case <-t.C:
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		so := p.st.Operations[id]
		if err := p.work(so); err != nil {
			so.Op.Outcome, so.Op.failure = "failed", failure{Code: "WorkFailed", Reason: err.Error()}
		} else {
			so.Op.Outcome, so.Op.Progress = "succeeded", "done"
			res := p.observe(so.Op.Application)
			so.Op.Resources = []resource{res}
			if so.Ensure == "present" {
				so.Op.Outputs = map[string]any{"path": p.dir(so.Op.Application)}
				p.st.Applied[so.Op.Application] = so.Spec
			} else {
				delete(p.st.Applied, so.Op.Application)
			}
		}
		p.st.Operations[id] = so
		if err := p.save(); err != nil {
			p.log.Error("save state", "err", err)
		}
		p.log.Info("operation finished", "operationId", id, "outcome", so.Op.Outcome)
	}()
}

// work makes the disk match the operation. It is idempotent, so resuming after a crash that
// happened half-way through is safe.
func (p *provisioner) work(so savedOp) error {
	dir := p.dir(so.Op.Application)
	if so.Ensure == "absent" {
		return os.RemoveAll(dir)
	}
	mode, err := strconv.ParseUint(so.Spec.Mode, 8, 32)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, descFile), []byte(so.Spec.Description), 0o644); err != nil {
		return err
	}
	return os.Chmod(dir, os.FileMode(mode))
}

func (p *provisioner) handleInspect(w http.ResponseWriter, r *http.Request) {
	failed := func(f failure) any {
		return struct {
			Outcome   string     `json:"outcome"`
			Resources []resource `json:"resources"`
			Drift     []drift    `json:"drift"`
			failure
		}{"failed", []resource{}, []drift{}, f}
	}
	req, ok := decode(w, r, failed)
	if !ok {
		return
	}
	p.mu.Lock()
	applied, wasApplied := p.st.Applied[req.Application]
	p.mu.Unlock()
	cur := p.observe(req.Application)
	drifts := []drift{}
	if wasApplied {
		switch {
		case !cur.Exists:
			drifts = append(drifts, drift{Resource: req.Application, Field: "exists", Applied: true, Actual: false})
		default:
			if cur.Properties["mode"] != applied.Mode {
				drifts = append(drifts, drift{Resource: req.Application, Field: "mode", Applied: applied.Mode, Actual: cur.Properties["mode"]})
			}
			if cur.Properties["description"] != applied.Description {
				drifts = append(drifts, drift{Resource: req.Application, Field: "description", Applied: applied.Description, Actual: cur.Properties["description"]})
			}
		}
	}
	writeJSON(w, 200, map[string]any{"outcome": "succeeded", "resources": []resource{cur}, "drift": drifts})
}

func (p *provisioner) handleOperation(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	p.mu.Lock()
	so, ok := p.st.Operations[id]
	p.mu.Unlock()
	if !ok {
		problem(w, 404, "unknown operation", fmt.Sprintf("no operation %q", id))
		return
	}
	writeJSON(w, 200, so.Op)
}

func newID() string {
	b := make([]byte, 8)
	_, _ = io.ReadFull(rand.Reader, b)
	return "op_" + hex.EncodeToString(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// problem answers a broken call as RFC 9457 problem+json.
func problem(w http.ResponseWriter, status int, title, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "about:blank", "title": title, "status": status, "detail": detail})
}
