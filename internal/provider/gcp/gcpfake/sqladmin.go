package gcpfake

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
)

// HostSQLAdmin is the Cloud SQL Admin API's host.
const HostSQLAdmin = "sqladmin.googleapis.com"

func init() { registrations = append(registrations, registerSQLAdmin) }

// sqlVersions are the databaseVersion values the fake takes (Cloud SQL's current majors).
var sqlVersions = map[string]bool{
	"POSTGRES_12": true, "POSTGRES_13": true, "POSTGRES_14": true, "POSTGRES_15": true, "POSTGRES_16": true, "POSTGRES_17": true,
	"MYSQL_5_7": true, "MYSQL_8_0": true, "MYSQL_8_4": true,
}

// sqlTier is a Cloud SQL machine type: shared-core, custom, or Enterprise Plus's
// performance-optimized.
var sqlTier = regexp.MustCompile(`^db-(f1-micro|g1-small|custom-[0-9]+-[0-9]+|perf-optimized-N-[0-9]+)$`)

// Cloud SQL Admin (sqladmin/v1): instances, their users, and sql#operation operations.
// An instance is readable at once in state PENDING_CREATE and goes RUNNABLE with a private
// address when its CREATE operation is done; a delete shows PENDING_DELETE until it is done.
// Cloud SQL runs one operation at a time on an instance: another mutation meanwhile is 409
// operationInProgress. The API takes no requestId.
func registerSQLAdmin(c *Cloud) {
	base := "/v1/projects/{project}/instances"
	c.Handle(HostSQLAdmin, "POST "+base, c.sqlInsert)
	c.Handle(HostSQLAdmin, "GET "+base, func(w http.ResponseWriter, r *http.Request) {
		if !c.ownProject(w, r) {
			return
		}
		items := []map[string]any{}
		for _, in := range c.Under(HostSQLAdmin, "projects/"+c.Project+"/instances") {
			items = append(items, in.Body)
		}
		WriteJSON(w, http.StatusOK, map[string]any{"kind": "sql#instancesList", "items": items})
	})
	c.Handle(HostSQLAdmin, "GET "+base+"/{instance}", func(w http.ResponseWriter, r *http.Request) {
		if in, ok := c.sqlInstance(w, r); ok {
			WriteJSON(w, http.StatusOK, in.Body)
		}
	})
	c.Handle(HostSQLAdmin, "DELETE "+base+"/{instance}", c.sqlDelete)
	c.Handle(HostSQLAdmin, "GET "+base+"/{instance}/users", func(w http.ResponseWriter, r *http.Request) {
		in, ok := c.sqlInstance(w, r)
		if !ok {
			return
		}
		items := []map[string]any{}
		for _, u := range c.Under(HostSQLAdmin, in.Name+"/users") {
			items = append(items, publicUser(u.Body))
		}
		WriteJSON(w, http.StatusOK, map[string]any{"kind": "sql#usersList", "items": items})
	})
	c.Handle(HostSQLAdmin, "PUT "+base+"/{instance}/users", c.sqlUpdateUser)
	c.Handle(HostSQLAdmin, "GET /v1/projects/{project}/operations/{operation}", func(w http.ResponseWriter, r *http.Request) {
		if !c.ownProject(w, r) {
			return
		}
		op, ok := c.Operation(HostSQLAdmin, r.PathValue("operation"))
		if !ok {
			WriteError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("The Cloud SQL operation %s does not exist.", r.PathValue("operation")), "operationDoesNotExist")
			return
		}
		WriteJSON(w, http.StatusOK, sqlOp(op))
	})
}

func sqlName(project, instance string) string {
	return "projects/" + project + "/instances/" + instance
}

func (c *Cloud) sqlInstance(w http.ResponseWriter, r *http.Request) (Resource, bool) {
	if !c.ownProject(w, r) {
		return Resource{}, false
	}
	in, ok := c.Lookup(HostSQLAdmin, sqlName(c.Project, r.PathValue("instance")))
	if !ok {
		WriteError(w, http.StatusNotFound, "NOT_FOUND", "The Cloud SQL instance does not exist.", "instanceDoesNotExist")
		return Resource{}, false
	}
	return in, true
}

// sqlBusy reports whether an operation on target is under way (the lock is held).
func (c *Cloud) sqlBusy(target string) bool {
	for _, op := range c.ops {
		if op.Service == HostSQLAdmin && op.Target == target && !op.Done {
			return true
		}
	}
	return false
}

func operationInProgress(w http.ResponseWriter) {
	WriteError(w, http.StatusConflict, "ABORTED", "Operation failed because another operation was already in progress.", "operationInProgress")
}

