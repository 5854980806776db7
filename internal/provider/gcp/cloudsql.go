package gcp

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"google.golang.org/api/googleapi"
	sqladmin "google.golang.org/api/sqladmin/v1"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
)

// Cloud SQL serves engines postgres and mysql: one instance per job, with a private address
// only (no public IPv4), in the job's network, with automated backups and point-in-time
// recovery (PostgreSQL's write-ahead log, MySQL's binary log), and no deletion protection so
// that a teardown can delete it. The pipeline's admin password is the instance's root
// password (rootPassword on insert), which Cloud SQL gives the postgres user of PostgreSQL
// and the root user of MySQL.
//
// The Cloud SQL Admin API takes no requestId: an insert re-sent after a crash is kept single
// by the instance's name, which the job fixes, and by the read before every insert.

// sqlEngine is what differs between the two engines.
type sqlEngine struct {
	role, prefix, admin string
	port                int
	versions            []string // major versions Cloud SQL offers, newest last
	defaultVersion      string
}

var sqlEngines = map[ds.Engine]sqlEngine{
	ds.EnginePostgres: {role: "pg", prefix: "POSTGRES_", admin: "postgres", port: 5432,
		versions: []string{"12", "13", "14", "15", "16", "17"}, defaultVersion: "16"},
	ds.EngineMySQL: {role: "mysql", prefix: "MYSQL_", admin: "root", port: 3306,
		versions: []string{"5.7", "8.0", "8.4"}, defaultVersion: "8.0"},
}

// defaultSQLTier is the machine type an instance gets when the request names none: two
// vCPUs and 7.5 GB, the smallest dedicated-core size Cloud SQL offers high availability on.
const defaultSQLTier = "db-custom-2-7680"

// sqlTier is a Cloud SQL machine type: shared-core (db-f1-micro, db-g1-small), custom
// (db-custom-<vCPUs>-<MB>) or Enterprise Plus's (db-perf-optimized-N-<vCPUs>).
var sqlTier = regexp.MustCompile(`^db-(f1-micro|g1-small|custom-[0-9]+-[0-9]+|perf-optimized-N-[0-9]+)$`)

// sqlSizing is what a request's settings come to on Cloud SQL.
type sqlSizing struct {
	version, dbVersion string
	tier, edition      string
	storageGB          int64
	ha                 bool
	backups            int64
}

func sqlSizingOf(e ds.Engine, version string, settings map[string]any) (sqlSizing, error) {
	es := sqlEngines[e]
	s := sqlSizing{tier: defaultSQLTier, edition: "ENTERPRISE", storageGB: 20, backups: 7}
	v := version
	if v == "" {
		v = es.defaultVersion
	}
	switch e {
	case ds.EnginePostgres:
		v, _, _ = strings.Cut(v, ".")
	case ds.EngineMySQL:
		if v == "8" {
			v = "8.0"
		}
		if parts := strings.SplitN(v, ".", 3); len(parts) >= 2 {
			v = parts[0] + "." + parts[1]
		}
	}
	if !slices.Contains(es.versions, v) {
		return s, fault.UserAction(fmt.Errorf("%s %s is not offered by Cloud SQL", e, version), "UnsupportedVersion",
			fmt.Sprintf("Pick %s %s (Cloud SQL keeps the minor version current).", e, strings.Join(es.versions, ", ")), "")
	}
	s.version, s.dbVersion = v, es.prefix+strings.ReplaceAll(v, ".", "_")
	if t, ok := settings["instanceClass"].(string); ok && t != "" {
		s.tier = t
	}
	if !sqlTier.MatchString(s.tier) {
		return s, fault.UserAction(fmt.Errorf("instanceClass %q is not a Cloud SQL machine type", s.tier), "InvalidInstanceClass",
			"Give instanceClass as a Cloud SQL machine type such as db-custom-2-7680 (vCPUs and MB of memory), db-g1-small or db-perf-optimized-N-2.", "")
	}
	if strings.HasPrefix(s.tier, "db-perf-optimized-") {
		s.edition = "ENTERPRISE_PLUS"
	}
	s.ha, _ = settings["multiAZ"].(bool)
	if s.ha && (s.tier == "db-f1-micro" || s.tier == "db-g1-small") {
		return s, fault.UserAction(fmt.Errorf("multiAZ on %s: Cloud SQL offers high availability on dedicated-core machine types only", s.tier), "HANotOnSharedCore",
			"Give instanceClass a db-custom or db-perf-optimized machine type with multiAZ, or drop multiAZ.", "")
	}
	if n, ok := asInt(settings["allocatedStorageGB"]); ok {
		if n < 10 || n > 65536 {
			return s, fault.UserAction(fmt.Errorf("allocatedStorageGB %d: Cloud SQL disks are 10 to 65536 GB", n), "InvalidStorage",
				"Give allocatedStorageGB between 10 and 65536.", "")
		}
		s.storageGB = int64(n)
	}
	if n, ok := asInt(settings["backupRetentionDays"]); ok {
		if n < 1 || n > 365 {
			return s, fault.UserAction(fmt.Errorf("backupRetentionDays %d: Cloud SQL keeps 1 to 365 daily backups", n), "InvalidBackupRetention",
				"Give backupRetentionDays between 1 and 365.", "")
		}
		s.backups = int64(n)
	}
	return s, nil
}

