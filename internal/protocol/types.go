// Package protocol is the provisioner protocol: the request and answer shapes,
// the HTTP server Groundwork mounts under /provisioner/, the HTTP client it uses to drive remote
// provisioners, and the registry that says which provisioner holds each (category, type) pair.
//
// The rule that shapes everything here: a failure of the work is an answer (200, outcome
// failed, a reason); an HTTP error means the call itself was broken.
package protocol

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/groundworkhq/groundwork/internal/catalog"
)

// Outcome says how a call went.
type Outcome string

const (
	// OutcomeSucceeded: the work is done (apply), the plan is made (plan), the resources are
	// read (inspect).
	OutcomeSucceeded Outcome = "succeeded"
	// OutcomeFailed: the work failed; Reason says why. Answered with HTTP 200.
	OutcomeFailed Outcome = "failed"
	// OutcomeAccepted: slow work was accepted (HTTP 202); poll OperationID.
	OutcomeAccepted Outcome = "accepted"
	// OutcomeInProgress: an operation is not final yet.
	OutcomeInProgress Outcome = "in_progress"
)

// Final reports whether nothing more will happen to an answer with this outcome.
func (o Outcome) Final() bool { return o == OutcomeSucceeded || o == OutcomeFailed }

// Ensure says what an apply should leave behind.
type Ensure string

const (
	EnsurePresent Ensure = "present" // create or update to match settings (the default)
	EnsureAbsent  Ensure = "absent"  // delete; deleting what is not there succeeds
)

// Request is the body of plan, apply and inspect. Each call is for one pair and one application.
type Request struct {
	Kind        catalog.Category `json:"kind"`
	Type        string           `json:"type"`
	Application string           `json:"application"`
	// RequestID is the idempotency key of an apply: the same key gives the same result (and the
	// same operation). Without it the key is derived from the request's content (see Key).
	RequestID string `json:"requestId,omitempty"`
	// Ensure is present (default) or absent.
	Ensure Ensure `json:"ensure,omitempty"`
	// Settings are the type's settings, as the catalog describes them.
	Settings json.RawMessage `json:"settings,omitempty"`
}

// Pair is the request's (category, type).
func (r *Request) Pair() catalog.Pair { return catalog.Pair{Kind: r.Kind, Type: r.Type} }

