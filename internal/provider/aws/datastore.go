package aws

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/elasticache"
	ectypes "github.com/aws/aws-sdk-go-v2/service/elasticache/types"
	"github.com/aws/aws-sdk-go-v2/service/rds"
	rdstypes "github.com/aws/aws-sdk-go-v2/service/rds/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/groundworkhq/groundwork/internal/fault"
)

// DatastoreSpec is the reference's datastore request plus where to put it.
type DatastoreSpec struct {
	Tags                Tags
	Engine              string // postgres | mysql | redis
	Version             string
	InstanceClass       string // db.t3.medium / cache.t3.micro
	AllocatedStorageGB  int32
	MultiAZ             bool
	BackupRetentionDays int32
	SubnetIDs           []string
	SecurityGroupIDs    []string
	// AdminPassword, when set, is used as is (the caller keeps it in its own secret store);
	// otherwise one is generated and kept in Secrets Manager.
	AdminPassword string
}

// Datastore is the created server as the job records it. The admin password is never here:
// only the Secrets Manager ARN.
type Datastore struct {
	ID          string `json:"id"`
	Engine      string `json:"engine"`
	Status      string `json:"status"`
	Ready       bool   `json:"ready"`
	Host        string `json:"host,omitempty"`
	Port        int32  `json:"port,omitempty"`
	Username    string `json:"username,omitempty"`
	SecretARN   string `json:"secretARN"`
	SubnetGroup string `json:"subnetGroup"`
}

// DatastoreID is the deterministic identifier (RDS: letters, digits, hyphens, at most 63, and
// ElastiCache at most 40), so a re-run finds what an earlier run started.
func DatastoreID(t Tags) string {
	id := "gw-" + strings.ToLower(strings.NewReplacer("_", "-", ":", "-").Replace(t.JobID))
	if len(id) > 40 {
		id = id[:40]
	}
	return strings.TrimRight(id, "-")
}

const adminUser = "gwadmin"

// jobMark is the description of the job's subnet groups and replication group: their
// describe calls return no tags, so the description is how a look-up tells this job's
// resource from a stranger's of the same deterministic name.
func jobMark(t Tags) string { return "Groundwork " + t.JobID }

// adminSecret returns the job's admin password, creating and storing it on first call so a
// re-run never changes it.
func (p *Provider) adminSecret(ctx context.Context, s DatastoreSpec, id string) (arn, password string, err error) {
	name := "groundwork/" + id + "/admin"
	got, err := p.sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &name})
	if err == nil {
		var v struct{ Password string }
		if err := json.Unmarshal([]byte(deref(got.SecretString)), &v); err != nil {
			return "", "", fault.System(fmt.Errorf("decode admin secret: %w", err))
		}
		return deref(got.ARN), v.Password, nil
	}
	if !isCode(err, "ResourceNotFoundException") {
		return "", "", p.classify(err, false)
	}
	password = rand.Text() // 26 base32 characters: accepted by RDS and as a Redis AUTH token
	doc, _ := json.Marshal(map[string]string{"username": adminUser, "password": password, "engine": s.Engine})
	arn, err = p.Secrets(s.Tags).Put(ctx, name, string(doc))
	return arn, password, err
}

// EnsureDatastore starts the server (RDS instance or ElastiCache replication group) if it is
// not there yet and reports its state; Ready is false until it is available.
func (p *Provider) EnsureDatastore(ctx context.Context, s DatastoreSpec) (Datastore, error) {
	id := DatastoreID(s.Tags)
	d := Datastore{ID: id, Engine: s.Engine, SubnetGroup: id, Username: adminUser}
	switch s.Engine {
	case "postgres", "mysql", "redis":
	default:
		return d, fault.UserAction(fmt.Errorf("engine %q is not supported on AWS", s.Engine), "UnsupportedEngine", "Pick postgres, mysql or redis.", "")
	}
	password := s.AdminPassword
	if password == "" {
		var err error
		if d.SecretARN, password, err = p.adminSecret(ctx, s, id); err != nil {
			return d, err
		}
	}
	switch s.Engine {
	case "postgres", "mysql":
		return p.ensureRDS(ctx, s, d, password)
	case "redis":
		return p.ensureRedis(ctx, s, d, password)
	}
	return d, fault.UserAction(fmt.Errorf("engine %q is not supported on AWS", s.Engine), "UnsupportedEngine", "Pick postgres, mysql or redis.", "")
}