func (pl Placement) sqlService(ctx context.Context) (*sqladmin.Service, error) {
	s, err := sqladmin.NewService(ctx, pl.C.Options(ServiceSQLAdmin)...)
	if err != nil {
		return nil, fault.System(err)
	}
	return s, nil
}

// sqlInstanceName is the job's instance: unique in the project, and for a while after its
// delete, as Cloud SQL keeps a deleted instance's name.
func (pl Placement) sqlInstanceName(e ds.Engine) string { return name(pl.J, sqlEngines[e].role) }

// readSQL reads the job's instance: nil when there is none; one of its name that is not the
// job's is refused.
func (pl Placement) readSQL(ctx context.Context, s *sqladmin.Service, inst string) (*sqladmin.DatabaseInstance, error) {
	v, err := s.Instances.Get(pl.C.ProjectID, inst).Context(ctx).Do()
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, pl.C.Classify(err)
	}
	if v.Settings == nil || !owns(pl.J, v.Settings.UserLabels) {
		return v, fault.UserAction(fmt.Errorf("instance %s: %w", inst, errNotOurs), "NameTaken",
			"A Cloud SQL instance with this job's name exists without the job's groundwork-job label; delete or rename it, then retry.",
			pl.C.ConsoleURL("sql/instances/"+inst+"/overview"))
	}
	return v, nil
}

// privateIP is the instance's private address, once Google has given it one.
func privateIP(v *sqladmin.DatabaseInstance) string {
	for _, a := range v.IpAddresses {
		if a.Type == "PRIVATE" {
			return a.IpAddress
		}
	}
	return ""
}

func (pl Placement) createSQL(ctx context.Context, p dspipe.CreateParams) (dspipe.ServerInfo, error) {
	sz, err := sqlSizingOf(p.Engine, p.Version, p.Settings)
	if err != nil {
		return dspipe.ServerInfo{}, err
	}
	nw, err := pl.networkOf()
	if err != nil {
		return dspipe.ServerInfo{}, err
	}
	s, err := pl.sqlService(ctx)
	if err != nil {
		return dspipe.ServerInfo{}, err
	}
	c, es := pl.C, sqlEngines[p.Engine]
	inst := pl.sqlInstanceName(p.Engine)
	var got *sqladmin.DatabaseInstance
	r := Resource{
		Get: func(ctx context.Context) (State, error) {
			v, err := pl.readSQL(ctx, s, inst)
			if err != nil || v == nil {
				return State{}, err
			}
			got = v
			return State{Found: true, Ours: true, Ready: privateIP(v) != ""}, nil
		},
		Create: func(ctx context.Context) (string, error) {
			op, err := s.Instances.Insert(c.ProjectID, pl.sqlSpec(inst, sz, nw, p.AdminPassword)).Context(ctx).Do()
			if conflict(err) {
				// The read before found no instance of this name: Cloud SQL keeps a deleted
				// instance's name for up to a week.
				return "", fault.UserAction(fmt.Errorf("create instance %s: the name is held: %v", inst, err), "InstanceNameHeld",
					"Cloud SQL keeps the name of a deleted instance for up to a week; create the job again to get a new name.", c.ConsoleURL("sql/instances"))
			}
			if err != nil {
				return "", err
			}
			return sqlOpName(op)
		},
		Poll: pl.pollSQL(s),
	}
	ops := Ops{}
	if err := c.awaitWithin(ctx, "instance "+inst, createWait, func() (bool, error) { return c.converge(ctx, ops, "create instance", r) }); err != nil {
		return dspipe.ServerInfo{}, err
	}
	if got == nil || privateIP(got) == "" {
		return dspipe.ServerInfo{}, fault.Transientf("instance %s has no private address yet", inst)
	}
	return dspipe.ServerInfo{ID: "projects/" + c.ProjectID + "/instances/" + inst, Host: privateIP(got), Port: es.port,
		AdminUser: es.admin, Version: sz.version}, nil
}

