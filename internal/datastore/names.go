// Package datastore holds what Groundwork does inside a datastore server, whoever runs it (the
// local provider, RDS, Cloud SQL...): name rules, CREATE/DROP of a database with its owner, and
// connectivity checks, for PostgreSQL, MySQL (MariaDB) and Redis.
package datastore

import (
	"crypto/rand"
	"fmt"
	"math/big"
	"strings"

	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// Engine is a datastore engine.
type Engine = store.DatastoreEngine

const (
	EnginePostgres = store.EnginePostgres
	EngineMySQL    = store.EngineMySQL
	EngineRedis    = store.EngineRedis
)

// Engines lists the supported engines.
var Engines = store.DatastoreEngines

// Rules a name can break; FieldError.Rule holds one of these so that clients can react to the
// rule rather than parse the message.
const (
	RuleRequired  = "required"
	RulePattern   = "pattern"
	RuleMaxLength = "maxLength"
	RuleReserved  = "reserved"
	RuleEnum      = "enum"
	RuleConflict  = "conflict"
)

// FieldError is a refused input value; the API answers it as a 400 naming the field.
type FieldError = validation.FieldError

// reserved holds names the engines or their tooling own: using one could hand a tenant a system
// database or collide with the admin account.
var reserved = map[string]bool{
	"postgres": true, "template0": true, "template1": true, "public": true,
	"mysql": true, "information_schema": true, "performance_schema": true, "sys": true,
	"mariadb": true, "root": true, "admin": true, "default": true, "groundwork": true,
	"test": true, "none": true, "all": true, "current_user": true, "session_user": true,
}

// maxLen returns the longest name an engine accepts for a database or user. PostgreSQL cuts
// identifiers at 63 bytes (and would silently truncate, making two names collide); MySQL and
// MariaDB disagree on user names (32 vs 80), so the smaller wins.
func maxLen(e Engine, field string) int {
	if e == EngineMySQL && field == "owner" {
		return 32
	}
	return 63
}

// ValidateName checks a database or owner name: lower-case ASCII letter first, then letters,
// digits and underscores. Keeping to this set is what makes the names safe to place in quoted
// identifiers on every engine and in Redis key patterns (no glob characters).
func ValidateName(e Engine, field, name string) error {
	if name == "" {
		return &FieldError{Field: field, Rule: RuleRequired, Message: "is required"}
	}
	if n := maxLen(e, field); len(name) > n {
		return &FieldError{Field: field, Rule: RuleMaxLength, Message: fmt.Sprintf("must be at most %d characters", n)}
	}
	for i, c := range name {
		ok := c >= 'a' && c <= 'z' || i > 0 && (c >= '0' && c <= '9' || c == '_')
		if !ok {
			return &FieldError{Field: field, Rule: RulePattern,
				Message: "must start with a lower-case letter and hold only lower-case letters, digits and underscores"}
		}
	}
	if reserved[name] || strings.HasPrefix(name, "pg_") || strings.HasPrefix(name, "mysql_") {
		return &FieldError{Field: field, Rule: RuleReserved, Message: fmt.Sprintf("%q is reserved", name)}
	}
	return nil
}

// ValidateDatabase checks a database request: both names, and that they differ where an engine
// would confuse them.
func ValidateDatabase(e Engine, name, owner string) error {
	if !e.Valid() {
		return &FieldError{Field: "engine", Rule: RuleEnum, Message: "must be one of postgres, mysql, redis"}
	}
	if err := ValidateName(e, "name", name); err != nil {
		return err
	}
	return ValidateName(e, "owner", owner)
}

const passwordAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// GeneratePassword returns 32 random characters (about 157 bits): 15 upper-case base32, 15
// lower-case base32 and two digits. The alphabet is deliberately plain: the password travels
// through SQL literals on servers that take no parameters there, and through URLs and config
// files in applications. It always holds three kinds of character, as Azure's database
// servers require (base32 alone may hold no digit and no lower-case letter).
func GeneratePassword() string {
	digits := make([]byte, 2)
	for i := range digits {
		n, err := rand.Int(rand.Reader, big.NewInt(10))
		if err != nil {
			panic(err) // crypto/rand does not fail on supported systems
		}
		digits[i] = byte('0' + n.Int64())
	}
	return rand.Text()[:15] + strings.ToLower(rand.Text()[:15]) + string(digits)
}

// CheckPassword guards, as defence in depth, that a password about to be placed in a literal
// holds only the alphabet GeneratePassword uses.
func CheckPassword(pw string) error {
	if len(pw) < 16 {
		return fmt.Errorf("password too short")
	}
	for _, c := range pw {
		if !strings.ContainsRune(passwordAlphabet, c) {
			return fmt.Errorf("password holds a character outside [A-Za-z0-9]")
		}
	}
	return nil
}
