package azure

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/redis/armredis/v3"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
)

// Azure Cache for Redis serves engine redis. The cache makes its own access keys and takes
// no password, so Create ignores the one the pipeline generated and Status, once the cache
// is ready, reads the primary key and returns it as ServerStatus.AdminPassword: the pipeline
// stores it under the job's admin secret reference in place of its own.
//
// The cache is reached on its TLS port only (the non-TLS port is off, TLS 1.2 at least) and
// its public network access is off. Private access through a private endpoint in a job's
// virtual network is not made yet, so no client can reach a cache this driver makes: the
// network step makes nothing for redis, and a private endpoint, its private DNS zone
// (privatelink.redis.cache.windows.net) and the zone's link are what is left to do.
const (
	roleRedis        = "redis"
	redisUser        = "default" // an access key authenticates Redis's default user
	redisTLSPort     = 6380
	redisVersion     = "6"
	redisDefaultSize = "Standard_C1"
	redisHASize      = "Premium_P1"
)

// redisSize is an instanceClass for Azure Cache for Redis: tier, then family and capacity,
// as the portal names them (Basic_C0 … Basic_C6, Standard_C0 … Standard_C6, Premium_P1 …
// Premium_P5).
var redisSize = regexp.MustCompile(`^(?:(Basic|Standard)_C([0-6])|(Premium)_P([1-5]))$`)

// redisSizing is what a request's settings come to for a cache.
type redisSizing struct {
	version  string
	sku      armredis.SKU
	zones    []*string
	ignored  []string // settings that mean nothing for a cache
	sizeName string
}

func redisSizingOf(version string, settings map[string]any) (redisSizing, error) {
	s := redisSizing{version: redisVersion, sizeName: redisDefaultSize}
	if major, _, _ := strings.Cut(version, "."); version != "" && major != redisVersion {
		return s, fault.UserAction(fmt.Errorf("redis %s is not offered by Azure Cache for Redis", version), "UnsupportedVersion",
			"Pick redis 6 (or give no version): Azure Cache for Redis runs Redis 6.", "")
	}
	ha, _ := settings["multiAZ"].(bool)
	if ha {
		s.sizeName = redisHASize
	}
	if v, ok := settings["instanceClass"].(string); ok && v != "" {
		s.sizeName = v
	}
	m := redisSize.FindStringSubmatch(s.sizeName)
	if m == nil {
		return s, fault.UserAction(fmt.Errorf("instanceClass %q is not an Azure Cache for Redis size", s.sizeName), "InvalidInstanceClass",
			"Give instanceClass as Basic_C0 to Basic_C6, Standard_C0 to Standard_C6 or Premium_P1 to Premium_P5.", "")
	}
	tier, family, capacity := m[1], armredis.SKUFamilyC, m[2]
	if m[3] != "" {
		tier, family, capacity = m[3], armredis.SKUFamilyP, m[4]
	}
	n, _ := strconv.Atoi(capacity)
	s.sku = armredis.SKU{Name: to.Ptr(armredis.SKUName(tier)), Family: to.Ptr(family), Capacity: to.Ptr(int32(n))}
	if ha {
		if tier != string(armredis.SKUNamePremium) {
			return s, fault.UserAction(fmt.Errorf("multiAZ on %s: Azure Cache for Redis spreads a cache over zones on Premium sizes only", s.sizeName), "MultiAZNeedsPremium",
				"Give instanceClass a Premium_P size with multiAZ, or drop multiAZ.", "")
		}
		// The primary and its replica, each in its own zone.
		s.zones = []*string{to.Ptr("1"), to.Ptr("2")}
	}
	for _, k := range []string{"allocatedStorageGB", "backupRetentionDays"} {
		// A cache's memory is its size; its backups (RDB export) need a storage account
		// Groundwork does not make.
		if _, ok := settings[k]; ok {
			s.ignored = append(s.ignored, k)
		}
	}
	slices.Sort(s.ignored)
	return s, nil
}

// redisName is the job's cache: a DNS label under redis.cache.windows.net, unique across Azure.
func redisName(j *job.Job) string { return name(j, roleRedis) }

func redisClient(c *Client) (*armredis.Client, error) {
	cl, err := armredis.NewClient(c.SubscriptionID, c.cred, c.opts)
	if err != nil {
		return nil, fault.System(err)
	}
	return cl, nil
}

// redisView is what the driver reads of a cache.
type redisView struct {
	found           bool
	id, host, state string
	sslPort         int
}

// readRedis reads the job's cache; one of its name that is not the job's is refused.
func readRedis(ctx context.Context, c *Client, cl *armredis.Client, j *job.Job) (redisView, error) {
	v, err := cl.Get(ctx, c.ResourceGroup, redisName(j), nil)
	st, err := stateOf(err, v.Tags, v.Properties, j)
	if err != nil {
		return redisView{}, c.Classify(err)
	}
	out := redisView{found: st.Found, state: st.Provisioning, id: deref(v.ID), sslPort: redisTLSPort}
	if p := v.Properties; p != nil {
		out.host = deref(p.HostName)
		if p.SSLPort != nil {
			out.sslPort = int(*p.SSLPort)
		}
	}
	return out, nil
}