// sqlSpec is the job's instance as inserted.
func (pl Placement) sqlSpec(inst string, sz sqlSizing, nw dsNetwork, password string) *sqladmin.DatabaseInstance {
	es := sqlEngines[ds.EngineMySQL]
	if strings.HasPrefix(sz.dbVersion, "POSTGRES_") {
		es = sqlEngines[ds.EnginePostgres]
	}
	avail := "ZONAL"
	if sz.ha {
		avail = "REGIONAL"
	}
	logDays := min(sz.backups, 7)
	backup := &sqladmin.BackupConfiguration{Enabled: true, StartTime: "03:00",
		BackupRetentionSettings:     &sqladmin.BackupRetentionSettings{RetainedBackups: sz.backups, RetentionUnit: "COUNT"},
		TransactionLogRetentionDays: logDays}
	if es.role == "pg" {
		backup.PointInTimeRecoveryEnabled = true
	} else {
		backup.BinaryLogEnabled = true
	}
	ipc := &sqladmin.IpConfiguration{Ipv4Enabled: false, PrivateNetwork: nw.id, AllocatedIpRange: nw.rangeName,
		SslMode: "ENCRYPTED_ONLY", ForceSendFields: []string{"Ipv4Enabled"}}
	return &sqladmin.DatabaseInstance{
		Name: inst, Region: pl.C.Region, DatabaseVersion: sz.dbVersion, RootPassword: password,
		Settings: &sqladmin.Settings{
			Tier: sz.tier, Edition: sz.edition, UserLabels: labels(pl.J, es.role),
			AvailabilityType: avail, DataDiskSizeGb: sz.storageGB, DataDiskType: "PD_SSD", StorageAutoResize: googleapi.Bool(true),
			IpConfiguration: ipc, BackupConfiguration: backup, ActivationPolicy: "ALWAYS", PricingPlan: "PER_USE",
			DeletionProtectionEnabled: false,
			ForceSendFields:           []string{"DeletionProtectionEnabled"},
		},
	}
}

// sqlOpName is the operation of a Cloud SQL call's answer to poll, "" when it is done.
func sqlOpName(op *sqladmin.Operation) (string, error) {
	if op.Status != "DONE" {
		return op.Name, nil
	}
	if op.Error != nil {
		return "", sqlOpError(op)
	}
	return "", nil
}

// pollSQL reads a Cloud SQL operation once.
func (pl Placement) pollSQL(s *sqladmin.Service) func(ctx context.Context, name string) (bool, error, error) {
	return func(ctx context.Context, name string) (bool, error, error) {
		op, err := s.Operations.Get(pl.C.ProjectID, name).Context(ctx).Do()
		if err != nil {
			return false, nil, err
		}
		if op.Status != "DONE" {
			return false, nil, nil
		}
		if op.Error != nil {
			return true, sqlOpError(op), nil
		}
		return true, nil, nil
	}
}

// sqlOpError is a failed Cloud SQL operation as the error its call would have answered: its
// error codes are the reasons; an internal error is Google's (5xx), anything else the
// request's (400).
func sqlOpError(op *sqladmin.Operation) error {
	e := &googleapi.Error{Code: http.StatusBadRequest}
	for _, it := range op.Error.Errors {
		e.Errors = append(e.Errors, googleapi.ErrorItem{Reason: it.Code, Message: it.Message})
		if e.Message == "" {
			e.Message = it.Message
		}
		switch {
		case it.Code == "INTERNAL_ERROR":
			e.Code = http.StatusInternalServerError
		case strings.Contains(it.Code, "QUOTA"):
			e.Errors = append(e.Errors, googleapi.ErrorItem{Reason: "quotaExceeded"})
		}
	}
	return e
}

func (pl Placement) sqlStatus(ctx context.Context, e ds.Engine) (dspipe.ServerStatus, error) {
	s, err := pl.sqlService(ctx)
	if err != nil {
		return dspipe.ServerStatus{}, err
	}
	inst := pl.sqlInstanceName(e)
	v, err := pl.readSQL(ctx, s, inst)
	if err != nil {
		return dspipe.ServerStatus{}, err
	}
	if v == nil {
		// Reached only after Create saw the instance: the read is behind, worth a retry.
		return dspipe.ServerStatus{}, fault.Transientf("instance %s is not visible yet", inst)
	}
	switch v.State {
	case "RUNNABLE":
		return dspipe.ServerStatus{Ready: true, Message: inst + " is RUNNABLE"}, nil
	case "FAILED", "SUSPENDED":
		return dspipe.ServerStatus{}, fault.UserAction(fmt.Errorf("instance %s is %s", inst, v.State), "InstanceFailed",
			"Cloud SQL reports the instance "+v.State+"; see its operations log, then delete the job and create it again.",
			pl.C.ConsoleURL("sql/instances/"+inst+"/overview"))
	}
	return dspipe.ServerStatus{Message: fmt.Sprintf("%s is %s", inst, v.State)}, nil
}

func (pl Placement) deleteSQL(ctx context.Context, e ds.Engine) (bool, error) {
	s, err := pl.sqlService(ctx)
	if err != nil {
		return false, err
	}
	inst := pl.sqlInstanceName(e)
	v, err := pl.readSQL(ctx, s, inst)
	if err != nil && fault.As(err).Code != "NameTaken" {
		return false, err
	}
	if err != nil || v == nil {
		// Gone, or an instance of the job's name that is not the job's: not deleted.
		return true, nil
	}
	if v.State == "PENDING_DELETE" {
		return false, nil
	}
	_, err = s.Instances.Delete(pl.C.ProjectID, inst).Context(ctx).Do()
	switch {
	case notFound(err):
		return true, nil
	case conflict(err):
		// Another operation on the instance (its create) is under way; Cloud SQL runs one
		// at a time.
		return false, nil
	case err != nil:
		return false, pl.C.Classify(fmt.Errorf("delete instance %s: %w", inst, err))
	}
	return false, nil
}