// Check reports what makes the request broken (an HTTP 400), not what makes the work fail.
func (r *Request) Check() error {
	var missing []string
	if r.Kind == "" {
		missing = append(missing, "kind")
	}
	if r.Type == "" {
		missing = append(missing, "type")
	}
	if r.Application == "" {
		missing = append(missing, "application")
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	switch r.Ensure {
	case "", EnsurePresent, EnsureAbsent:
	default:
		return fmt.Errorf("ensure %q: want present or absent", r.Ensure)
	}
	if len(r.Settings) > 0 {
		var v any
		if err := json.Unmarshal(r.Settings, &v); err != nil {
			return fmt.Errorf("settings: %w", err)
		}
		if _, ok := v.(map[string]any); !ok && v != nil {
			return errors.New("settings must be a JSON object")
		}
	}
	return nil
}

// Desired returns Ensure with its default filled in.
func (r *Request) Desired() Ensure {
	if r.Ensure == "" {
		return EnsurePresent
	}
	return r.Ensure
}

// Key is the request's idempotency key: its RequestID when given, otherwise a hash of what it
// asks for (pair, application, ensure, settings in canonical form). Two applies with the same
// key must give the same result.
func (r *Request) Key() string {
	if r.RequestID != "" {
		return r.RequestID
	}
	canon := []byte("null")
	if len(r.Settings) > 0 {
		var v any
		if json.Unmarshal(r.Settings, &v) == nil {
			canon, _ = json.Marshal(v) // maps marshal with sorted keys: a canonical form
		}
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00", r.Kind, r.Type, r.Application, r.Desired())
	h.Write(canon)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// Failure carries why work failed. It is embedded in every answer; empty unless outcome is
// failed.
type Failure struct {
	Reason string `json:"reason,omitempty"`
	// Code is a short machine-readable code, e.g. "InvalidSettings", "QuotaExceeded".
	Code string `json:"code,omitempty"`
	// FixHint says what the user can do about it.
	FixHint string `json:"fixHint,omitempty"`
	// Retryable says that trying the same call again later may succeed (throttling, a
	// dependency briefly away). The client treats such a failure as transient.
	Retryable bool `json:"retryable,omitempty"`
	// Fields lists the settings that were refused, when the failure is invalid settings.
	Fields []catalog.FieldError `json:"fields,omitempty"`
}

// Change is what a plan would do to one resource.
type Change struct {
	Resource   string   `json:"resource"`         // a name unique within the application
	Type       string   `json:"resourceType"`     // what it is, e.g. "directory", "rds-instance"
	Action     string   `json:"action"`           // create | update | delete | none
	Before     any      `json:"before,omitempty"` // the resource as it is, when it exists
	After      any      `json:"after,omitempty"`  // the resource as it would be
	Operations []string `json:"operations"`       // the cloud operations the change needs, in order
}

// Plan change actions.
const (
	ActionCreate = "create"
	ActionUpdate = "update"
	ActionDelete = "delete"
	ActionNone   = "none"
)

// PlanAnswer answers POST /plan.
type PlanAnswer struct {
	Outcome Outcome  `json:"outcome"`
	Changes []Change `json:"changes"`
	Failure
}

// Resource is one resource as a provisioner sees it.
type Resource struct {
	Resource   string         `json:"resource"`
	Type       string         `json:"resourceType"`
	ID         string         `json:"id,omitempty"` // the provider's identifier
	Exists     bool           `json:"exists"`
	Properties map[string]any `json:"properties,omitempty"`
}

// ApplyAnswer answers POST /apply: succeeded or failed with 200, accepted with 202.
type ApplyAnswer struct {
	Outcome     Outcome        `json:"outcome"`
	OperationID string         `json:"operationId,omitempty"`
	Resources   []Resource     `json:"resources,omitempty"`
	Outputs     map[string]any `json:"outputs,omitempty"`
	Failure
}

// Drift is one place where a resource differs from what was applied.
type Drift struct {
	Resource string `json:"resource"`
	Field    string `json:"field"`
	Applied  any    `json:"applied"`
	Actual   any    `json:"actual"`
}

// InspectAnswer answers POST /inspect.
type InspectAnswer struct {
	Outcome   Outcome    `json:"outcome"`
	Resources []Resource `json:"resources"`
	Drift     []Drift    `json:"drift"`
	Failure
}

// Operation answers GET /operations/{operationId}.
type Operation struct {
	OperationID string           `json:"operationId"`
	Outcome     Outcome          `json:"outcome"` // in_progress, succeeded or failed
	Kind        catalog.Category `json:"kind,omitempty"`
	Type        string           `json:"type,omitempty"`
	Application string           `json:"application,omitempty"`
	// Progress is a human line about where the work stands.
	Progress  string         `json:"progress,omitempty"`
	Resources []Resource     `json:"resources,omitempty"`
	Outputs   map[string]any `json:"outputs,omitempty"`
	Failure
}

// Health answers GET /healthz. Registration calls it to check the remote answers; when Pairs
// is given, every pair being registered must be in it.
type Health struct {
	Status string         `json:"status"` // "ok"
	Name   string         `json:"name,omitempty"`
	Pairs  []catalog.Pair `json:"pairs,omitempty"`
}

// Failed builds the failure part of an answer.
func Failed(code, reason string) Failure { return Failure{Code: code, Reason: reason} }

// WrongPairFailure is the failure answered for a pair the provisioner does not handle.
func WrongPairFailure(p catalog.Pair) Failure {
	return Failure{Code: "UnsupportedPair", Reason: fmt.Sprintf("this provisioner does not handle %s", p)}
}
