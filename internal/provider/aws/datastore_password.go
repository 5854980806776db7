package aws

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/rds"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
)

var _ dspipe.AdminPasswordSetter = DatastoreDriver{}

// SetsAdminPassword implements dspipe.AdminPasswordSetter: RDS sets its master password
// through ModifyDBInstance; an ElastiCache group's auth token is not rotated that way yet.
func (d DatastoreDriver) SetsAdminPassword(engine ds.Engine) bool {
	return engine == ds.EnginePostgres || engine == ds.EngineMySQL
}

// SetAdminPassword implements dspipe.AdminPasswordSetter through ModifyDBInstance
// MasterUserPassword, applied at once (a password waits for no maintenance window).
func (d DatastoreDriver) SetAdminPassword(ctx context.Context, p dspipe.AdminPasswordParams) error {
	pl, err := d.Resolve(ctx, p.JobID)
	if err != nil {
		return err
	}
	id, err := pl.P.ownedRDS(ctx, pl.Tags)
	if err != nil {
		return err
	}
	_, err = pl.P.rds.ModifyDBInstance(ctx, &rds.ModifyDBInstanceInput{DBInstanceIdentifier: &id, MasterUserPassword: &p.Password, ApplyImmediately: ptr(true)})
	return pl.P.classify(err, true)
}

// AdminPasswordPending implements dspipe.AdminPasswordSetter: RDS shows a master password
// change among the instance's pending modifications (and the instance resetting its
// credentials) until it is applied.
func (d DatastoreDriver) AdminPasswordPending(ctx context.Context, p dspipe.AdminPasswordParams) (bool, error) {
	pl, err := d.Resolve(ctx, p.JobID)
	if err != nil {
		return false, err
	}
	cur, found, err := pl.P.describeRDS(ctx, DatastoreID(pl.Tags))
	if err != nil || !found {
		return false, err
	}
	if pv := cur.PendingModifiedValues; pv != nil && pv.MasterUserPassword != nil {
		return true, nil
	}
	return deref(cur.DBInstanceStatus) == "resetting-master-credentials", nil
}

// ownedRDS is the id of the job's RDS instance, refused when it is gone or not the job's.
func (p *Provider) ownedRDS(ctx context.Context, t Tags) (string, error) {
	id := DatastoreID(t)
	cur, found, err := p.describeRDS(ctx, id)
	if err != nil {
		return "", err
	}
	if !found {
		return "", fault.UserAction(fmt.Errorf("RDS instance %s is gone", id), "ServerGone", "The datastore's server no longer exists; delete the job.", "")
	}
	if !t.Owns(rdsTagMap(cur.TagList)) {
		return "", alreadyExists("RDS instance", id)
	}
	return id, nil
}
