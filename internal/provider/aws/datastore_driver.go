package aws

import (
	"context"
	"fmt"

	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
)

// Placement is where one job's datastore goes: the account's provider, the job's tags and,
// when the space has one, the VPC subnets to use (else the job gets its own private network).
type Placement struct {
	P                *Provider
	Tags             Tags
	SubnetIDs        []string
	SecurityGroupIDs []string
}

// PlacementResolver finds the placement of a job by its ID (the lead wires it to the job's space
// and cloud account).
type PlacementResolver func(ctx context.Context, jobID string) (Placement, error)

// DatastoreDriver serves the datastore pipeline's Servers on AWS: RDS for postgres and mysql,
// ElastiCache for redis.
type DatastoreDriver struct{ Resolve PlacementResolver }

// DatastoreNetwork serves the datastore pipeline's Network on AWS.
type DatastoreNetwork struct{ DatastoreDriver }

var (
	_ dspipe.Servers = DatastoreDriver{}
	_ dspipe.Network = DatastoreNetwork{}
)

// Driver returns the pipeline's driver value for provider "aws".
func (d DatastoreDriver) Driver() dspipe.Driver {
	return dspipe.Driver{Servers: d, Network: DatastoreNetwork{d}}
}

// Check implements dspipe.Servers: every sizing setting applies on AWS.
func (d DatastoreDriver) Check(_ context.Context, p dspipe.CheckParams) (dspipe.CheckResult, error) {
	v := p.Version
	if v == "" {
		v = map[string]string{"postgres": "16", "mysql": "8.0", "redis": "7.1"}[string(p.Engine)]
	}
	return dspipe.CheckResult{Version: v}, nil
}

func (d DatastoreDriver) spec(pl Placement, engine, version, password string, settings map[string]any) DatastoreSpec {
	s := DatastoreSpec{Tags: pl.Tags, Engine: engine, Version: version, SubnetIDs: pl.SubnetIDs, SecurityGroupIDs: pl.SecurityGroupIDs,
		AdminPassword: password, InstanceClass: "db.t3.micro", AllocatedStorageGB: 20, BackupRetentionDays: 7}
	if engine == "redis" {
		s.InstanceClass, s.BackupRetentionDays = "cache.t3.micro", 1
	}
	if v, ok := settings["instanceClass"].(string); ok {
		s.InstanceClass = v
	}
	if v, ok := asInt(settings["allocatedStorageGB"]); ok {
		s.AllocatedStorageGB = int32(v)
	}
	if v, ok := settings["multiAZ"].(bool); ok {
		s.MultiAZ = v
	}
	if v, ok := asInt(settings["backupRetentionDays"]); ok {
		s.BackupRetentionDays = int32(v)
	}
	return s
}

func asInt(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int32:
		return int(n), true
	case float64:
		return int(n), true
	}
	return 0, false
}

// subnets returns the placement's subnets, or those of the job's own network.
func (d DatastoreDriver) subnets(ctx context.Context, pl Placement) (Placement, error) {
	if len(pl.SubnetIDs) > 0 {
		return pl, nil
	}
	n, err := pl.P.EnsureNetwork(ctx, NetworkSpec{Tags: pl.Tags, NoNAT: true})
	if err != nil {
		return pl, err
	}
	pl.SubnetIDs = n.PrivateSubnetIDs
	return pl, nil
}

// Create implements dspipe.Servers.
func (d DatastoreDriver) Create(ctx context.Context, p dspipe.CreateParams) (dspipe.ServerInfo, error) {
	pl, err := d.Resolve(ctx, p.JobID)
	if err != nil {
		return dspipe.ServerInfo{}, err
	}
	if pl, err = d.subnets(ctx, pl); err != nil {
		return dspipe.ServerInfo{}, err
	}
	st, err := pl.P.EnsureDatastore(ctx, d.spec(pl, string(p.Engine), p.Version, p.AdminPassword, p.Settings))
	if err != nil {
		return dspipe.ServerInfo{}, err
	}
	return dspipe.ServerInfo{ID: st.ID, Host: st.Host, Port: int(st.Port), AdminUser: st.Username, Version: p.Version}, nil
}

// Status implements dspipe.Servers: ready when RDS or ElastiCache says available.
func (d DatastoreDriver) Status(ctx context.Context, p dspipe.StatusParams) (dspipe.ServerStatus, error) {
	pl, err := d.Resolve(ctx, p.JobID)
	if err != nil {
		return dspipe.ServerStatus{}, err
	}
	st, err := pl.P.DatastoreStatus(ctx, DatastoreSpec{Tags: pl.Tags, Engine: string(p.Engine)})
	if err != nil {
		return dspipe.ServerStatus{}, err
	}
	return dspipe.ServerStatus{Ready: st.Ready, Message: fmt.Sprintf("%s is %s", st.ID, st.Status)}, nil
}

// Delete implements dspipe.Servers: gone once RDS or ElastiCache no longer has the server.
func (d DatastoreDriver) Delete(ctx context.Context, p dspipe.DeleteParams) (bool, error) {
	pl, err := d.Resolve(ctx, p.JobID)
	if err != nil {
		return false, err
	}
	return pl.P.DeleteDatastore(ctx, DatastoreSpec{Tags: pl.Tags, Engine: string(p.Engine)})
}

// Ensure implements dspipe.Network: the subnets the server goes into.
func (d DatastoreNetwork) Ensure(ctx context.Context, p dspipe.NetworkParams) (map[string]any, error) {
	pl, err := d.Resolve(ctx, p.JobID)
	if err != nil {
		return nil, err
	}
	if pl, err = d.subnets(ctx, pl); err != nil {
		return nil, err
	}
	return map[string]any{"provider": "aws", "subnetIDs": pl.SubnetIDs}, nil
}

// Delete implements dspipe.Network: the job's own network, if it made one; gone once it no
// longer exists.
func (d DatastoreNetwork) Delete(ctx context.Context, p dspipe.NetworkParams) (bool, error) {
	pl, err := d.Resolve(ctx, p.JobID)
	if err != nil {
		return false, err
	}
	return pl.P.DeleteNetwork(ctx, pl.Tags)
}
