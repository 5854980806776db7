package protocol

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/netguard"
)

// Client calls one remote provisioner.
type Client struct {
	base *url.URL
	hc   *http.Client
}

// ClientOptions configure NewClient.
type ClientOptions struct {
	// Timeout bounds one call (default 30s). Slow work answers 202 quickly, so a call that
	// takes longer is a provisioner in trouble.
	Timeout time.Duration
	// HTTPClient replaces the default client (its Timeout is then left alone).
	HTTPClient *http.Client
	// Outbound is the address policy the default client dials through (nil: only the
	// always-refused ranges, such as the cloud metadata service, are refused).
	Outbound *netguard.Policy
}

// NewClient returns a client for the provisioner at baseURL (the URL it was registered with;
// calls go to baseURL + "/plan" etc.).
func NewClient(baseURL string, opts ClientOptions) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("provisioner url: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("provisioner url %q: want http(s)://host[:port][/path]", baseURL)
	}
	hc := opts.HTTPClient
	if hc == nil {
		t := opts.Timeout
		if t <= 0 {
			t = 30 * time.Second
		}
		hc = opts.Outbound.HTTPClient(t)
	}
	return &Client{base: u, hc: hc}, nil
}

// URL is the provisioner's base URL.
func (c *Client) URL() string { return c.base.String() }

// WorkFailedError is a failed outcome: the provisioner did the call and the work failed.
type WorkFailedError struct {
	Call        string // plan, apply, inspect, operation
	Pair        catalog.Pair
	Application string
	Failure
}

func (e *WorkFailedError) Error() string {
	code := ""
	if e.Code != "" {
		code = " [" + e.Code + "]"
	}
	return fmt.Sprintf("provisioner %s of %s for %q failed%s: %s", e.Call, e.Pair, e.Application, code, e.Reason)
}

// classify wraps a failed outcome for the engine: retryable ones are transient, others need
// the user (the provisioner refused their settings, or their cloud said no).
func (e *WorkFailedError) classify() error {
	if e.Retryable {
		return fault.Transient(e)
	}
	code := e.Code
	if code == "" {
		code = "ProvisionerFailed"
	}
	return fault.UserAction(e, code, e.FixHint, "")
}

// Plan asks what apply would do. A failed outcome returns the answer and a classified error
// wrapping *WorkFailedError.
func (c *Client) Plan(ctx context.Context, req *Request) (*PlanAnswer, error) {
	var ans PlanAnswer
	if _, err := c.call(ctx, http.MethodPost, "plan", req, &ans); err != nil {
		return nil, err
	}
	return &ans, c.outcome("plan", req, ans.Outcome, ans.Failure, OutcomeSucceeded)
}

// Apply asks for the changes. Outcome accepted (HTTP 202) carries the OperationID to poll.
func (c *Client) Apply(ctx context.Context, req *Request) (*ApplyAnswer, error) {
	var ans ApplyAnswer
	status, err := c.call(ctx, http.MethodPost, "apply", req, &ans)
	if err != nil {
		return nil, err
	}
	if status == http.StatusAccepted && ans.OperationID == "" {
		return nil, fault.System(fmt.Errorf("provisioner %s answered 202 without an operationId", c.base))
	}
	return &ans, c.outcome("apply", req, ans.Outcome, ans.Failure, OutcomeSucceeded, OutcomeAccepted)
}

// Inspect reads the resources as they are now, with drift.
func (c *Client) Inspect(ctx context.Context, req *Request) (*InspectAnswer, error) {
	var ans InspectAnswer
	if _, err := c.call(ctx, http.MethodPost, "inspect", req, &ans); err != nil {
		return nil, err
	}
	return &ans, c.outcome("inspect", req, ans.Outcome, ans.Failure, OutcomeSucceeded)
}

