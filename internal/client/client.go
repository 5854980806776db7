// Package client is the Go client of Groundwork's HTTP API, used by the CLI.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"

	"github.com/groundworkhq/groundwork/internal/validation"
)

// Client talks to one Groundwork server.
type Client struct {
	BaseURL string
	Token   string
	HTTP    *http.Client
}

// New returns a client for baseURL with token.
func New(baseURL, token string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), Token: token, HTTP: &http.Client{Timeout: 60 * time.Second}}
}

// Error is a problem answer from the server.
type Error struct {
	Status int          `json:"status"`
	Title  string       `json:"title"`
	Detail string       `json:"detail"`
	Errors []FieldError `json:"errors"`
	// FixHint says what would make the request succeed (the policy a read-only account
	// lacks, say); ConsoleURL is where to make that change.
	FixHint    string `json:"fixHint"`
	ConsoleURL string `json:"consoleUrl"`
}

// ErrNoToken is returned, before anything is sent, by a client without a token.
var ErrNoToken = errors.New("no API token: set GROUNDWORK_TOKEN or pass --token")

// FieldError names an offending field.
type FieldError = validation.FieldError

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s", e.Status, e.Title)
	if e.Detail != "" {
		b.WriteString(": " + e.Detail)
	}
	for _, f := range e.Errors {
		fmt.Fprintf(&b, "\n  %s: %s", f.Field, f.Message)
	}
	if e.FixHint != "" {
		b.WriteString("\nfix: " + e.FixHint)
	}
	if e.ConsoleURL != "" {
		b.WriteString("\nconsole: " + e.ConsoleURL)
	}
	return b.String()
}

// Do sends body (JSON) and decodes the answer into out (when not nil).
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	if c.Token == "" {
		return ErrNoToken
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach Groundwork at %s: %w", c.BaseURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		e := &Error{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode)}
		_ = json.NewDecoder(resp.Body).Decode(e)
		return e
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// Watch follows a job's event stream, calling fn for every change, until the job settles or
// ctx ends. A dropped stream is reopened.
func (c *Client) Watch(ctx context.Context, id string, fn func(*job.Job)) (*job.Job, error) {
	var last *job.Job
	for {
		j, err := c.watchOnce(ctx, id, fn)
		if j != nil {
			last = j
		}
		if err == nil && last != nil && settled(last) {
			return last, nil
		}
		if ctx.Err() != nil {
			return last, ctx.Err()
		}
		if apiErr, ok := err.(*Error); ok {
			return last, apiErr
		}
		if errors.Is(err, ErrNoToken) {
			return last, err
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func settled(j *job.Job) bool {
	switch j.Status {
	case job.StatusCompleted, job.StatusFailed, job.StatusCancelled, job.StatusDeleted:
		return true
	}
	return false
}

func (c *Client) watchOnce(ctx context.Context, id string, fn func(*job.Job)) (*job.Job, error) {
	if c.Token == "" {
		return nil, ErrNoToken
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+"/api/provisioning-jobs/"+id+"/events", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Accept", "text/event-stream")
	stream := &http.Client{Transport: c.HTTP.Transport} // no overall timeout on a stream
	resp, err := stream.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		e := &Error{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode)}
		_ = json.NewDecoder(resp.Body).Decode(e)
		return nil, e
	}
	var last *job.Job
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var j job.Job
		if err := json.Unmarshal([]byte(data), &j); err != nil {
			return last, fmt.Errorf("bad event: %w", err)
		}
		last = &j
		fn(&j)
	}
	return last, sc.Err()
}
