package gcpfake

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
)

// HostRedis is Memorystore for Redis's host.
const HostRedis = "redis.googleapis.com"

func init() { registrations = append(registrations, registerRedis) }

const redisMetadata = "type.googleapis.com/google.cloud.redis.v1.OperationMetadata"

var (
	redisID       = regexp.MustCompile(`^[a-z][a-z0-9-]{0,38}[a-z0-9]$`)
	redisVersions = map[string]bool{"REDIS_3_2": true, "REDIS_4_0": true, "REDIS_5_0": true, "REDIS_6_X": true, "REDIS_7_0": true, "REDIS_7_2": true}
)

// Memorystore for Redis (redis/v1): instances, made and deleted by google.longrunning
// operations. An instance is readable at once in state CREATING and goes READY, with its
// host, port and (authEnabled) AUTH string, when the operation is done; a delete shows
// DELETING. The API takes no requestId.
func registerRedis(c *Cloud) {
	base := "/v1/projects/{project}/locations/{location}"
	c.Handle(HostRedis, "POST "+base+"/instances", c.redisCreate)
	c.Handle(HostRedis, "GET "+base+"/instances/{instance}", func(w http.ResponseWriter, r *http.Request) {
		if in, ok := c.redisInstance(w, r); ok {
			WriteJSON(w, http.StatusOK, withoutHidden(in.Body))
		}
	})
	c.Handle(HostRedis, "GET "+base+"/instances/{instance}/authString", func(w http.ResponseWriter, r *http.Request) {
		in, ok := c.redisInstance(w, r)
		if !ok {
			return
		}
		out := map[string]any{}
		if s, _ := in.Body["_authString"].(string); s != "" {
			out["authString"] = s
		}
		WriteJSON(w, http.StatusOK, out)
	})
	c.Handle(HostRedis, "DELETE "+base+"/instances/{instance}", func(w http.ResponseWriter, r *http.Request) {
		in, ok := c.redisInstance(w, r)
		if !ok {
			return
		}
		if in.Body["state"] == "DELETING" {
			WriteError(w, http.StatusBadRequest, "FAILED_PRECONDITION", "The instance is being deleted.", "FAILED_PRECONDITION")
			return
		}
		c.Update(HostRedis, in.Name, func(r *Resource) { r.Body["state"] = "DELETING" })
		op, _ := c.StartOp(HostRedis, parentOf(r)+"/operations/operation-"+newUUID(), "delete", in.Name, "", func() (any, *Status) {
			delete(c.resources, HostRedis+" "+in.Name)
			return map[string]any{"@type": "type.googleapis.com/google.protobuf.Empty"}, nil
		})
		WriteJSON(w, http.StatusOK, LRO(*op, redisMetadata))
	})
	c.Handle(HostRedis, "GET "+base+"/operations/{op}", func(w http.ResponseWriter, r *http.Request) {
		if !c.ownProject(w, r) {
			return
		}
		op, ok := c.Operation(HostRedis, parentOf(r)+"/operations/"+r.PathValue("op"))
		if !ok {
			NotFound(w, parentOf(r)+"/operations/"+r.PathValue("op"))
			return
		}
		WriteJSON(w, http.StatusOK, LRO(op, redisMetadata))
	})
}

func (c *Cloud) redisInstance(w http.ResponseWriter, r *http.Request) (Resource, bool) {
	if !c.ownProject(w, r) {
		return Resource{}, false
	}
	full := parentOf(r) + "/instances/" + r.PathValue("instance")
	in, ok := c.Lookup(HostRedis, full)
	if !ok {
		WriteError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("Resource '%s' was not found", full), "notFound",
			map[string]any{"@type": "type.googleapis.com/google.rpc.ResourceInfo", "resourceName": full})
		return Resource{}, false
	}
	return in, true
}

// withoutHidden is a body as the API answers it: without the fields the fake keeps to itself
// ("_authString", "_data"), which the API answers only by getAuthString and :access.
func withoutHidden(b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range b {
		if !strings.HasPrefix(k, "_") {
			out[k] = v
		}
	}
	return out
}

