package gcpfake

import (
	"encoding/base64"
	"fmt"
	"hash/crc32"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// HostSecretManager is Secret Manager's host.
const HostSecretManager = "secretmanager.googleapis.com"

func init() { registrations = append(registrations, registerSecretManager) }

var secretID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)

// maxPayload is Secret Manager's limit on a version's payload: 64 KiB.
const maxPayload = 64 << 10

// Secret Manager (secretmanager/v1): secrets, their versions, and access to a version's
// payload ("latest" is the newest enabled one). Secret Manager answers at once (no
// operations); it names resources by project number, and takes the project id or number in
// a path. Deleting a secret deletes its versions with it; nothing is kept recoverable.
func registerSecretManager(c *Cloud) {
	base := "/v1/projects/{project}/secrets"
	c.Handle(HostSecretManager, "POST "+base, c.smCreate)
	c.Handle(HostSecretManager, "GET "+base+"/{secret}", func(w http.ResponseWriter, r *http.Request) {
		if s, ok := c.smSecret(w, r, r.PathValue("secret")); ok {
			WriteJSON(w, http.StatusOK, s.Body)
		}
	})
	c.Handle(HostSecretManager, "DELETE "+base+"/{secret}", func(w http.ResponseWriter, r *http.Request) {
		s, ok := c.smSecret(w, r, r.PathValue("secret"))
		if !ok {
			return
		}
		c.mu.Lock()
		for k, res := range c.resources {
			if res.Service == HostSecretManager && (res.Name == s.Name || strings.HasPrefix(res.Name, s.Name+"/")) {
				delete(c.resources, k)
			}
		}
		c.mu.Unlock()
		WriteJSON(w, http.StatusOK, map[string]any{})
	})
	// ":addVersion" is part of the last path segment, which a mux pattern cannot split.
	c.Handle(HostSecretManager, "POST "+base+"/{secretverb}", func(w http.ResponseWriter, r *http.Request) {
		id, verb, _ := strings.Cut(r.PathValue("secretverb"), ":")
		if verb != "addVersion" {
			NotFound(w, r.URL.Path)
			return
		}
		c.smAddVersion(w, r, id)
	})
	c.Handle(HostSecretManager, "GET "+base+"/{secret}/versions/{versionverb}", func(w http.ResponseWriter, r *http.Request) {
		v, verb, _ := strings.Cut(r.PathValue("versionverb"), ":")
		if verb != "access" {
			NotFound(w, r.URL.Path)
			return
		}
		c.smAccess(w, r, r.PathValue("secret"), v)
	})
}

// smProject accepts the project's id or number, as Secret Manager does.
func (c *Cloud) smProject(w http.ResponseWriter, r *http.Request) bool {
	if p := r.PathValue("project"); p != c.Project && p != ProjectNumber {
		WriteError(w, http.StatusForbidden, "PERMISSION_DENIED",
			fmt.Sprintf("Permission 'secretmanager.secrets.get' denied for resource 'projects/%s' (or it may not exist).", p), "forbidden")
		return false
	}
	return true
}

func smName(id string) string       { return "projects/" + Project + "/secrets/" + id }
func smPublicName(id string) string { return "projects/" + ProjectNumber + "/secrets/" + id }

func (c *Cloud) smSecret(w http.ResponseWriter, r *http.Request, id string) (Resource, bool) {
	if !c.smProject(w, r) {
		return Resource{}, false
	}
	s, ok := c.Lookup(HostSecretManager, smName(id))
	if !ok {
		WriteError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("Secret [%s] not found or has no versions.", smPublicName(id)), "notFound")
		return Resource{}, false
	}
	return s, true
}

