package aws

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/rds"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
)

var _ dspipe.Modifier = DatastoreDriver{}

// rdsModifiable are the settings ModifyDBInstance changes in place. The engine, its version
// and the name are not among them: the pipeline refuses those before anything is sent.
var rdsModifiable = []string{"instanceClass", "allocatedStorageGB", "backupRetentionDays", "multiAZ"}

// Modifiable implements dspipe.Modifier: RDS instances change in place; ElastiCache groups
// are not modified by Groundwork yet.
func (d DatastoreDriver) Modifiable(engine ds.Engine) []string {
	if engine == ds.EnginePostgres || engine == ds.EngineMySQL {
		return rdsModifiable
	}
	return nil
}

// Modify implements dspipe.Modifier through ModifyDBInstance.
func (d DatastoreDriver) Modify(ctx context.Context, p dspipe.ModifyParams) (dspipe.ModifyResult, error) {
	pl, err := d.Resolve(ctx, p.JobID)
	if err != nil {
		return dspipe.ModifyResult{}, err
	}
	return pl.P.ModifyDatastore(ctx, d.spec(pl, string(p.Engine), "", "", p.Settings), p.ApplyImmediately)
}

// ModifyDatastore brings the job's RDS instance to s's instance class, storage, backup
// retention and Multi-AZ, sending only what differs from the instance as it is (or as it will
// be once its pending changes land), so a repeat after a crash sends nothing. With
// applyImmediately false, RDS holds the changes for the instance's maintenance window; the
// result names those it reports pending.
func (p *Provider) ModifyDatastore(ctx context.Context, s DatastoreSpec, applyImmediately bool) (dspipe.ModifyResult, error) {
	var res dspipe.ModifyResult
	if s.Engine != "postgres" && s.Engine != "mysql" {
		return res, fault.UserAction(fmt.Errorf("engine %q is not modified in place on AWS", s.Engine), "UnsupportedUpdate",
			"Make a new datastore with the settings you want.", "")
	}
	id := DatastoreID(s.Tags)
	cur, found, err := p.describeRDS(ctx, id)
	if err != nil {
		return res, err
	}
	if !found {
		return res, fault.UserAction(fmt.Errorf("RDS instance %s is gone", id), "ServerGone", "The datastore's server no longer exists; delete the job.", "")
	}
	if !s.Tags.Owns(rdsTagMap(cur.TagList)) {
		return res, alreadyExists("RDS instance", id)
	}
	class, storage, retention, multiAZ := deref(cur.DBInstanceClass), deref(cur.AllocatedStorage), deref(cur.BackupRetentionPeriod), deref(cur.MultiAZ)
	if pv := cur.PendingModifiedValues; pv != nil {
		if pv.DBInstanceClass != nil {
			class = *pv.DBInstanceClass
		}
		if pv.AllocatedStorage != nil {
			storage = *pv.AllocatedStorage
		}
		if pv.BackupRetentionPeriod != nil {
			retention = *pv.BackupRetentionPeriod
		}
		if pv.MultiAZ != nil {
			multiAZ = *pv.MultiAZ
		}
	}
	in := &rds.ModifyDBInstanceInput{DBInstanceIdentifier: &id, ApplyImmediately: &applyImmediately}
	if s.InstanceClass != class {
		in.DBInstanceClass, res.Changed = &s.InstanceClass, append(res.Changed, "instanceClass")
	}
	if s.AllocatedStorageGB != storage {
		in.AllocatedStorage, res.Changed = &s.AllocatedStorageGB, append(res.Changed, "allocatedStorageGB")
	}
	if s.BackupRetentionDays != retention {
		in.BackupRetentionPeriod, res.Changed = &s.BackupRetentionDays, append(res.Changed, "backupRetentionDays")
	}
	if s.MultiAZ != multiAZ {
		in.MultiAZ, res.Changed = &s.MultiAZ, append(res.Changed, "multiAZ")
	}
	if len(res.Changed) == 0 {
		return res, nil
	}
	out, err := p.rds.ModifyDBInstance(ctx, in)
	if err != nil {
		return res, p.classify(err, false)
	}
	if pv := out.DBInstance.PendingModifiedValues; pv != nil {
		for name, pending := range map[string]bool{"instanceClass": pv.DBInstanceClass != nil, "allocatedStorageGB": pv.AllocatedStorage != nil,
			"backupRetentionDays": pv.BackupRetentionPeriod != nil, "multiAZ": pv.MultiAZ != nil} {
			if pending {
				res.Pending = append(res.Pending, name)
			}
		}
	}
	return res, nil
}
