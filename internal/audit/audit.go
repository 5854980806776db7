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

	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// Scopes of the audit log. Provisioning covers spaces, jobs, databases,
// connections and catalog installs; platform covers access and accounts.
const (
	ScopePlatform     = store.AuditScopePlatform
	ScopeScheduling   = store.AuditScopeScheduling
	ScopeCost         = store.AuditScopeCost
	ScopeProvisioning = store.AuditScopeProvisioning
	ScopeDeployment   = store.AuditScopeDeployment
)

// Scopes lists every scope, for validating filters.
var Scopes = []string{ScopePlatform, ScopeScheduling, ScopeCost, ScopeProvisioning, ScopeDeployment}

// ActorEngine is the actor of changes the job engine makes on its own (a job completing).
const ActorEngine = store.AuditActorEngine

// Entry is one immutable record of a mutation. The store keeps it, so it is declared there.
type Entry = store.AuditEntry

// New lays out an entry; the store assigns ID (when empty) and CreatedAt (when zero) as it
// writes. meta is marshalled to JSON; nil leaves the metadata empty.
func New(orgID, scope, action, actor, resourceType, resourceID string, meta any) *Entry {
	return store.NewAuditEntry(orgID, scope, action, actor, resourceType, resourceID, meta)
}

// Default and maximum page sizes of a listing.
const (
	DefaultLimit = store.AuditDefaultLimit
	MaxLimit     = store.AuditMaxLimit
)

// Filter selects entries of one org. Empty fields match everything; From and To bound
// createdAt (inclusive, exclusive).
type Filter = store.AuditFilter

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
