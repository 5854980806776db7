package store

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Scopes of the audit log. Provisioning covers spaces, jobs, databases, connections and
// catalog installs; platform covers access and accounts. Package audit re-exports them.
const (
	AuditScopePlatform     = "platform"
	AuditScopeScheduling   = "scheduling"
	AuditScopeCost         = "cost"
	AuditScopeProvisioning = "provisioning"
	AuditScopeDeployment   = "deployment"
)

// AuditActorEngine is the actor of changes the job engine makes on its own (a job completing).
const AuditActorEngine = "system:engine"

// Default and maximum page sizes of an audit listing.
const (
	AuditDefaultLimit = 50
	AuditMaxLimit     = 200
)

// AuditEntry is one immutable record of a mutation (audit.Entry).
type AuditEntry struct {
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

// NewAuditEntry lays out an entry; the store assigns ID (when empty) and CreatedAt (when zero)
// as it writes. meta is marshalled to JSON; nil leaves the metadata empty.
func NewAuditEntry(orgID, scope, action, actor, resourceType, resourceID string, meta any) *AuditEntry {
	e := &AuditEntry{OrgID: orgID, Scope: scope, Action: action, Actor: actor, ResourceType: resourceType, ResourceID: resourceID}
	if meta != nil {
		if b, err := json.Marshal(meta); err == nil {
			e.Metadata = b
		}
	}
	return e
}

// Validate refuses an entry that could not be told apart later.
func (e *AuditEntry) Validate() error {
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

// AuditFilter selects entries of one org (audit.Filter). Empty fields match everything; From
// and To bound createdAt (inclusive, exclusive).
type AuditFilter struct {
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

// Offset is the number of entries before the filter's page.
func (f *AuditFilter) Offset() int { return (f.Page - 1) * f.Limit }