func (c *Cloud) sqlInsert(w http.ResponseWriter, r *http.Request) {
	if !c.ownProject(w, r) {
		return
	}
	var in map[string]any
	if !ReadJSON(w, r, &in) {
		return
	}
	name, _ := in["name"].(string)
	version, _ := in["databaseVersion"].(string)
	settings, _ := in["settings"].(map[string]any)
	tier, _ := settings["tier"].(string)
	ipc, _ := settings["ipConfiguration"].(map[string]any)
	switch {
	case !validName(name):
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid request: instance name ("+name+").", "invalid")
		return
	case !sqlVersions[version]:
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("Invalid request: Invalid value for databaseVersion (%s).", version), "invalid")
		return
	case settings == nil || !sqlTier.MatchString(tier):
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("Invalid request: Invalid Tier (%s) for (%s) Edition (%v).", tier, version, settings["edition"]), "invalid")
		return
	case settings["availabilityType"] == "REGIONAL" && (tier == "db-f1-micro" || tier == "db-g1-small"):
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid request: High availability is not supported for shared-core machine types.", "invalid")
		return
	}
	if enabled, _ := ipc["ipv4Enabled"].(bool); !enabled && ipc["privateNetwork"] == nil {
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT",
			"Invalid request: At least one of Public IP or Private IP or PSC connectivity must be enabled.", "invalid")
		return
	}
	netw, _ := ipc["privateNetwork"].(string)
	netPath := strings.TrimPrefix(netw, SelfLinkBase)
	if netw != "" {
		if _, ok := c.Lookup(HostCompute, netPath); !ok {
			WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("Invalid request: Incorrect Service Networking config for instance: %s:%s:NETWORK_NOT_FOUND.", c.Project, name), "invalid")
			return
		}
	}
	// A private IP comes from the network's private services access: Cloud SQL refuses a
	// network that has no connection to servicenetworking.googleapis.com, and a range the
	// connection does not reserve.
	reserved, peered := c.PSARanges(netPath)
	if netw != "" && !peered {
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("Invalid request: Incorrect Service Networking config for instance: %s:%s:NETWORK_NOT_PEERED.", c.Project, name), "invalid")
		return
	}
	if rng, _ := ipc["allocatedIpRange"].(string); rng != "" {
		a, ok := c.Lookup(HostCompute, "projects/"+c.Project+"/global/addresses/"+rng)
		if !ok || a.Body["purpose"] != "VPC_PEERING" || strings.TrimPrefix(fmt.Sprint(a.Body["network"]), SelfLinkBase) != netPath || !slices.Contains(reserved, rng) {
			WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("Invalid request: The allocated IP range [%s] is not found in the network [%s].", rng, netw), "invalid")
			return
		}
	}
	full := sqlName(c.Project, name)
	if _, ok := c.Lookup(HostSQLAdmin, full); ok {
		WriteError(w, http.StatusConflict, "ALREADY_EXISTS", "The Cloud SQL instance already exists.", "instanceAlreadyExists")
		return
	}
	root, _ := in["rootPassword"].(string)
	delete(in, "rootPassword")
	region, _ := in["region"].(string)
	if region == "" {
		region = "us-central1"
	}
	in["kind"], in["project"], in["region"], in["state"] = "sql#instance", c.Project, region, "PENDING_CREATE"
	in["backendType"], in["instanceType"] = "SECOND_GEN", "CLOUD_SQL_INSTANCE"
	in["connectionName"] = c.Project + ":" + region + ":" + name
	in["selfLink"] = "https://sqladmin.googleapis.com/v1/" + full
	in["gceZone"] = region + "-b"
	in["createTime"] = time.Now().UTC().Format(time.RFC3339Nano)
	settings["kind"], settings["settingsVersion"] = "sql#settings", "1"
	if settings["dataDiskSizeGb"] == nil {
		settings["dataDiskSizeGb"] = "10"
	}
	admin := "root"
	if strings.HasPrefix(version, "POSTGRES") {
		admin = "postgres"
	}
	c.mu.Lock()
	n := c.next()
	c.mu.Unlock()
	c.Put(Resource{Service: HostSQLAdmin, Kind: "sql#instance", Name: full, Body: in})
	c.Put(Resource{Service: HostSQLAdmin, Kind: "sql#user", Name: full + "/users/" + admin, Body: map[string]any{
		"kind": "sql#user", "name": admin, "host": "%", "instance": name, "project": c.Project, "password": root}})
	op, _ := c.StartOp(HostSQLAdmin, newUUID(), "CREATE", full, "", func() (any, *Status) {
		res, ok := c.resources[HostSQLAdmin+" "+full]
		if !ok {
			return nil, &Status{Code: 10, Message: "The instance was deleted while being created.", Reason: "INTERNAL_ERROR"}
		}
		res.Body["state"] = "RUNNABLE"
		res.Body["ipAddresses"] = []any{map[string]any{"type": "PRIVATE", "ipAddress": fmt.Sprintf("10.%d.%d.%d", 100+n/65536%100, n/256%256, 3+n%250)}}
		res.Body["databaseInstalledVersion"] = version
		return nil, nil
	})
	WriteJSON(w, http.StatusOK, sqlOp(*op))
}

