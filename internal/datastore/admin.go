package datastore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"

	"github.com/groundworkhq/groundwork/internal/fault"
)

// CreateDatabase makes database name owned by a new login owner with password, through the
// admin connection. It is idempotent: re-running it after a crash finds what exists and sets the
// owner's password again (so the secret store's value is the one that works). A database that
// exists under another owner is refused, not taken over.
//
// For redis, a "database" is an ACL user owner allowed only keys (and channels) under "name:".
func CreateDatabase(ctx context.Context, admin Conn, name, owner, password string) error {
	if err := ValidateDatabase(admin.Engine, name, owner); err != nil {
		return fault.UserAction(err, "InvalidName", err.Error(), "")
	}
	if err := CheckPassword(password); err != nil {
		return fault.System(err)
	}
	switch admin.Engine {
	case EnginePostgres:
		return pgCreate(ctx, admin, name, owner, password)
	case EngineMySQL:
		return myCreate(ctx, admin, name, owner, password)
	case EngineRedis:
		return redisCreate(ctx, admin, name, owner, password)
	}
	return fault.System(fmt.Errorf("unknown engine %q", admin.Engine))
}

// DropDatabase removes database name and its owner. Missing pieces are not an error (undo and
// delete re-run).
func DropDatabase(ctx context.Context, admin Conn, name, owner string) error {
	if err := ValidateDatabase(admin.Engine, name, owner); err != nil {
		return fault.UserAction(err, "InvalidName", err.Error(), "")
	}
	switch admin.Engine {
	case EnginePostgres:
		return pgDrop(ctx, admin, name, owner)
	case EngineMySQL:
		return myDrop(ctx, admin, name, owner)
	case EngineRedis:
		return redisDrop(ctx, admin, name, owner)
	}
	return fault.System(fmt.Errorf("unknown engine %q", admin.Engine))
}

// PostgreSQL: identifiers are quoted with pgx.Identifier. CREATE ROLE is a utility statement
// and takes no bind parameters, so the password literal is quoted by the server itself
// (quote_literal over a bound parameter) and the password alphabet is checked beforehand.

func pgCreate(ctx context.Context, admin Conn, name, owner, password string) error {
	conn, err := admin.pg(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	ownerID, dbID := pgx.Identifier{owner}.Sanitize(), pgx.Identifier{name}.Sanitize()
	var lit string
	if err := conn.QueryRow(ctx, "SELECT quote_literal($1::text)", password).Scan(&lit); err != nil {
		return Classify(err)
	}
	var roleExists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", owner).Scan(&roleExists); err != nil {
		return Classify(err)
	}
	verb := "CREATE"
	if roleExists {
		verb = "ALTER"
	}
	if _, err := conn.Exec(ctx, verb+" ROLE "+ownerID+" WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD "+lit); err != nil && !pgDuplicate(err) {
		return Classify(fmt.Errorf("%s role %s: %w", strings.ToLower(verb), owner, err))
	}
	var curOwner string
	err = conn.QueryRow(ctx, "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = $1", name).Scan(&curOwner)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// CREATE DATABASE cannot run in a transaction; a concurrent twin is caught as a duplicate.
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+dbID+" OWNER "+ownerID); err != nil && !pgDuplicate(err) {
			return Classify(fmt.Errorf("create database %s: %w", name, err))
		}
	case err != nil:
		return Classify(err)
	case curOwner != owner:
		return fault.UserAction(fmt.Errorf("database %q already exists, owned by %q", name, curOwner),
			"DatabaseExists", "Choose another database name; the existing one is not managed by this request.", "")
	}
	// Only the owner may connect: PUBLIC has CONNECT on new databases by default.
	for _, q := range []string{
		"REVOKE ALL ON DATABASE " + dbID + " FROM PUBLIC",
		"GRANT ALL ON DATABASE " + dbID + " TO " + ownerID,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return Classify(fmt.Errorf("grant on %s: %w", name, err))
		}
	}
	return nil
}

func pgDuplicate(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "42P04" || pgErr.Code == "42710")
}

func pgDrop(ctx context.Context, admin Conn, name, owner string) error {
	conn, err := admin.pg(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	// WITH (FORCE) ends the owner's sessions, which would otherwise block the drop.
	for _, q := range []string{
		"DROP DATABASE IF EXISTS " + pgx.Identifier{name}.Sanitize() + " WITH (FORCE)",
		"DROP ROLE IF EXISTS " + pgx.Identifier{owner}.Sanitize(),
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return Classify(fmt.Errorf("drop %s: %w", name, err))
		}
	}
	return nil
}

// MySQL/MariaDB: identifiers are backtick-quoted (validated names hold no backtick, and
// quoteBacktick doubles any anyway). CREATE USER ... IDENTIFIED BY and GRANT ... TO cannot take
// placeholders on the server, so the driver interpolates them with its own escaping
// (InterpolateParams), on top of the validated alphabets.

