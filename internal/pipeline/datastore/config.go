package datastore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/secrets"
)

// Config is a datastore job's config (the reference's datastore request). Engine, version and
// name apply everywhere; the cloud sizing settings are accepted and passed to the provider,
// which reports the ones it cannot honour as not applicable.
type Config struct {
	Engine              ds.Engine `json:"engine"`
	Version             string    `json:"version,omitempty"`
	Name                string    `json:"name,omitempty"`
	InstanceClass       string    `json:"instanceClass,omitempty"`
	AllocatedStorageGB  int       `json:"allocatedStorageGB,omitempty"`
	MultiAZ             bool      `json:"multiAZ,omitempty"`
	BackupRetentionDays int       `json:"backupRetentionDays,omitempty"`
	// ApplyImmediately is written by a config update (PlanUpdate): false leaves a disruptive
	// change to the server's maintenance window. Nil is true.
	ApplyImmediately *bool `json:"applyImmediately,omitempty"`

	// Adopt mode: the existing server. The admin password is never part of a stored config:
	// PrepareAdopt moves it into the secret store and leaves AdminSecretRef.
	Host           string `json:"host,omitempty"`
	Port           int    `json:"port,omitempty"`
	AdminUser      string `json:"adminUser,omitempty"`
	AdminSecretRef string `json:"adminSecretRef,omitempty"`
}

// settings returns the sizing settings that were given, by their JSON names.
func (c Config) settings() map[string]any {
	m := map[string]any{}
	if c.InstanceClass != "" {
		m["instanceClass"] = c.InstanceClass
	}
	if c.AllocatedStorageGB != 0 {
		m["allocatedStorageGB"] = c.AllocatedStorageGB
	}
	if c.MultiAZ {
		m["multiAZ"] = c.MultiAZ
	}
	if c.BackupRetentionDays != 0 {
		m["backupRetentionDays"] = c.BackupRetentionDays
	}
	return m
}

func decodeConfig(raw json.RawMessage) (Config, error) {
	var c Config
	if len(raw) == 0 {
		return c, &ds.FieldError{Field: "config", Rule: ds.RuleRequired, Message: "is required"}
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(raw, &probe); err != nil {
		return c, &ds.FieldError{Field: "config", Rule: ds.RulePattern, Message: "must be a JSON object"}
	}
	if _, ok := probe["adminPassword"]; ok {
		// Refused rather than dropped: a password in a stored config would sit in the job store.
		return c, &ds.FieldError{Field: "config.adminPassword", Rule: ds.RulePattern,
			Message: "must not be stored in the job; pass it when creating the job so it goes to the secret store"}
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, &ds.FieldError{Field: "config", Rule: ds.RulePattern, Message: "is malformed: " + err.Error()}
	}
	return c, nil
}

func validateConfig(c Config, mode job.Mode) error {
	if !c.Engine.Valid() {
		return &ds.FieldError{Field: "config.engine", Rule: ds.RuleEnum, Message: "must be one of postgres, mysql, redis"}
	}
	if c.Version != "" && strings.Trim(c.Version, "0123456789.") != "" {
		return &ds.FieldError{Field: "config.version", Rule: ds.RulePattern, Message: "must be digits and dots, e.g. 15 or 15.4"}
	}
	if c.Name != "" {
		if err := validateServerName(c.Name); err != nil {
			return err
		}
	}
	if mode != job.ModeAdopt {
		return nil
	}
	if c.Host == "" || strings.ContainsAny(c.Host, " /\\@?#") {
		return &ds.FieldError{Field: "config.host", Rule: ds.RuleRequired, Message: "must be a host name or address"}
	}
	if c.Port < 1 || c.Port > 65535 {
		return &ds.FieldError{Field: "config.port", Rule: ds.RuleRequired, Message: "must be a port between 1 and 65535"}
	}
	if c.AdminUser == "" && c.Engine != ds.EngineRedis {
		return &ds.FieldError{Field: "config.adminUser", Rule: ds.RuleRequired, Message: "is required"}
	}
	if !secrets.IsRef(c.AdminSecretRef) {
		return &ds.FieldError{Field: "config.adminPassword", Rule: ds.RuleRequired, Message: "is required to adopt a datastore"}
	}
	return nil
}

// PrepareAdopt takes the admin password out of an adopt request's config, stores it in the
// secret store under a name derived from jobID, and returns the config holding only its
// reference. The API calls it before the job is stored, so the password is given once and
// never reaches the job store.
func PrepareAdopt(ctx context.Context, store secrets.SecretStore, jobID string, raw json.RawMessage) (json.RawMessage, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, &ds.FieldError{Field: "config", Rule: ds.RulePattern, Message: "must be a JSON object"}
	}
	pw, ok := m["adminPassword"].(string)
	if !ok || pw == "" {
		return nil, &ds.FieldError{Field: "config.adminPassword", Rule: ds.RuleRequired, Message: "is required to adopt a datastore"}
	}
	ref, err := store.Put(ctx, jobID+"/adopted-admin", pw)
	if err != nil {
		return nil, fmt.Errorf("store adopted admin password: %w", err)
	}
	delete(m, "adminPassword")
	m["adminSecretRef"] = ref
	out, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	return out, nil
}

// validateServerName checks a datastore's name by the catalog's rule for resource names
// (internal/catalog: lower-case letters, digits and dashes, a letter first, at most 63): it is
// a label, not an SQL identifier (cloud identifiers derive from the job), and the two checks a
// request meets must agree. The set still keeps quotes, spaces and unicode out.
func validateServerName(name string) error {
	if len(name) > 63 {
		return &ds.FieldError{Field: "config.name", Rule: ds.RuleMaxLength, Message: "must be at most 63 characters"}
	}
	for i, c := range name {
		if !(c >= 'a' && c <= 'z' || i > 0 && (c >= '0' && c <= '9' || c == '-')) {
			return &ds.FieldError{Field: "config.name", Rule: ds.RulePattern,
				Message: "must start with a lower-case letter and hold only lower-case letters, digits and dashes"}
		}
	}
	return nil
}
