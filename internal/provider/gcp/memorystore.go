package gcp

import (
	"context"
	"fmt"
	"strings"

	redis "google.golang.org/api/redis/v1"

	"github.com/groundworkhq/groundwork/internal/fault"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
)

// Memorystore for Redis serves engine redis: one instance per job, reached through private
// services access on the job's network, with AUTH on and in-transit encryption (clients
// verify the instance's server CA, and connect on port 6378). Memorystore makes the AUTH
// string itself and takes none, so Create ignores the pipeline's password, and Status, once
// the instance is READY, reads the AUTH string (getAuthString) and returns it as
// ServerStatus.AdminPassword: the pipeline stores it under the job's admin secret
// reference in place of its own. Redis 6 and later authenticate an AUTH string as the
// default user.
//
// The Memorystore API takes no requestId: a create re-sent after a crash is kept single by
// the instance's id, which the job fixes, and by the read before every create.
const (
	roleRedis    = "redis"
	redisUser    = "default"
	redisTLSPort = 6378
)

// redisVersions are the versions a request may name, each with Memorystore's redisVersion.
var redisVersions = []struct{ named, api string }{
	{"7.2", "REDIS_7_2"}, {"7.0", "REDIS_7_0"}, {"6", "REDIS_6_X"}, {"5.0", "REDIS_5_0"},
}

// redisSizing is what a request's settings come to for a Memorystore instance.
type redisSizing struct {
	version, api string
	tier         string
	memoryGB     int64
	ignored      []string
}

func redisSizingOf(version string, settings map[string]any) (redisSizing, error) {
	s := redisSizing{tier: "BASIC", memoryGB: 1}
	v := version
	switch v {
	case "", "7":
		v = "7.2"
	case "5":
		v = "5.0"
	}
	if major, _, _ := strings.Cut(v, "."); major == "6" {
		v = "6"
	}
	for _, rv := range redisVersions {
		if v == rv.named {
			s.version, s.api = rv.named, rv.api
		}
	}
	if s.api == "" {
		return s, fault.UserAction(fmt.Errorf("redis %s is not offered by Memorystore for Redis", version), "UnsupportedVersion",
			"Pick redis 7.2, 7.0, 6 or 5.0 (or give no version for 7.2).", "")
	}
	if ha, _ := settings["multiAZ"].(bool); ha {
		// A primary and a replica in another zone, with automatic failover.
		s.tier = "STANDARD_HA"
	}
	if n, ok := asInt(settings["allocatedStorageGB"]); ok {
		// A cache's capacity is its memory.
		if n < 1 || n > 300 {
			return s, fault.UserAction(fmt.Errorf("allocatedStorageGB %d: a Memorystore instance has 1 to 300 GB of memory", n), "InvalidMemorySize",
				"Give allocatedStorageGB (the instance's memory) between 1 and 300.", "")
		}
		s.memoryGB = int64(n)
	}
	for _, k := range []string{"backupRetentionDays", "instanceClass"} {
		// Memorystore sizes an instance by memory and tier alone, and keeps no backups (RDB
		// snapshots are persistence, not backups with a retention).
		if _, ok := settings[k]; ok {
			s.ignored = append(s.ignored, k)
		}
	}
	return s, nil
}

func (pl Placement) redisService(ctx context.Context) (*redis.Service, error) {
	s, err := redis.NewService(ctx, pl.C.Options(ServiceRedis)...)
	if err != nil {
		return nil, fault.System(err)
	}
	return s, nil
}

func (pl Placement) redisParent() string {
	return "projects/" + pl.C.ProjectID + "/locations/" + pl.C.Region
}

// redisInstance is the job's instance's full name.
func (pl Placement) redisInstance() string {
	return pl.redisParent() + "/instances/" + name(pl.J, roleRedis)
}

// readRedis reads the job's instance: nil when there is none; one of its name that is not
// the job's is refused.
func (pl Placement) readRedis(ctx context.Context, s *redis.Service) (*redis.Instance, error) {
	v, err := s.Projects.Locations.Instances.Get(pl.redisInstance()).Context(ctx).Do()
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, pl.C.Classify(err)
	}
	if !owns(pl.J, v.Labels) {
		return v, fault.UserAction(fmt.Errorf("instance %s: %w", v.Name, errNotOurs), "NameTaken",
			"A Memorystore instance with this job's name exists without the job's groundwork-job label; delete it, then retry.",
			pl.C.ConsoleURL("memorystore/redis/instances"))
	}
	return v, nil
}