func (c *Cloud) smCreate(w http.ResponseWriter, r *http.Request) {
	if !c.smProject(w, r) {
		return
	}
	id := r.URL.Query().Get("secretId")
	var in map[string]any
	if !ReadJSON(w, r, &in) {
		return
	}
	if !secretID.MatchString(id) {
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT",
			"Secret id ["+id+"] is invalid: it must be at most 255 letters, digits, underscores or hyphens.", "badRequest")
		return
	}
	rep, _ := in["replication"].(map[string]any)
	if rep == nil || (rep["automatic"] == nil && rep["userManaged"] == nil) {
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Secret.replication must be set.", "badRequest")
		return
	}
	if _, ok := c.Lookup(HostSecretManager, smName(id)); ok {
		WriteError(w, http.StatusConflict, "ALREADY_EXISTS", fmt.Sprintf("Secret [%s] already exists.", smPublicName(id)), "alreadyExists")
		return
	}
	in["name"] = smPublicName(id)
	in["createTime"] = time.Now().UTC().Format(time.RFC3339Nano)
	in["etag"] = fmt.Sprintf("\"%x\"", time.Now().UnixNano())
	c.Put(Resource{Service: HostSecretManager, Kind: "secretmanager.secret", Name: smName(id), Body: in})
	WriteJSON(w, http.StatusOK, in)
}

func (c *Cloud) smAddVersion(w http.ResponseWriter, r *http.Request, id string) {
	s, ok := c.smSecret(w, r, id)
	if !ok {
		return
	}
	var in struct {
		Payload struct {
			Data       string `json:"data"`
			DataCrc32c string `json:"dataCrc32c"`
		} `json:"payload"`
	}
	if !ReadJSON(w, r, &in) {
		return
	}
	data, err := base64.StdEncoding.DecodeString(in.Payload.Data)
	if err != nil {
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid value at 'payload.data': not base64.", "badRequest")
		return
	}
	if len(data) > maxPayload {
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Secret Payload cannot exceed 65536 bytes.", "badRequest")
		return
	}
	if in.Payload.DataCrc32c != "" {
		if want := strconv.FormatUint(uint64(crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))), 10); want != in.Payload.DataCrc32c {
			WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Checksum mismatch: the payload's data_crc32c does not match its data.", "badRequest")
			return
		}
	}
	c.mu.Lock()
	n := 1
	for _, res := range c.resources {
		if res.Service == HostSecretManager && strings.HasPrefix(res.Name, s.Name+"/versions/") {
			n++
		}
	}
	v := map[string]any{"name": smPublicName(id) + "/versions/" + strconv.Itoa(n), "state": "ENABLED",
		"createTime": time.Now().UTC().Format(time.RFC3339Nano), "_data": in.Payload.Data}
	c.put(Resource{Service: HostSecretManager, Kind: "secretmanager.secretVersion", Name: s.Name + "/versions/" + strconv.Itoa(n), Body: v})
	c.mu.Unlock()
	WriteJSON(w, http.StatusOK, withoutHidden(v))
}

func (c *Cloud) smAccess(w http.ResponseWriter, r *http.Request, id, version string) {
	s, ok := c.smSecret(w, r, id)
	if !ok {
		return
	}
	missing := func() {
		WriteError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("Secret Version [%s/versions/%s] not found.", smPublicName(id), version), "notFound")
	}
	if version == "latest" {
		best := 0
		for _, v := range c.Under(HostSecretManager, s.Name+"/versions") {
			n, _ := strconv.Atoi(v.Name[strings.LastIndex(v.Name, "/")+1:])
			if v.Body["state"] == "ENABLED" && n > best {
				best = n
			}
		}
		if best == 0 {
			missing()
			return
		}
		version = strconv.Itoa(best)
	}
	v, ok := c.Lookup(HostSecretManager, s.Name+"/versions/"+version)
	if !ok || v.Body["state"] != "ENABLED" {
		missing()
		return
	}
	data, _ := v.Body["_data"].(string)
	raw, _ := base64.StdEncoding.DecodeString(data)
	WriteJSON(w, http.StatusOK, map[string]any{"name": v.Body["name"], "payload": map[string]any{"data": data,
		"dataCrc32c": strconv.FormatUint(uint64(crc32.Checksum(raw, crc32.MakeTable(crc32.Castagnoli))), 10)}})
}

// SecretValue is the newest version's value of the secret id, for tests.
func (c *Cloud) SecretValue(id string) (string, bool) {
	best, val := 0, ""
	for _, v := range c.Under(HostSecretManager, smName(id)+"/versions") {
		n, _ := strconv.Atoi(v.Name[strings.LastIndex(v.Name, "/")+1:])
		if n > best {
			data, _ := v.Body["_data"].(string)
			raw, _ := base64.StdEncoding.DecodeString(data)
			best, val = n, string(raw)
		}
	}
	return val, best > 0
}
