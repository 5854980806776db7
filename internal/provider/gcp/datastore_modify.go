package gcp

import (
	"context"
	"fmt"

	redis "google.golang.org/api/redis/v1"
	sqladmin "google.golang.org/api/sqladmin/v1"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
)

var (
	_ dspipe.Modifier      = DatastoreDriver{}
	_ dspipe.ImmediateOnly = DatastoreDriver{}
)

// sqlModifiable are the settings instances.patch changes on a live Cloud SQL instance. The
// engine, its version and the name are refused by the pipeline before anything is sent.
var sqlModifiable = []string{"instanceClass", "allocatedStorageGB", "backupRetentionDays", "multiAZ"}

// opPatch is the key a patch's operation is recorded under between calls.
const opPatch = "patch instance"

// redisModifiable are the settings a live Memorystore instance changes: its memory (the
// config's allocatedStorageGB). Its tier (multiAZ) is fixed when it is made, and it has no
// machine type or backups.
var redisModifiable = []string{"allocatedStorageGB"}

// Modifiable implements dspipe.Modifier: Cloud SQL instances change their sizing in place,
// Memorystore instances their memory.
func (d DatastoreDriver) Modifiable(engine ds.Engine) []string {
	switch engine {
	case ds.EnginePostgres, ds.EngineMySQL:
		return sqlModifiable
	case ds.EngineRedis:
		return redisModifiable
	}
	return nil
}

// AppliedAtOnce implements dspipe.ImmediateOnly: Cloud SQL changes an instance's machine type
// when it is patched (a brief restart) and holds no change for the maintenance window, so an
// update asking for the window is refused rather than carried out now.
func (d DatastoreDriver) AppliedAtOnce(engine ds.Engine) []string {
	if engine == ds.EnginePostgres || engine == ds.EngineMySQL {
		return []string{"instanceClass"}
	}
	return nil
}

// Modify implements dspipe.Modifier through Cloud SQL's instances.patch or Memorystore's
// instances.patch, one call at a time: a patch's operation is recorded (ModifyResult.Data) and
// polled by the next call until it is done.
func (d DatastoreDriver) Modify(ctx context.Context, p dspipe.ModifyParams) (dspipe.ModifyResult, error) {
	pl, err := d.Resolve(ctx, p.JobID)
	if err != nil {
		return dspipe.ModifyResult{}, err
	}
	switch p.Engine {
	case ds.EnginePostgres, ds.EngineMySQL:
		return pl.modifySQL(ctx, p)
	case ds.EngineRedis:
		return pl.modifyRedis(ctx, p)
	}
	return dspipe.ModifyResult{}, engineUnsupported(p.Engine)
}

// modifySQL brings the job's instance to the settings' machine type, disk size, retained
// backups and availability, sending only what differs from the instance as it is. A patch
// whose result was lost (a crash before the step recorded its operation) is not sent again:
// the next call finds it among the instance's running operations and waits on it, then reads
// the instance with the new values and is done.
func (pl Placement) modifySQL(ctx context.Context, p dspipe.ModifyParams) (dspipe.ModifyResult, error) {
	// The version is not changed by an update; the default stands in so that only the
	// sizes are read and checked.
	sz, err := sqlSizingOf(p.Engine, "", p.Settings)
	if err != nil {
		return dspipe.ModifyResult{}, err
	}
	s, err := pl.sqlService(ctx)
	if err != nil {
		return dspipe.ModifyResult{}, err
	}
	inst := pl.sqlInstanceName(p.Engine)
	ops := modifyOps(p.Data)
	res := dspipe.ModifyResult{Data: map[string]any{"ops": ops}}
	if done, err := pl.C.pollRecorded(ctx, ops, opPatch, Resource{Poll: pl.pollSQL(s)}); err != nil {
		return res, err
	} else if !done {
		res.Wait = true
		return res, nil
	}
	// An operation under way on the instance is waited on before it is read: a patch whose
	// answer was lost shows its values once it is done, and the read after it sees them.
	if running, err := pl.runningSQLOp(ctx, s, inst); err != nil {
		return res, err
	} else if running != "" {
		ops[opPatch] = running
		res.Wait = true
		return res, nil
	}
	v, err := pl.readSQL(ctx, s, inst)
	if err != nil {
		return res, err
	}
	if v == nil {
		return res, fault.UserAction(fmt.Errorf("Cloud SQL instance %s is gone", inst), "ServerGone",
			"The datastore's server no longer exists; delete the job.", pl.C.ConsoleURL("sql/instances"))
	}
	patch, changed := sqlPatch(v, sz)
	if len(changed) == 0 {
		return res, nil
	}
	res.Changed = changed
	if v.State != "RUNNABLE" {
		res.Wait = true
		return res, nil
	}
	op, err := s.Instances.Patch(pl.C.ProjectID, inst, patch).Context(ctx).Do()
	if conflict(err) {
		// Another operation works on the instance (a patch whose answer was lost, a
		// backup): the next call reads the instance again once it is done.
		res.Wait = true
		return res, nil
	}
	if err != nil {
		return res, pl.C.Classify(fmt.Errorf("patch instance %s: %w", inst, err))
	}
	name, err := sqlOpName(op)
	if err != nil {
		return res, pl.C.Classify(err)
	}
	if name != "" {
		ops[opPatch] = name
		res.Wait = true
	}
	return res, nil
}

