// Package datastore is the datastore family's pipeline (validate → network → credentials →
// create server → wait ready → register → finalize), written once and driven through the
// provider interfaces below, so the local provider and the cloud drivers plug into the same
// steps.
package datastore

import (
	"context"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
)

// Driver is what one provider offers the datastore pipeline.
type Driver struct {
	Servers Servers
	Network Network
}

// Servers creates, observes and deletes datastore servers. Every method is idempotent and
// keyed by the job ID: Create on a job whose server exists returns it.
type Servers interface {
	// Check refuses, before anything is created, what the provider cannot serve (engine,
	// version) as a user_action error, and lists the settings it accepts but cannot apply.
	Check(ctx context.Context, p CheckParams) (CheckResult, error)
	Create(ctx context.Context, p CreateParams) (ServerInfo, error)
	Status(ctx context.Context, p StatusParams) (ServerStatus, error)
	// Delete deletes the job's server, or goes on deleting it: gone is false while the cloud is
	// still at it (an RDS instance takes minutes), and the step asks again later.
	Delete(ctx context.Context, p DeleteParams) (gone bool, err error)
}

// Network places a datastore where its clients can reach it (a subnet group, a private
// service connection...). Ensure returns what it created, to be recorded in infra.
type Network interface {
	Ensure(ctx context.Context, p NetworkParams) (map[string]any, error)
	// Delete is as Servers.Delete, for what Ensure made.
	Delete(ctx context.Context, p NetworkParams) (gone bool, err error)
}

// CheckParams asks whether a server can be made.
type CheckParams struct {
	Engine   ds.Engine
	Version  string
	Settings map[string]any
}

// CheckResult is a provider's answer to Check.
type CheckResult struct {
	// Version is the version the provider would run.
	Version string
	// NotApplicable names settings that were accepted but mean nothing here.
	NotApplicable []string
}

// CreateParams asks for one job's server.
type CreateParams struct {
	JobID         string
	Engine        ds.Engine
	Version       string
	Name          string
	AdminPassword string
	// Settings holds the request's provider-specific settings (instance class, storage...).
	Settings map[string]any
}

// ServerInfo is what a created server reports; it is recorded in infra (no secrets).
type ServerInfo struct {
	ID        string `json:"id"`
	Host      string `json:"host"`
	Port      int    `json:"port"`
	AdminUser string `json:"adminUser"`
	Version   string `json:"version"`
}

// StatusParams asks about one job's server.
type StatusParams struct {
	JobID         string
	Engine        ds.Engine
	AdminPassword string
}

// ServerStatus reports whether the server accepts its admin login.
type ServerStatus struct {
	Ready   bool
	Message string
	// AdminPassword is set only by a cloud that makes its own credential (Azure Cache for
	// Redis makes its access keys and takes none): with Ready, the pipeline replaces the
	// stored admin secret's value with it, under the same reference, before the job goes on.
	// It is never recorded in infra or logs.
	AdminPassword string
}

// DeleteParams asks to remove one job's server.
type DeleteParams struct {
	JobID  string
	Engine ds.Engine
}

// NetworkParams identifies the network work of one job.
type NetworkParams struct {
	JobID  string
	Engine ds.Engine
}