func (pl Placement) createRedis(ctx context.Context, p dspipe.CreateParams) (dspipe.ServerInfo, error) {
	sz, err := redisSizingOf(p.Version, p.Settings)
	if err != nil {
		return dspipe.ServerInfo{}, err
	}
	nw, err := pl.networkOf()
	if err != nil {
		return dspipe.ServerInfo{}, err
	}
	s, err := pl.redisService(ctx)
	if err != nil {
		return dspipe.ServerInfo{}, err
	}
	c, j := pl.C, pl.J
	var got *redis.Instance
	r := Resource{
		Get: func(ctx context.Context) (State, error) {
			v, err := pl.readRedis(ctx, s)
			if err != nil || v == nil {
				return State{}, err
			}
			got = v
			return State{Found: true, Ours: true, Ready: v.Host != ""}, nil
		},
		Create: func(ctx context.Context) (string, error) {
			op, err := s.Projects.Locations.Instances.Create(pl.redisParent(), &redis.Instance{
				Labels: labels(j, roleRedis), DisplayName: p.Name, Tier: sz.tier, MemorySizeGb: sz.memoryGB, RedisVersion: sz.api,
				AuthEnabled: true, TransitEncryptionMode: "SERVER_AUTHENTICATION",
				ConnectMode: "PRIVATE_SERVICE_ACCESS", AuthorizedNetwork: nw.id, ReservedIpRange: nw.rangeName,
			}).InstanceId(name(j, roleRedis)).Context(ctx).Do()
			if err != nil {
				return "", err
			}
			return doneOr(op.Name, op.Done), nil
		},
		Poll: pl.pollRedis(s),
	}
	ops := Ops{}
	if err := c.awaitWithin(ctx, "instance "+pl.redisInstance(), createWait, func() (bool, error) { return c.converge(ctx, ops, "create instance", r) }); err != nil {
		return dspipe.ServerInfo{}, err
	}
	if got == nil || got.Host == "" {
		return dspipe.ServerInfo{}, fault.Transientf("instance %s has no address yet", pl.redisInstance())
	}
	port := int(got.Port)
	if port == 0 {
		port = redisTLSPort
	}
	return dspipe.ServerInfo{ID: got.Name, Host: got.Host, Port: port, AdminUser: redisUser, Version: sz.version}, nil
}

// pollRedis reads a Memorystore operation (google.longrunning) once.
func (pl Placement) pollRedis(s *redis.Service) func(ctx context.Context, name string) (bool, error, error) {
	return func(ctx context.Context, name string) (bool, error, error) {
		op, err := s.Projects.Locations.Operations.Get(name).Context(ctx).Do()
		if err != nil {
			return false, nil, err
		}
		if !op.Done {
			return false, nil, nil
		}
		if op.Error != nil {
			return true, statusError(op.Error.Code, op.Error.Message, op.Error.Details), nil
		}
		return true, nil, nil
	}
}

func (pl Placement) redisStatus(ctx context.Context) (dspipe.ServerStatus, error) {
	s, err := pl.redisService(ctx)
	if err != nil {
		return dspipe.ServerStatus{}, err
	}
	inst := pl.redisInstance()
	v, err := pl.readRedis(ctx, s)
	if err != nil {
		return dspipe.ServerStatus{}, err
	}
	if v == nil {
		// Reached only after Create saw the instance: the read is behind, worth a retry.
		return dspipe.ServerStatus{}, fault.Transientf("instance %s is not visible yet", inst)
	}
	if v.State != "READY" {
		return dspipe.ServerStatus{Message: fmt.Sprintf("%s is %s", inst, v.State)}, nil
	}
	auth, err := s.Projects.Locations.Instances.GetAuthString(inst).Context(ctx).Do()
	if err != nil {
		return dspipe.ServerStatus{}, pl.C.Classify(fmt.Errorf("the AUTH string of %s: %w", inst, err))
	}
	if auth.AuthString == "" {
		return dspipe.ServerStatus{}, fault.Transientf("instance %s has no AUTH string yet", inst)
	}
	return dspipe.ServerStatus{Ready: true, Message: inst + " is READY", AdminPassword: auth.AuthString}, nil
}

func (pl Placement) deleteRedis(ctx context.Context) (bool, error) {
	s, err := pl.redisService(ctx)
	if err != nil {
		return false, err
	}
	v, err := pl.readRedis(ctx, s)
	if err != nil && fault.As(err).Code != "NameTaken" {
		return false, err
	}
	if err != nil || v == nil {
		return true, nil
	}
	if v.State == "DELETING" || v.State == "CREATING" {
		// A delete under way; or a create, which is let finish before its delete.
		return false, nil
	}
	_, err = s.Projects.Locations.Instances.Delete(v.Name).Context(ctx).Do()
	switch {
	case notFound(err):
		return true, nil
	case err != nil:
		return false, pl.C.Classify(fmt.Errorf("delete instance %s: %w", v.Name, err))
	}
	return false, nil
}