func (t Tags) rds() []rdstypes.Tag {
	m := t.Map()
	out := make([]rdstypes.Tag, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, rdstypes.Tag{Key: ptr(k), Value: ptr(m[k])})
	}
	return out
}

func (p *Provider) ensureRDS(ctx context.Context, s DatastoreSpec, d Datastore, password string) (Datastore, error) {
	_, err := p.rds.CreateDBSubnetGroup(ctx, &rds.CreateDBSubnetGroupInput{
		DBSubnetGroupName: &d.ID, DBSubnetGroupDescription: ptr(jobMark(s.Tags)),
		SubnetIds: s.SubnetIDs, Tags: s.Tags.WithRole("db-subnet-group").rds(),
	})
	if isCode(err, "DBSubnetGroupAlreadyExists", "DBSubnetGroupAlreadyExistsFault") {
		// This job's earlier attempt (a lost answer, a re-run), or a stranger's group.
		got, derr := p.rds.DescribeDBSubnetGroups(ctx, &rds.DescribeDBSubnetGroupsInput{DBSubnetGroupName: &d.ID})
		if derr != nil || len(got.DBSubnetGroups) == 0 {
			return d, p.classify(err, false)
		}
		if deref(got.DBSubnetGroups[0].DBSubnetGroupDescription) != jobMark(s.Tags) {
			return d, alreadyExists("DB subnet group", d.ID)
		}
	} else if err != nil {
		return d, p.subnetGroupErr(err, s.SubnetIDs)
	}
	got, found, err := p.describeRDS(ctx, d.ID)
	if err != nil {
		return d, err
	}
	if !found {
		in := &rds.CreateDBInstanceInput{
			DBInstanceIdentifier: &d.ID, Engine: &s.Engine, DBInstanceClass: &s.InstanceClass,
			AllocatedStorage: &s.AllocatedStorageGB, MultiAZ: &s.MultiAZ, BackupRetentionPeriod: &s.BackupRetentionDays,
			MasterUsername: ptr(adminUser), MasterUserPassword: &password, DBSubnetGroupName: &d.ID,
			VpcSecurityGroupIds: s.SecurityGroupIDs, PubliclyAccessible: ptr(false), StorageEncrypted: ptr(true),
			Tags: s.Tags.WithRole("db").rds(),
		}
		if s.Version != "" {
			in.EngineVersion = &s.Version
		}
		out, err := p.rds.CreateDBInstance(ctx, in)
		if isCode(err, "DBInstanceAlreadyExists", "DBInstanceAlreadyExistsFault") {
			// The identifier is the key: a repeat after a lost answer meets the instance it
			// started, adopted when it carries this job's tags.
			got, found, derr := p.describeRDS(ctx, d.ID)
			if derr != nil || !found {
				return d, firstErr(derr, p.classify(err, false))
			}
			if !s.Tags.Owns(rdsTagMap(got.TagList)) {
				return d, alreadyExists("RDS instance", d.ID)
			}
			return rdsState(d, got), nil
		}
		if err != nil {
			return d, p.classify(err, false)
		}
		got = *out.DBInstance
	} else if !s.Tags.Owns(rdsTagMap(got.TagList)) {
		return d, alreadyExists("RDS instance", d.ID)
	}
	return rdsState(d, got), nil
}

func (p *Provider) describeRDS(ctx context.Context, id string) (rdstypes.DBInstance, bool, error) {
	out, err := p.rds.DescribeDBInstances(ctx, &rds.DescribeDBInstancesInput{DBInstanceIdentifier: &id})
	if isCode(err, "DBInstanceNotFound", "DBInstanceNotFoundFault") {
		return rdstypes.DBInstance{}, false, nil
	}
	if err != nil {
		return rdstypes.DBInstance{}, false, p.classify(err, false)
	}
	return out.DBInstances[0], true, nil
}

func rdsState(d Datastore, in rdstypes.DBInstance) Datastore {
	d.Status = deref(in.DBInstanceStatus)
	d.Ready = d.Status == "available"
	if in.Endpoint != nil {
		d.Host, d.Port = deref(in.Endpoint.Address), deref(in.Endpoint.Port)
	}
	return d
}