// Operation reads an operation. A failed operation returns it and a classified error; an
// operation the provisioner does not know (it lost its state) is a system error, since
// polling again cannot help.
func (c *Client) Operation(ctx context.Context, id string) (*Operation, error) {
	var op Operation
	if _, err := c.call(ctx, http.MethodGet, "operations/"+url.PathEscape(id), nil, &op); err != nil {
		return nil, err
	}
	req := &Request{Kind: op.Kind, Type: op.Type, Application: op.Application}
	return &op, c.outcome("operation "+id, req, op.Outcome, op.Failure, OutcomeSucceeded, OutcomeInProgress)
}

// Health calls GET /healthz.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var h Health
	if _, err := c.call(ctx, http.MethodGet, "healthz", nil, &h); err != nil {
		return nil, err
	}
	if h.Status != "ok" {
		return &h, fault.Transientf("provisioner %s reports status %q", c.base, h.Status)
	}
	return &h, nil
}

func (c *Client) outcome(call string, req *Request, got Outcome, f Failure, want ...Outcome) error {
	if got == OutcomeFailed {
		return (&WorkFailedError{Call: call, Pair: req.Pair(), Application: req.Application, Failure: f}).classify()
	}
	for _, w := range want {
		if got == w {
			return nil
		}
	}
	return fault.System(fmt.Errorf("provisioner %s: %s answered outcome %q", c.base, call, got))
}

// call does one HTTP exchange. Errors are classified: the provisioner unreachable, overloaded
// or failing inside (5xx) is transient; a 4xx means our call was broken, which retrying will
// not fix.
func (c *Client) call(ctx context.Context, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, fault.System(fmt.Errorf("encode %s request: %w", path, err))
		}
		rd = bytes.NewReader(b)
	}
	u := c.base.JoinPath(path)
	hreq, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return 0, fault.System(fmt.Errorf("build %s request: %w", path, err))
	}
	hreq.Header.Set("Accept", "application/json")
	if body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err() // fault.As reads a cancelled context as transient
		}
		return 0, &fault.Error{Class: job.ClassTransient, Code: "ProvisionerUnreachable", Err: fmt.Errorf("provisioner %s: %w", c.base, err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return 0, fault.Transient(fmt.Errorf("provisioner %s: read %s answer: %w", c.base, path, err))
	}
	switch {
	case resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusAccepted:
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout:
		return resp.StatusCode, fault.Transient(&HTTPError{URL: u.String(), Status: resp.StatusCode, Problem: problemOf(data)})
	default:
		return resp.StatusCode, fault.System(&HTTPError{URL: u.String(), Status: resp.StatusCode, Problem: problemOf(data)})
	}
	if err := json.Unmarshal(data, out); err != nil {
		return resp.StatusCode, fault.System(fmt.Errorf("provisioner %s: decode %s answer: %w", c.base, path, err))
	}
	return resp.StatusCode, nil
}

// HTTPError is an HTTP error answer: the call was broken (4xx) or the provisioner failed (5xx).
type HTTPError struct {
	URL     string
	Status  int
	Problem Problem
}

func (e *HTTPError) Error() string {
	msg := e.Problem.Detail
	if msg == "" {
		msg = e.Problem.Title
	}
	return fmt.Sprintf("%s: HTTP %d: %s", e.URL, e.Status, msg)
}

// IsUnknownOperation reports whether err is a 404 for an operation.
func IsUnknownOperation(err error) bool {
	var he *HTTPError
	return errors.As(err, &he) && he.Status == http.StatusNotFound
}

// problemOf keeps a short, printable reason from an error answer. A body that is not a
// problem document is not echoed at all: the URL is the user's, and echoing whatever answers
// there would turn the server into a reader of the networks it can reach.
func problemOf(data []byte) Problem {
	var p Problem
	if json.Unmarshal(data, &p) != nil || (p.Title == "" && p.Detail == "") {
		return Problem{Title: fmt.Sprintf("an answer that is not a problem document (%d bytes)", len(data))}
	}
	return Problem{Type: sanitize(p.Type), Title: sanitize(p.Title), Status: p.Status, Detail: sanitize(p.Detail)}
}

// sanitize keeps at most 120 printable characters.
func sanitize(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, strings.TrimSpace(s))
	if r := []rune(s); len(r) > 120 {
		s = string(r[:120]) + "…"
	}
	return s
}