func quoteBacktick(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

func myCreate(ctx context.Context, admin Conn, name, owner, password string) error {
	db, err := admin.mysql()
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	dbID := quoteBacktick(name)
	if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+dbID+" CHARACTER SET utf8mb4"); err != nil {
		return Classify(fmt.Errorf("create database %s: %w", name, err))
	}
	if _, err := db.ExecContext(ctx, "CREATE USER IF NOT EXISTS ?@'%' IDENTIFIED BY ?", owner, password); err != nil {
		return Classify(fmt.Errorf("create user %s: %w", owner, err))
	}
	if _, err := db.ExecContext(ctx, "ALTER USER ?@'%' IDENTIFIED BY ?", owner, password); err != nil {
		return Classify(fmt.Errorf("set password of %s: %w", owner, err))
	}
	if _, err := db.ExecContext(ctx, "GRANT ALL PRIVILEGES ON "+dbID+".* TO ?@'%'", owner); err != nil {
		return Classify(fmt.Errorf("grant on %s: %w", name, err))
	}
	return nil
}

func myDrop(ctx context.Context, admin Conn, name, owner string) error {
	db, err := admin.mysql()
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+quoteBacktick(name)); err != nil {
		return Classify(fmt.Errorf("drop database %s: %w", name, err))
	}
	if _, err := db.ExecContext(ctx, "DROP USER IF EXISTS ?@'%'", owner); err != nil {
		return Classify(fmt.Errorf("drop user %s: %w", owner, err))
	}
	return nil
}

// Redis: every value travels as its own RESP bulk string, so nothing is parsed out of user
// input; names are validated so the key pattern holds no glob characters.

func redisCreate(ctx context.Context, admin Conn, name, owner, password string) error {
	rc := admin.redis()
	defer func() { _ = rc.Close() }()
	// "reset" first makes the rule set exactly this one on every run.
	err := rc.Do(ctx, "ACL", "SETUSER", owner, "reset", "on", ">"+password,
		"~"+name+":*", "&"+name+":*", "+@all", "-@admin", "-@dangerous").Err()
	if err != nil {
		return Classify(fmt.Errorf("acl setuser %s: %w", owner, err))
	}
	return redisSaveACL(ctx, admin, rc)
}

func redisDrop(ctx context.Context, admin Conn, name, owner string) error {
	rc := admin.redis()
	defer func() { _ = rc.Close() }()
	if err := rc.Do(ctx, "ACL", "DELUSER", owner).Err(); err != nil {
		return Classify(fmt.Errorf("acl deluser %s: %w", owner, err))
	}
	// Deleting the user also ends its connections; then the keys under the prefix go.
	iter := rc.Scan(ctx, 0, name+":*", 500).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 500 {
			if err := rc.Unlink(ctx, batch...).Err(); err != nil {
				return Classify(err)
			}
			batch = batch[:0]
		}
	}
	if err := iter.Err(); err != nil {
		return Classify(err)
	}
	if len(batch) > 0 {
		if err := rc.Unlink(ctx, batch...).Err(); err != nil {
			return Classify(err)
		}
	}
	return redisSaveACL(ctx, admin, rc)
}

// redisSaveACL persists ACL changes when the server keeps an ACL file (the local provider's
// servers do, so users survive a server restart); servers without one keep users in memory only.
func redisSaveACL(ctx context.Context, admin Conn, rc *redis.Client) error {
	err := rc.Do(ctx, "ACL", "SAVE").Err()
	if err != nil && !strings.Contains(err.Error(), "not configured to use an ACL file") {
		return Classify(fmt.Errorf("acl save on %s: %w", admin.addr(), err))
	}
	return nil
}

// RoleExists reports whether the server already has a login (role, user, ACL user) named role.
// A database request may only name an owner Groundwork creates: taking over an existing one
// would reset its password and, on PostgreSQL, its attributes.
func RoleExists(ctx context.Context, admin Conn, role string) (bool, error) {
	var exists bool
	switch admin.Engine {
	case EnginePostgres:
		conn, err := admin.pg(ctx)
		if err != nil {
			return false, err
		}
		defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", role).Scan(&exists); err != nil {
			return false, Classify(err)
		}
	case EngineMySQL:
		db, err := admin.mysql()
		if err != nil {
			return false, err
		}
		defer func() { _ = db.Close() }()
		if err := db.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM mysql.user WHERE User = ?)", role).Scan(&exists); err != nil {
			return false, Classify(fmt.Errorf("look up user %s: %w", role, err))
		}
	case EngineRedis:
		rc := admin.redis()
		defer func() { _ = rc.Close() }()
		err := rc.Do(ctx, "ACL", "GETUSER", role).Err()
		switch {
		case errors.Is(err, redis.Nil):
			return false, nil
		case err != nil:
			return false, Classify(fmt.Errorf("acl getuser %s: %w", role, err))
		}
		exists = true
	default:
		return false, fault.System(fmt.Errorf("unknown engine %q", admin.Engine))
	}
	return exists, nil
}