func (c *Cloud) sqlDelete(w http.ResponseWriter, r *http.Request) {
	in, ok := c.sqlInstance(w, r)
	if !ok {
		return
	}
	c.mu.Lock()
	busy := c.sqlBusy(in.Name)
	c.mu.Unlock()
	if busy {
		operationInProgress(w)
		return
	}
	if s, _ := in.Body["settings"].(map[string]any); s["deletionProtectionEnabled"] == true {
		WriteError(w, http.StatusBadRequest, "FAILED_PRECONDITION",
			"The instance is protected. Please disable the deletion protection and try again. To disable deletion protection, update the instance settings with deletionProtectionEnabled set to false.", "instanceProtected")
		return
	}
	c.Update(HostSQLAdmin, in.Name, func(r *Resource) { r.Body["state"] = "PENDING_DELETE" })
	op, _ := c.StartOp(HostSQLAdmin, newUUID(), "DELETE", in.Name, "", func() (any, *Status) {
		for k, res := range c.resources {
			if res.Service == HostSQLAdmin && (res.Name == in.Name || strings.HasPrefix(res.Name, in.Name+"/")) {
				delete(c.resources, k)
			}
		}
		return nil, nil
	})
	WriteJSON(w, http.StatusOK, sqlOp(*op))
}

// sqlUpdateUser is users.update: the password of the user name@host (host "" for
// PostgreSQL's users, "%" for MySQL's any-host user).
func (c *Cloud) sqlUpdateUser(w http.ResponseWriter, r *http.Request) {
	in, ok := c.sqlInstance(w, r)
	if !ok {
		return
	}
	var u map[string]any
	if !ReadJSON(w, r, &u) {
		return
	}
	name := r.URL.Query().Get("name")
	full := in.Name + "/users/" + name
	if _, ok := c.Lookup(HostSQLAdmin, full); !ok {
		WriteError(w, http.StatusNotFound, "NOT_FOUND", "The Cloud SQL user does not exist.", "userDoesNotExist")
		return
	}
	c.mu.Lock()
	busy := c.sqlBusy(in.Name)
	c.mu.Unlock()
	if busy || in.Body["state"] != "RUNNABLE" {
		operationInProgress(w)
		return
	}
	pw, _ := u["password"].(string)
	op, _ := c.StartOp(HostSQLAdmin, newUUID(), "UPDATE_USER", in.Name, "", func() (any, *Status) {
		if res, ok := c.resources[HostSQLAdmin+" "+full]; ok {
			res.Body["password"] = pw
		}
		return nil, nil
	})
	WriteJSON(w, http.StatusOK, sqlOp(*op))
}

// SQLPassword is the password Cloud SQL holds for user on instance (the API never answers
// it), for tests.
func (c *Cloud) SQLPassword(instance, user string) (string, bool) {
	u, ok := c.Lookup(HostSQLAdmin, sqlName(c.Project, instance)+"/users/"+user)
	if !ok {
		return "", false
	}
	pw, _ := u.Body["password"].(string)
	return pw, true
}

func publicUser(b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range b {
		if k != "password" {
			out[k] = v
		}
	}
	return out
}

// sqlOp is op as a sql#operation.
func sqlOp(op Op) map[string]any {
	instance := op.Target[strings.LastIndex(op.Target, "/")+1:]
	out := map[string]any{"kind": "sql#operation", "name": op.Name, "operationType": op.Type, "status": op.State(),
		"targetId": instance, "targetProject": Project, "targetLink": "https://sqladmin.googleapis.com/v1/" + op.Target,
		"selfLink":   "https://sqladmin.googleapis.com/v1/projects/" + Project + "/operations/" + op.Name,
		"user":       "groundwork@" + Project + ".iam.gserviceaccount.com",
		"insertTime": op.Started.UTC().Format(time.RFC3339Nano)}
	if op.State() != "PENDING" {
		out["startTime"] = op.Started.UTC().Format(time.RFC3339Nano)
	}
	if op.Done {
		out["endTime"] = time.Now().UTC().Format(time.RFC3339Nano)
		if op.Err != nil {
			out["error"] = map[string]any{"kind": "sql#operationErrors",
				"errors": []map[string]any{{"kind": "sql#operationError", "code": op.Err.Reason, "message": op.Err.Message}}}
		}
	}
	return out
}
