package store

import (
	"context"
	"time"
)

// RemediationEvent is one entry of a workflow's step-level timeline (remediation.Event).
type RemediationEvent struct {
	JobID     string    `json:"-"`
	OrgID     string    `json:"-"`
	StepID    string    `json:"stepID"`
	StepName  string    `json:"stepName"`
	EventType string    `json:"eventType"`
	Actor     string    `json:"actor"`
	Reason    string    `json:"reason,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// RemediationDelivery is the record of one notification on one channel
// (remediation.Delivery).
type RemediationDelivery struct {
	JobID     string    `json:"jobID"`
	OrgID     string    `json:"-"`
	StepID    string    `json:"stepID"`
	Kind      string    `json:"kind"`
	Channel   string    `json:"channel"`
	Status    string    `json:"status"` // delivered or failed
	Attempts  int       `json:"attempts"`
	LastError string    `json:"lastError,omitempty"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// RemediationTimeline is the store of events and deliveries (remediation.Timeline).
// AppendEvent is idempotent per (job, step, event type): a step re-run after a crash reports
// false and writes nothing.
type RemediationTimeline interface {
	AppendEvent(ctx context.Context, e RemediationEvent) (bool, error)
	ListEvents(ctx context.Context, orgID, jobID string) ([]RemediationEvent, error)
	// Delivered reports whether a notification of kind for the step already reached channel.
	Delivered(ctx context.Context, jobID, stepID, kind, channel string) (bool, error)
	RecordDelivery(ctx context.Context, d RemediationDelivery) error
	ListDeliveries(ctx context.Context, orgID, jobID string) ([]RemediationDelivery, error)
}