func rdsTagMap(tags []rdstypes.Tag) map[string]string {
	m := map[string]string{}
	for _, t := range tags {
		m[deref(t.Key)] = deref(t.Value)
	}
	return m
}

func (t Tags) elasticache() []ectypes.Tag {
	m := t.Map()
	out := make([]ectypes.Tag, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, ectypes.Tag{Key: ptr(k), Value: ptr(m[k])})
	}
	return out
}

func (p *Provider) ensureRedis(ctx context.Context, s DatastoreSpec, d Datastore, password string) (Datastore, error) {
	_, err := p.ec.CreateCacheSubnetGroup(ctx, &elasticache.CreateCacheSubnetGroupInput{
		CacheSubnetGroupName: &d.ID, CacheSubnetGroupDescription: ptr(jobMark(s.Tags)),
		SubnetIds: s.SubnetIDs, Tags: s.Tags.WithRole("cache-subnet-group").elasticache(),
	})
	if isCode(err, "CacheSubnetGroupAlreadyExists", "CacheSubnetGroupAlreadyExistsFault") {
		got, derr := p.ec.DescribeCacheSubnetGroups(ctx, &elasticache.DescribeCacheSubnetGroupsInput{CacheSubnetGroupName: &d.ID})
		if derr != nil || len(got.CacheSubnetGroups) == 0 {
			return d, p.classify(err, false)
		}
		if deref(got.CacheSubnetGroups[0].CacheSubnetGroupDescription) != jobMark(s.Tags) {
			return d, alreadyExists("cache subnet group", d.ID)
		}
	} else if err != nil {
		return d, p.subnetGroupErr(err, s.SubnetIDs)
	}
	if got, found, err := p.describeRedis(ctx, d.ID); err != nil || found {
		if err == nil && deref(got.Description) != jobMark(s.Tags) {
			return d, alreadyExists("replication group", d.ID)
		}
		return redisState(d, got), err
	}
	nodes := int32(1)
	if s.MultiAZ {
		nodes = 2
	}
	in := &elasticache.CreateReplicationGroupInput{
		ReplicationGroupId: &d.ID, ReplicationGroupDescription: ptr(jobMark(s.Tags)),
		Engine: ptr("redis"), CacheNodeType: &s.InstanceClass, NumCacheClusters: &nodes,
		MultiAZEnabled: &s.MultiAZ, AutomaticFailoverEnabled: &s.MultiAZ, CacheSubnetGroupName: &d.ID,
		SecurityGroupIds: s.SecurityGroupIDs, TransitEncryptionEnabled: ptr(true), AtRestEncryptionEnabled: ptr(true),
		AuthToken: &password, SnapshotRetentionLimit: &s.BackupRetentionDays, Tags: s.Tags.WithRole("cache").elasticache(),
	}
	if s.Version != "" {
		in.EngineVersion = &s.Version
	}
	out, err := p.ec.CreateReplicationGroup(ctx, in)
	if isCode(err, "ReplicationGroupAlreadyExists", "ReplicationGroupAlreadyExistsFault") {
		// A repeat after a lost answer: adopt the group when it carries this job's mark.
		got, found, derr := p.describeRedis(ctx, d.ID)
		if derr != nil || !found {
			return d, firstErr(derr, p.classify(err, false))
		}
		if deref(got.Description) != jobMark(s.Tags) {
			return d, alreadyExists("replication group", d.ID)
		}
		return redisState(d, got), nil
	}
	if err != nil {
		return d, p.classify(err, false)
	}
	return redisState(d, *out.ReplicationGroup), nil
}

func (p *Provider) describeRedis(ctx context.Context, id string) (ectypes.ReplicationGroup, bool, error) {
	out, err := p.ec.DescribeReplicationGroups(ctx, &elasticache.DescribeReplicationGroupsInput{ReplicationGroupId: &id})
	if isCode(err, "ReplicationGroupNotFoundFault", "ReplicationGroupNotFound") {
		return ectypes.ReplicationGroup{}, false, nil
	}
	if err != nil {
		return ectypes.ReplicationGroup{}, false, p.classify(err, false)
	}
	return out.ReplicationGroups[0], true, nil
}

