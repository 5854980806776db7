package datastore

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/groundworkhq/groundwork/internal/fault"
)

// SetOwnPassword changes the password of the login c connects as (the server's admin) to
// password. It is what a rotation of the admin credential runs; the caller proves afterwards
// that the new password works. Sessions already open keep running.
func SetOwnPassword(ctx context.Context, c Conn, password string) error {
	if err := CheckPassword(password); err != nil {
		return fault.System(err)
	}
	switch c.Engine {
	case EnginePostgres:
		conn, err := c.pg(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
		// ALTER ROLE takes no bind parameters: the server quotes the literal itself.
		var lit string
		if err := conn.QueryRow(ctx, "SELECT quote_literal($1::text)", password).Scan(&lit); err != nil {
			return Classify(err)
		}
		if _, err := conn.Exec(ctx, "ALTER ROLE "+pgx.Identifier{c.User}.Sanitize()+" PASSWORD "+lit); err != nil {
			return Classify(fmt.Errorf("set password of %s: %w", c.User, err))
		}
		return nil
	case EngineMySQL:
		db, err := c.mysql()
		if err != nil {
			return err
		}
		defer func() { _ = db.Close() }()
		// CURRENT_USER() is the account the server matched the login to, whatever its host
		// part. It is named explicitly: MariaDB accepts ALTER USER CURRENT_USER() and changes
		// nothing.
		var account string
		if err := db.QueryRowContext(ctx, "SELECT CURRENT_USER()").Scan(&account); err != nil {
			return Classify(fmt.Errorf("current user at %s: %w", c.addr(), err))
		}
		user, host, ok := strings.Cut(account, "@")
		if !ok {
			return fault.System(fmt.Errorf("current user %q has no host part", account))
		}
		if _, err := db.ExecContext(ctx, "ALTER USER ?@? IDENTIFIED BY ?", user, host, password); err != nil {
			return Classify(fmt.Errorf("set password of %s: %w", c.User, err))
		}
		return nil
	case EngineRedis:
		rc := c.redis()
		defer func() { _ = rc.Close() }()
		// resetpass drops every password the user had, so the old one stops working at once.
		if err := rc.Do(ctx, "ACL", "SETUSER", c.User, "resetpass", ">"+password).Err(); err != nil {
			return Classify(fmt.Errorf("acl setuser %s: %w", c.User, err))
		}
		return redisSaveACL(ctx, c, rc)
	}
	return fault.System(fmt.Errorf("unknown engine %q", c.Engine))
}
