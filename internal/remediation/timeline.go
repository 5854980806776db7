package remediation

import (
	"context"

	"github.com/groundworkhq/groundwork/internal/store"
)

// Event types of the timeline.
const (
	EventCreated   = "created"
	EventApproved  = "approved"
	EventRejected  = "rejected"
	EventCompleted = "completed"
	EventFailed    = "failed"
)

// ActorSystem is the actor of the events the workflow itself causes.
const ActorSystem = "system"

// Event is one entry of a workflow's step-level timeline.
type Event = store.RemediationEvent

// Delivery is the record of one notification on one channel.
type Delivery = store.RemediationDelivery

// Timeline is the store of events and deliveries. AppendEvent is idempotent per (job, step,
// event type): a step re-run after a crash reports false and writes nothing.
type Timeline interface {
	AppendEvent(ctx context.Context, e Event) (bool, error)
	ListEvents(ctx context.Context, orgID, jobID string) ([]Event, error)
	// Delivered reports whether a notification of kind for the step already reached channel.
	Delivered(ctx context.Context, jobID, stepID, kind, channel string) (bool, error)
	RecordDelivery(ctx context.Context, d Delivery) error
	ListDeliveries(ctx context.Context, orgID, jobID string) ([]Delivery, error)
}
