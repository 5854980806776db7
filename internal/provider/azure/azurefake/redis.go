package azurefake

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"regexp"
	"strings"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/redis/armredis/v3"
	redisfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/redis/armredis/v3/fake"
)

const typeRedis = "Microsoft.Cache/Redis"

// cacheName is Azure's rule for a cache's name: 1 to 63 letters, digits and single hyphens,
// starting and ending with a letter or digit.
var cacheName = regexp.MustCompile(`^[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*$`)

// redisServers keep Azure Cache for Redis caches (armredis's Client). A cache's name is its
// DNS name under redis.cache.windows.net, so it is unique across the subscription here
// (across Azure there): a create of a name another resource group holds is refused 409. A
// cache gets its two access keys when it is first made (32 random bytes in base64, as
// Azure's); an update keeps them, GET never shows them, ListKeys reads them.
func (c *Cloud) redisServers() []route {
	f := &redisfake.ServerFactory{Server: redisfake.Server{
		BeginCreate: func(_ context.Context, rg, name string, p armredis.CreateParameters, _ *armredis.ClientBeginCreateOptions) (resp azfake.PollerResponder[armredis.ClientCreateResponse], errResp azfake.ErrorResponder) {
			id := armID(rg, typeRedis, name)
			if len(name) > 63 || !cacheName.MatchString(name) {
				errResp.SetResponseError(http.StatusBadRequest, "InvalidCacheName")
				return
			}
			for _, other := range c.named(typeRedis, name) {
				if !strings.EqualFold(other, id) {
					errResp.SetResponseError(http.StatusConflict, "NameNotAvailable")
					return
				}
			}
			if r := checkRedisSKU(p); r != nil {
				r.into(&errResp)
				return
			}
			primary, secondary := newCacheKey(), newCacheKey()
			resp, errResp = putter[armredis.ClientCreateResponse](c, rg, id, typeRedis, p, func(props map[string]any) {
				// Under c.mu (store's fix): the keys are made once per cache.
				if c.redisKeys == nil {
					c.redisKeys = map[string][2]string{}
				}
				if _, ok := c.redisKeys[strings.ToLower(id)]; !ok {
					c.redisKeys[strings.ToLower(id)] = [2]string{primary, secondary}
				}
				delete(props, "accessKeys")
				props["hostName"] = strings.ToLower(name) + ".redis.cache.windows.net"
				props["port"] = 6379
				props["sslPort"] = 6380
				props["enableNonSslPort"] = props["enableNonSslPort"] == true
				props["minimumTlsVersion"] = orDefaultAny(props["minimumTlsVersion"], "1.2")
				props["publicNetworkAccess"] = orDefaultAny(props["publicNetworkAccess"], "Enabled")
				v, _ := props["redisVersion"].(string)
				if v == "" || v == "latest" {
					v = "6"
				}
				if !strings.Contains(v, ".") {
					v += ".0"
				}
				props["redisVersion"] = v
			})
			return
		},
		Get: func(_ context.Context, rg, name string, _ *armredis.ClientGetOptions) (azfake.Responder[armredis.ClientGetResponse], azfake.ErrorResponder) {
			return getter[armredis.ClientGetResponse](c, armID(rg, typeRedis, name))
		},
		ListKeys: func(_ context.Context, rg, name string, _ *armredis.ClientListKeysOptions) (resp azfake.Responder[armredis.ClientListKeysResponse], errResp azfake.ErrorResponder) {
			keys, ok := c.RedisKeys(armID(rg, typeRedis, name))
			if !ok {
				errResp.SetResponseError(http.StatusNotFound, "ResourceNotFound")
				return
			}
			resp.SetResponse(http.StatusOK, armredis.ClientListKeysResponse{AccessKeys: armredis.AccessKeys{
				PrimaryKey: to.Ptr(keys[0]), SecondaryKey: to.Ptr(keys[1])}}, nil)
			return
		},
		BeginDelete: func(_ context.Context, rg, name string, _ *armredis.ClientBeginDeleteOptions) (azfake.PollerResponder[armredis.ClientDeleteResponse], azfake.ErrorResponder) {
			id := armID(rg, typeRedis, name)
			c.mu.Lock()
			delete(c.redisKeys, strings.ToLower(id))
			c.mu.Unlock()
			return deleter[armredis.ClientDeleteResponse](c, id, "")
		},
	}}
	// armredis names its cache client plain "Client": the namespace tells its calls apart.
	return []route{{prefix: "Client", tr: redisfake.NewServerFactoryTransport(f), namespace: "Microsoft.Cache"}}
}

// RedisKeys are the primary and secondary access keys of the cache with id, while it exists.
func (c *Cloud) RedisKeys(id string) ([2]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.objs[strings.ToLower(id)]; !ok {
		return [2]string{}, false
	}
	k, ok := c.redisKeys[strings.ToLower(id)]
	return k, ok
}

// checkRedisSKU refuses what Azure refuses of a cache's size: a family that is not its tier's,
// a capacity outside the tier's, and zones on a tier other than Premium.
func checkRedisSKU(p armredis.CreateParameters) *refusal {
	bad := &refusal{http.StatusBadRequest, "InvalidRequestContent"}
	if p.Location == nil || p.Properties == nil || p.Properties.SKU == nil {
		return bad
	}
	s := p.Properties.SKU
	if s.Name == nil || s.Family == nil || s.Capacity == nil {
		return bad
	}
	switch {
	case *s.Name == armredis.SKUNamePremium && *s.Family == armredis.SKUFamilyP && *s.Capacity >= 1 && *s.Capacity <= 5:
	case (*s.Name == armredis.SKUNameBasic || *s.Name == armredis.SKUNameStandard) && *s.Family == armredis.SKUFamilyC && *s.Capacity >= 0 && *s.Capacity <= 6:
		if len(p.Zones) > 0 {
			return &refusal{http.StatusBadRequest, "ZonesNotSupported"}
		}
	default:
		return &refusal{http.StatusBadRequest, "InvalidSku"}
	}
	return nil
}

// newCacheKey is an access key as Azure makes them: 32 random bytes, base64.
func newCacheKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}