func (c *Cloud) redisCreate(w http.ResponseWriter, r *http.Request) {
	if !c.ownProject(w, r) {
		return
	}
	id := r.URL.Query().Get("instanceId")
	var in map[string]any
	if !ReadJSON(w, r, &in) {
		return
	}
	bad := func(msg string) {
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", msg, "badRequest",
			map[string]any{"@type": "type.googleapis.com/google.rpc.BadRequest"})
	}
	tier, _ := in["tier"].(string)
	mem, _ := in["memorySizeGb"].(float64)
	version, _ := in["redisVersion"].(string)
	netw, _ := in["authorizedNetwork"].(string)
	mode, _ := in["connectMode"].(string)
	switch {
	case !redisID.MatchString(id):
		bad(fmt.Sprintf("Invalid instance_id %q: it must be 1 to 40 lower-case letters, digits or hyphens, starting with a letter.", id))
		return
	case tier != "BASIC" && tier != "STANDARD_HA":
		bad(fmt.Sprintf("Invalid value at 'instance.tier' (%q)", tier))
		return
	case mem < 1 || mem > 300:
		bad(fmt.Sprintf("Invalid value at 'instance.memory_size_gb' (%v): must be between 1 and 300.", mem))
		return
	case version != "" && !redisVersions[version]:
		bad(fmt.Sprintf("Invalid value at 'instance.redis_version' (%q)", version))
		return
	}
	netPath := strings.TrimPrefix(netw, SelfLinkBase)
	if netw != "" {
		if _, ok := c.Lookup(HostCompute, netPath); !ok {
			bad(fmt.Sprintf("Invalid authorized network: network %s not found.", netw))
			return
		}
	}
	// In PRIVATE_SERVICE_ACCESS mode the instance's address comes from the network's
	// private services access: Memorystore refuses a network without a connection to
	// servicenetworking.googleapis.com, and a range the connection does not reserve.
	reserved, peered := c.PSARanges(netPath)
	if mode == "PRIVATE_SERVICE_ACCESS" && !peered {
		WriteError(w, http.StatusBadRequest, "FAILED_PRECONDITION",
			fmt.Sprintf("Private services access is not enabled on network %s: create a private connection to service servicenetworking.googleapis.com first.", netw), "failedPrecondition")
		return
	}
	if rng, _ := in["reservedIpRange"].(string); rng != "" && mode == "PRIVATE_SERVICE_ACCESS" {
		a, ok := c.Lookup(HostCompute, "projects/"+c.Project+"/global/addresses/"+rng)
		if !ok || a.Body["purpose"] != "VPC_PEERING" || strings.TrimPrefix(fmt.Sprint(a.Body["network"]), SelfLinkBase) != netPath || !slices.Contains(reserved, rng) {
			bad(fmt.Sprintf("The allocated IP range %s is not an allocated range of network %s.", rng, netw))
			return
		}
	}
	full := parentOf(r) + "/instances/" + id
	if _, ok := c.Lookup(HostRedis, full); ok {
		WriteError(w, http.StatusConflict, "ALREADY_EXISTS", fmt.Sprintf("Resource '%s' already exists", full), "alreadyExists")
		return
	}
	loc := r.PathValue("location")
	if version == "" {
		in["redisVersion"] = "REDIS_7_0"
	}
	if mode == "" {
		in["connectMode"] = "DIRECT_PEERING"
	}
	if in["transitEncryptionMode"] == nil {
		in["transitEncryptionMode"] = "DISABLED"
	}
	in["name"], in["state"] = full, "CREATING"
	in["createTime"] = time.Now().UTC().Format(time.RFC3339Nano)
	in["locationId"] = loc + "-b"
	c.Put(Resource{Service: HostRedis, Kind: "redis.instance", Name: full, Body: in})
	c.mu.Lock()
	n := c.next()
	c.mu.Unlock()
	op, _ := c.StartOp(HostRedis, parentOf(r)+"/operations/operation-"+newUUID(), "create", full, "", func() (any, *Status) {
		res, ok := c.resources[HostRedis+" "+full]
		if !ok {
			return nil, &Status{Code: 10, Message: "the instance was deleted while being created", Reason: "ABORTED"}
		}
		b := res.Body
		b["state"], b["currentLocationId"] = "READY", loc+"-b"
		b["host"] = fmt.Sprintf("10.%d.%d.%d", 200+n/65536%50, n/256%256, 4+n%250)
		b["port"] = 6379
		if b["transitEncryptionMode"] == "SERVER_AUTHENTICATION" {
			b["port"] = 6378
			b["serverCaCerts"] = []any{map[string]any{"serialNumber": fmt.Sprint(n), "cert": "-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n"}}
		}
		if b["authEnabled"] == true {
			var raw [24]byte
			_, _ = rand.Read(raw[:])
			b["_authString"] = base64.RawURLEncoding.EncodeToString(raw[:])
		}
		resp := map[string]any{"@type": "type.googleapis.com/google.cloud.redis.v1.Instance"}
		for k, v := range withoutHidden(b) {
			resp[k] = v
		}
		return resp, nil
	})
	WriteJSON(w, http.StatusOK, LRO(*op, redisMetadata))
}

// RedisAuthString is the AUTH string of the instance named full, for tests.
func (c *Cloud) RedisAuthString(full string) (string, bool) {
	in, ok := c.Lookup(HostRedis, full)
	if !ok {
		return "", false
	}
	s, _ := in.Body["_authString"].(string)
	return s, s != ""
}