func redisState(d Datastore, g ectypes.ReplicationGroup) Datastore {
	d.Status = deref(g.Status)
	d.Ready = d.Status == "available"
	for _, ng := range g.NodeGroups {
		if ng.PrimaryEndpoint != nil {
			d.Host, d.Port = deref(ng.PrimaryEndpoint.Address), deref(ng.PrimaryEndpoint.Port)
		}
	}
	return d
}

// DatastoreStatus reads the server's state for wait-ready polling.
func (p *Provider) DatastoreStatus(ctx context.Context, s DatastoreSpec) (Datastore, error) {
	id := DatastoreID(s.Tags)
	d := Datastore{ID: id, Engine: s.Engine, SubnetGroup: id, Username: adminUser}
	if s.Engine == "redis" {
		g, found, err := p.describeRedis(ctx, id)
		if err != nil || !found {
			return d, orNotFound(err, found, "replication group", id)
		}
		return redisState(d, g), nil
	}
	in, found, err := p.describeRDS(ctx, id)
	if err != nil || !found {
		return d, orNotFound(err, found, "RDS instance", id)
	}
	return rdsState(d, in), nil
}

func orNotFound(err error, found bool, kind, id string) error {
	if err != nil {
		return err
	}
	// Reached only right after a create: eventual consistency, worth a retry.
	return fault.Transientf("%s %s not visible yet", kind, id)
}

// DeleteDatastore deletes the server (without a final snapshot: the user asked for teardown),
// then, once it is gone, its subnet group and admin secret. done=false means "call again".
func (p *Provider) DeleteDatastore(ctx context.Context, s DatastoreSpec) (done bool, err error) {
	id := DatastoreID(s.Tags)
	if s.Engine == "redis" {
		g, found, err := p.describeRedis(ctx, id)
		if err != nil {
			return false, err
		}
		if found {
			if deref(g.Status) != "deleting" {
				if _, err := p.ec.DeleteReplicationGroup(ctx, &elasticache.DeleteReplicationGroupInput{ReplicationGroupId: &id}); err != nil && !gone(err) {
					return false, p.classify(err, false)
				}
			}
			return false, nil
		}
		if _, err := p.ec.DeleteCacheSubnetGroup(ctx, &elasticache.DeleteCacheSubnetGroupInput{CacheSubnetGroupName: &id}); err != nil && !gone(err) && !notImplemented(err) {
			return false, p.classify(err, false)
		}
	} else {
		in, found, err := p.describeRDS(ctx, id)
		if err != nil {
			return false, err
		}
		if found {
			if deref(in.DBInstanceStatus) != "deleting" {
				if _, err := p.rds.DeleteDBInstance(ctx, &rds.DeleteDBInstanceInput{DBInstanceIdentifier: &id, SkipFinalSnapshot: ptr(true), DeleteAutomatedBackups: ptr(true)}); err != nil && !gone(err) {
					return false, p.classify(err, false)
				}
			}
			return false, nil
		}
		if _, err := p.rds.DeleteDBSubnetGroup(ctx, &rds.DeleteDBSubnetGroupInput{DBSubnetGroupName: &id}); err != nil && !gone(err) {
			return false, p.classify(err, false)
		}
	}
	name := "groundwork/" + id + "/admin"
	return true, p.Secrets(s.Tags).Delete(ctx, name)
}

// notImplemented reports moto's answer to a call it lacks (real AWS never says this); it keeps
// teardown of an ElastiCache subnet group, which moto cannot delete, from failing tests.
func notImplemented(err error) bool {
	return err != nil && strings.Contains(err.Error(), "not yet implemented")
}

// subnetGroupErr classifies a refused subnet group. Subnets that do not exist come from the
// space (or were deleted outside Groundwork): no retry brings them back, the user must pick
// others.
func (p *Provider) subnetGroupErr(err error, subnets []string) error {
	if isCode(err, "InvalidSubnetID.NotFound", "InvalidSubnet", "InvalidSubnetID") {
		return fault.UserAction(err, "SubnetNotFound", fmt.Sprintf("A subnet of %s does not exist in %s: set the space's subnets to existing ones of this account and region.", strings.Join(subnets, ", "), p.region),
			"https://console.aws.amazon.com/vpcconsole/home?region="+p.region+"#subnets:")
	}
	return p.classify(err, false)
}
