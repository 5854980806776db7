// Package audit holds the audit log's entry and query shapes and its exports. Entries are
// written only by the store, in the same transaction as the change they record, and are never
// updated or deleted: this package offers no way to do either.
package audit

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/groundworkhq/groundwork/internal/validation"
)

// Scopes of the audit log. Provisioning covers spaces, jobs, databases,
// connections and catalog installs; platform covers access and accounts.
const (
	ScopePlatform     = "platform"
	ScopeScheduling   = "scheduling"
	ScopeCost         = "cost"
	ScopeProvisioning = "provisioning"
	ScopeDeployment   = "deployment"
)

// Scopes lists every scope, for validating filters.
var Scopes = []string{ScopePlatform, ScopeScheduling, ScopeCost, ScopeProvisioning, ScopeDeployment}

// ActorEngine is the actor of changes the job engine makes on its own (a job completing).
const ActorEngine = "system:engine"

// Entry is one immutable record of a mutation.
type Entry struct {
	ID           string          `json:"id"`
	OrgID        string          `json:"-"`
	Scope        string          `json:"scope"`
	Action       string          `json:"action"`
	Actor        string          `json:"actor"`
	ResourceType string          `json:"resourceType"`
	ResourceID   string          `json:"resourceID"`
	Metadata     json.RawMessage `json:"metadata,omitempty"`
	CreatedAt    time.Time       `json:"createdAt"`
}

// New lays out an entry; the store assigns ID (when empty) and CreatedAt (when zero) as it
// writes. meta is marshalled to JSON; nil leaves the metadata empty.
func New(orgID, scope, action, actor, resourceType, resourceID string, meta any) *Entry {
	e := &Entry{OrgID: orgID, Scope: scope, Action: action, Actor: actor, ResourceType: resourceType, ResourceID: resourceID}
	if meta != nil {
		if b, err := json.Marshal(meta); err == nil {
			e.Metadata = b
		}
	}
	return e
}

// Validate refuses an entry that could not be told apart later.
func (e *Entry) Validate() error {
	var missing []string
	for name, v := range map[string]string{"orgID": e.OrgID, "scope": e.Scope, "action": e.Action, "actor": e.Actor, "resourceType": e.ResourceType} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("audit entry lacks %s", strings.Join(missing, ", "))
	}
	return nil
}

// Default and maximum page sizes of a listing.
const (
	DefaultLimit = 50
	MaxLimit     = 200
)

// Filter selects entries of one org. Empty fields match everything; From and To bound
// createdAt (inclusive, exclusive).
type Filter struct {
	OrgID        string
	Scopes       []string
	Action       string
	Actor        string
	ResourceType string
	ResourceID   string
	From, To     time.Time
	Page         int // from 1
	Limit        int // default 50, at most 200
}

// ErrBadFilter wraps every reason ParseFilter refuses a query.
var ErrBadFilter = errors.New("bad audit filter")

// FieldError says which query parameter is wrong.
type FieldError = validation.FieldError

// badFilter is a refused query parameter: a *FieldError that is also ErrBadFilter.
func badFilter(field, message string) error {
	return fmt.Errorf("%w: %w", ErrBadFilter, &FieldError{Field: field, Rule: "format", Message: message})
}

// ParseFilter reads the query parameters of GET /audit-logs. Times are RFC 3339.
func ParseFilter(orgID string, get func(string) string) (*Filter, error) {
	f := &Filter{OrgID: orgID, Action: get("action"), Actor: get("actor"), ResourceType: get("resourceType"),
		ResourceID: get("resourceID"), Page: 1, Limit: DefaultLimit}
	if s := get("scope"); s != "" {
		for _, sc := range strings.Split(s, ",") {
			sc = strings.TrimSpace(sc)
			if !known(sc) {
				return nil, badFilter("scope", fmt.Sprintf("%q is not one of %s", sc, strings.Join(Scopes, ", ")))
			}
			f.Scopes = append(f.Scopes, sc)
		}
	}
	for _, tf := range []struct {
		name string
		dst  *time.Time
	}{{"from", &f.From}, {"to", &f.To}} {
		if v := get(tf.name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return nil, badFilter(tf.name, "must be an RFC 3339 time, e.g. 2026-11-29T12:00:00Z")
			}
			*tf.dst = t
		}
	}
	for _, nf := range []struct {
		name     string
		dst      *int
		min, max int
	}{{"page", &f.Page, 1, 1 << 30}, {"limit", &f.Limit, 1, MaxLimit}} {
		if v := get(nf.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < nf.min || n > nf.max {
				return nil, badFilter(nf.name, fmt.Sprintf("must be a whole number from %d to %d", nf.min, nf.max))
			}
			*nf.dst = n
		}
	}
	return f, nil
}

func known(scope string) bool {
	for _, s := range Scopes {
		if s == scope {
			return true
		}
	}
	return false
}

// Offset is the number of entries before the filter's page.
func (f *Filter) Offset() int { return (f.Page - 1) * f.Limit }

var csvHeader = []string{"id", "scope", "action", "actor", "resourceType", "resourceID", "metadata", "createdAt"}

// WriteCSV writes entries as CSV with a header row; metadata is its JSON text.
func WriteCSV(w io.Writer, entries []*Entry) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	for _, e := range entries {
		if err := cw.Write([]string{e.ID, e.Scope, e.Action, e.Actor, e.ResourceType, e.ResourceID,
			string(e.Metadata), e.CreatedAt.UTC().Format(time.RFC3339Nano)}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteNDJSON writes one JSON entry per line.
func WriteNDJSON(w io.Writer, entries []*Entry) error {
	enc := json.NewEncoder(w)
	for _, e := range entries {
		if err := enc.Encode(e); err != nil {
			return err
		}
	}
	return nil
}