func (d DatastoreDriver) createRedis(ctx context.Context, p dspipe.CreateParams) (dspipe.ServerInfo, error) {
	pl, err := d.Resolve(ctx, p.JobID)
	if err != nil {
		return dspipe.ServerInfo{}, err
	}
	s, err := redisSizingOf(p.Version, p.Settings)
	if err != nil {
		return dspipe.ServerInfo{}, err
	}
	c, j := pl.C, pl.J
	if err := c.EnsureGroup(ctx, j.SpaceID); err != nil {
		return dspipe.ServerInfo{}, err
	}
	cl, err := redisClient(c)
	if err != nil {
		return dspipe.ServerInfo{}, err
	}
	cache := redisName(j)
	var v redisView
	err = c.await(ctx, "cache "+cache, func() (bool, error) {
		var err error
		if v, err = readRedis(ctx, c, cl, j); err != nil {
			return false, err
		}
		if !v.found {
			_, err := cl.BeginCreate(ctx, c.ResourceGroup, cache, armredis.CreateParameters{
				Location: to.Ptr(c.Location), Tags: tags(j, roleRedis), Zones: s.zones,
				Properties: &armredis.CreateProperties{
					SKU:                 &s.sku,
					RedisVersion:        to.Ptr(s.version),
					EnableNonSSLPort:    to.Ptr(false),
					MinimumTLSVersion:   to.Ptr(armredis.TLSVersionOne2),
					PublicNetworkAccess: to.Ptr(armredis.PublicNetworkAccessDisabled),
				},
			}, nil)
			if err != nil {
				return false, c.redisNameTaken(cache, c.Classify(fmt.Errorf("create cache %s: %w", cache, err)))
			}
			return false, nil
		}
		return v.host != "", nil
	})
	if err != nil {
		return dspipe.ServerInfo{}, err
	}
	return dspipe.ServerInfo{ID: v.id, Host: v.host, Port: v.sslPort, AdminUser: redisUser, Version: s.version}, nil
}

// redisNameTaken gives a 409 on a cache's create, after the resource group was found not to
// hold it, its fix: the name is a DNS name, held by a cache elsewhere in Azure.
func (c *Client) redisNameTaken(cache string, err error) error {
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusConflict && fault.ClassOf(err) != job.ClassTransient {
		return fault.UserAction(fmt.Errorf("cache name %s: %w", cache, re), "CacheNameTaken",
			fmt.Sprintf("The cache name %s.redis.cache.windows.net is held by a cache outside the space's resource group %s (a name is unique across Azure); delete that cache, or create the job again to get a new name.", cache, c.ResourceGroup),
			c.PortalURL("")+"/resources")
	}
	return err
}

func (d DatastoreDriver) redisStatus(ctx context.Context, p dspipe.StatusParams) (dspipe.ServerStatus, error) {
	pl, err := d.Resolve(ctx, p.JobID)
	if err != nil {
		return dspipe.ServerStatus{}, err
	}
	c, j := pl.C, pl.J
	cl, err := redisClient(c)
	if err != nil {
		return dspipe.ServerStatus{}, err
	}
	cache := redisName(j)
	v, err := readRedis(ctx, c, cl, j)
	if err != nil {
		return dspipe.ServerStatus{}, err
	}
	if !v.found {
		// Reached only after Create saw the cache: the read is behind, worth a retry.
		return dspipe.ServerStatus{}, fault.Transientf("cache %s is not visible yet", cache)
	}
	switch {
	case strings.EqualFold(v.state, string(armredis.ProvisioningStateFailed)):
		return dspipe.ServerStatus{}, fault.UserAction(fmt.Errorf("cache %s: Azure reports its provisioning failed", cache), "CacheFailed",
			"Azure could not make the cache; see its activity log, then delete the job and create it again.", c.PortalURL(v.id))
	case !strings.EqualFold(v.state, string(armredis.ProvisioningStateSucceeded)):
		return dspipe.ServerStatus{Message: fmt.Sprintf("%s is %s", cache, orCode(v.state, "being made"))}, nil
	}
	keys, err := cl.ListKeys(ctx, c.ResourceGroup, cache, nil)
	if err != nil {
		return dspipe.ServerStatus{}, c.Classify(fmt.Errorf("list the keys of cache %s: %w", cache, err))
	}
	key := deref(keys.PrimaryKey)
	if key == "" {
		return dspipe.ServerStatus{}, fault.Transientf("cache %s has no primary key yet", cache)
	}
	return dspipe.ServerStatus{Ready: true, Message: cache + " is ready", AdminPassword: key}, nil
}

func (d DatastoreDriver) deleteRedis(ctx context.Context, p dspipe.DeleteParams) (bool, error) {
	pl, err := d.Resolve(ctx, p.JobID)
	if err != nil {
		return false, err
	}
	c, j := pl.C, pl.J
	cl, err := redisClient(c)
	if err != nil {
		return false, err
	}
	cache := redisName(j)
	v, err := readRedis(ctx, c, cl, j)
	if err != nil && fault.As(err).Code != "NameTaken" {
		return false, err
	}
	if err != nil || !v.found {
		// A cache of the job's name that is not the job's is not deleted.
		return true, nil
	}
	if strings.EqualFold(v.state, string(armredis.ProvisioningStateDeleting)) {
		return false, nil
	}
	if _, err := cl.BeginDelete(ctx, c.ResourceGroup, cache, nil); err != nil {
		if notFound(err) {
			return true, nil
		}
		return false, c.Classify(fmt.Errorf("delete cache %s: %w", cache, err))
	}
	return false, nil
}