// runningSQLOp names an operation Cloud SQL runs on inst (operations.list, newest first),
// "" when none runs.
func (pl Placement) runningSQLOp(ctx context.Context, s *sqladmin.Service, inst string) (string, error) {
	list, err := s.Operations.List(pl.C.ProjectID).Instance(inst).MaxResults(20).Context(ctx).Do()
	if notFound(err) {
		return "", nil
	}
	if err != nil {
		return "", pl.C.Classify(fmt.Errorf("operations of instance %s: %w", inst, err))
	}
	for _, op := range list.Items {
		if op.Status != "DONE" {
			return op.Name, nil
		}
	}
	return "", nil
}

// sqlPatch is the instances.patch body that takes v to sz, with the config names of the
// settings it changes; none when v has them. A disk larger than asked (Cloud SQL grows it by
// itself: storageAutoResize) is left as it is, as a disk never shrinks.
func sqlPatch(v *sqladmin.DatabaseInstance, sz sqlSizing) (*sqladmin.DatabaseInstance, []string) {
	have := v.Settings
	if have == nil {
		have = &sqladmin.Settings{}
	}
	want := &sqladmin.Settings{}
	var changed []string
	if have.Tier != sz.tier {
		want.Tier = sz.tier
		if have.Edition != sz.edition {
			want.Edition = sz.edition
		}
		changed = append(changed, "instanceClass")
	}
	if have.DataDiskSizeGb < sz.storageGB {
		want.DataDiskSizeGb = sz.storageGB
		changed = append(changed, "allocatedStorageGB")
	}
	var retained int64
	if b := have.BackupConfiguration; b != nil && b.BackupRetentionSettings != nil {
		retained = b.BackupRetentionSettings.RetainedBackups
	}
	if retained != sz.backups {
		// The backup configuration is sent whole, as it is, with the new count: a patch
		// replaces the message.
		b := &sqladmin.BackupConfiguration{}
		if have.BackupConfiguration != nil {
			c := *have.BackupConfiguration
			b = &c
		}
		b.Enabled = true
		b.BackupRetentionSettings = &sqladmin.BackupRetentionSettings{RetainedBackups: sz.backups, RetentionUnit: "COUNT"}
		// The log is kept no longer than the backups it replays from.
		b.TransactionLogRetentionDays = min(sz.backups, 7)
		want.BackupConfiguration = b
		changed = append(changed, "backupRetentionDays")
	}
	avail := "ZONAL"
	if sz.ha {
		avail = "REGIONAL"
	}
	if have.AvailabilityType != avail {
		want.AvailabilityType = avail
		changed = append(changed, "multiAZ")
	}
	return &sqladmin.DatabaseInstance{Settings: want}, changed
}

// modifyRedis brings the job's Memorystore instance to the settings' memory
// (instances.patch with updateMask memory_size_gb). A patch whose answer was lost is not sent
// again: the instance is UPDATING until it is done, then reads with the new size.
func (pl Placement) modifyRedis(ctx context.Context, p dspipe.ModifyParams) (dspipe.ModifyResult, error) {
	sz, err := redisSizingOf("", p.Settings)
	if err != nil {
		return dspipe.ModifyResult{}, err
	}
	s, err := pl.redisService(ctx)
	if err != nil {
		return dspipe.ModifyResult{}, err
	}
	ops := modifyOps(p.Data)
	res := dspipe.ModifyResult{Data: map[string]any{"ops": ops}}
	inst := pl.redisInstance()
	if done, err := pl.C.pollRecorded(ctx, ops, opPatch, Resource{Poll: pl.pollRedis(s)}); err != nil {
		return res, err
	} else if !done {
		res.Wait = true
		return res, nil
	}
	v, err := pl.readRedis(ctx, s)
	if err != nil {
		return res, err
	}
	if v == nil {
		return res, fault.UserAction(fmt.Errorf("Memorystore instance %s is gone", inst), "ServerGone",
			"The datastore's server no longer exists; delete the job.", pl.C.ConsoleURL("memorystore/redis/instances"))
	}
	if v.State == "UPDATING" {
		res.Wait = true
		return res, nil
	}
	if v.MemorySizeGb == sz.memoryGB {
		return res, nil
	}
	res.Changed = []string{"allocatedStorageGB"}
	if v.State != "READY" {
		res.Wait = true
		return res, nil
	}
	op, err := s.Projects.Locations.Instances.Patch(inst, &redis.Instance{MemorySizeGb: sz.memoryGB}).
		UpdateMask("memory_size_gb").Context(ctx).Do()
	if err != nil {
		return res, pl.C.Classify(fmt.Errorf("resize instance %s: %w", inst, err))
	}
	if op.Done {
		if op.Error != nil {
			return res, pl.C.Classify(statusError(op.Error.Code, op.Error.Message, op.Error.Details))
		}
		return res, nil
	}
	ops[opPatch] = op.Name
	res.Wait = true
	return res, nil
}

// modifyOps are the operations a Modify call under way recorded in its result's Data, as the
// next call gets them back (from the job's infra, so decoded from JSON).
func modifyOps(data map[string]any) Ops {
	ops := Ops{}
	switch m := data["ops"].(type) {
	case Ops:
		for k, v := range m {
			ops[k] = v
		}
	case map[string]any:
		for k, v := range m {
			if s, ok := v.(string); ok {
				ops[k] = s
			}
		}
	}
	return ops
}
