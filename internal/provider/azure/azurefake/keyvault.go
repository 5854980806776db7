package azurefake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"
)

// HeaderHost carries the host a request was addressed to (a Key Vault's
// "<name>.vault.azure.net"), which Transport replaces with the fake's.
const HeaderHost = "X-Azurefake-Host"

// The Key Vault data plane has no fake server in its SDK module (azsecrets), so it is
// written here after the REST API (api-version 7.5): secrets with versions, soft delete
// (a deleted name is refused until purged), Key Vault's error codes, and the bearer
// challenge the SDK's client starts every conversation with.

type vaultSecret struct {
	versions []secretVersion
	deleted  bool
}

type secretVersion struct {
	id          string
	value       string
	contentType string
	tags        map[string]string
	created     int64
}

// vaultSecrets are a vault's secrets by lower-case name (Key Vault names are case-blind).
type vaultSecrets map[string]*vaultSecret

func (c *Cloud) serveVault(w http.ResponseWriter, req *http.Request, host string) {
	if req.Header.Get("Authorization") == "" {
		w.Header().Set("WWW-Authenticate", `Bearer authorization="https://login.microsoftonline.com/00000000-0000-0000-0000-000000000000", resource="https://vault.azure.net"`)
		writeError(w, http.StatusUnauthorized, "Unauthorized", "AKV10000: Request is missing a Bearer or PoP token.")
		return
	}
	vault := strings.ToLower(strings.SplitN(host, ".", 2)[0])
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	if len(parts) < 2 || (parts[0] != "secrets" && parts[0] != "deletedsecrets") {
		writeError(w, http.StatusBadRequest, "BadParameter", "the fake serves /secrets and /deletedsecrets only")
		return
	}
	name, key := parts[1], strings.ToLower(parts[1])
	version := ""
	if len(parts) > 2 {
		version = parts[2]
	}
	base := "https://" + host + "/secrets/" + name
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.vaults == nil {
		c.vaults = map[string]vaultSecrets{}
	}
	if c.vaults[vault] == nil {
		c.vaults[vault] = vaultSecrets{}
	}
	secrets := c.vaults[vault]
	s := secrets[key]
	notFound := func() {
		writeError(w, http.StatusNotFound, "SecretNotFound", fmt.Sprintf("A secret with (name/id) %s was not found in this key vault.", name))
	}
	switch {
	case parts[0] == "deletedsecrets" && req.Method == http.MethodDelete:
		if s == nil || !s.deleted {
			notFound()
			return
		}
		delete(secrets, key)
		w.WriteHeader(http.StatusNoContent)
	case req.Method == http.MethodPut:
		if s != nil && s.deleted {
			writeError(w, http.StatusConflict, "Conflict", fmt.Sprintf("Secret %s is currently in a deleted but recoverable state, and its name cannot be reused; in this state, the secret can only be recovered or purged.", name))
			return
		}
		var body struct {
			Value       *string           `json:"value"`
			ContentType string            `json:"contentType"`
			Tags        map[string]string `json:"tags"`
		}
		if json.NewDecoder(req.Body).Decode(&body) != nil || body.Value == nil {
			writeError(w, http.StatusBadRequest, "BadParameter", "The parameter value is required.")
			return
		}
		if s == nil {
			s = &vaultSecret{}
			secrets[key] = s
		}
		c.nextOp++
		v := secretVersion{id: fmt.Sprintf("%032x", c.nextOp), value: *body.Value, contentType: body.ContentType, tags: body.Tags, created: time.Now().Unix()}
		s.versions = append(s.versions, v)
		writeJSON(w, http.StatusOK, bundle(base, v))
	case req.Method == http.MethodGet:
		if s == nil || s.deleted {
			notFound()
			return
		}
		v := s.versions[len(s.versions)-1]
		if version != "" {
			found := false
			for _, have := range s.versions {
				if have.id == version {
					v, found = have, true
				}
			}
			if !found {
				notFound()
				return
			}
		}
		writeJSON(w, http.StatusOK, bundle(base, v))
	case req.Method == http.MethodDelete:
		if s == nil || s.deleted {
			notFound()
			return
		}
		s.deleted = true
		b := map[string]any{}
		_ = json.Unmarshal(bundle(base, s.versions[len(s.versions)-1]), &b)
		delete(b, "value")
		b["recoveryId"] = "https://" + host + "/deletedsecrets/" + name
		out, _ := json.Marshal(b)
		writeJSON(w, http.StatusOK, out)
	default:
		writeError(w, http.StatusMethodNotAllowed, "BadParameter", req.Method+" is not served")
	}
}

func bundle(base string, v secretVersion) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"value": v.value, "id": base + "/" + v.id, "contentType": v.contentType, "tags": v.tags,
		"attributes": map[string]any{"enabled": true, "created": v.created, "updated": v.created, "recoveryLevel": "Recoverable+Purgeable"}})
	return b
}

// VaultSecret is a secret as a vault holds it.
type VaultSecret struct {
	Name     string
	Value    string // the current version's
	Versions int
	Deleted  bool
	Tags     map[string]string
}

// VaultSecrets lists a vault's secrets, deleted ones too, by name.
func (c *Cloud) VaultSecrets(vault string) []VaultSecret {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []VaultSecret
	for name, s := range c.vaults[strings.ToLower(vault)] {
		last := s.versions[len(s.versions)-1]
		out = append(out, VaultSecret{Name: name, Value: last.value, Versions: len(s.versions), Deleted: s.deleted, Tags: last.tags})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
