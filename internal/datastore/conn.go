package datastore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/netguard"
)

// Conn says how to reach a server as one user. Password is never logged or serialised (the
// json tag keeps it out of any document a Conn is marshalled into by mistake).
type Conn struct {
	Engine   Engine `json:"engine"`
	Host     string `json:"host"`
	Port     int    `json:"port"`
	User     string `json:"user"`
	Password string `json:"-"`
	Database string `json:"database,omitempty"`
	// Dial, when set, makes every connection (an adopted server's: its host is the user's);
	// netguard's policy checks the address dialled.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error) `json:"-"`
}

// LogValue keeps the password out of slog output.
func (c Conn) LogValue() slog.Value {
	return slog.StringValue(fmt.Sprintf("%s://%s@%s", c.Engine, c.User, c.addr()))
}

func (c Conn) addr() string { return net.JoinHostPort(c.Host, strconv.Itoa(c.Port)) }

const dialTimeout = 5 * time.Second

func (c Conn) pg(ctx context.Context) (*pgx.Conn, error) {
	// Built field by field rather than from a URL so that no user input is ever spliced into a
	// connection string.
	cfg, err := pgx.ParseConfig("")
	if err != nil {
		return nil, fmt.Errorf("postgres config: %w", err)
	}
	cfg.Host, cfg.Port, cfg.User, cfg.Password = c.Host, uint16(c.Port), c.User, c.Password
	cfg.Database = c.Database
	if cfg.Database == "" {
		cfg.Database = "postgres"
	}
	cfg.TLSConfig, cfg.Fallbacks = nil, nil
	cfg.ConnectTimeout = dialTimeout
	if c.Dial != nil {
		cfg.DialFunc = c.Dial
	}
	cfg.RuntimeParams = map[string]string{"application_name": "groundwork"}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, Classify(fmt.Errorf("connect to postgres at %s as %s: %w", c.addr(), c.User, err))
	}
	return conn, nil
}

func (c Conn) mysql() (*sql.DB, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = c.User, c.Password, "tcp", c.addr(), c.Database
	cfg.Timeout = dialTimeout
	if c.Dial != nil {
		cfg.DialFunc = c.Dial
	}
	// Interpolation lets the driver escape values into statements the server cannot prepare
	// (CREATE USER ... IDENTIFIED BY ?); it honours NO_BACKSLASH_ESCAPES as reported by the server.
	cfg.InterpolateParams = true
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fault.System(fmt.Errorf("mysql config: %w", err))
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(1)
	return db, nil
}

func (c Conn) redis() *redis.Client {
	o := &redis.Options{
		Addr: c.addr(), Username: c.User, Password: c.Password,
		DialTimeout: dialTimeout, MaxRetries: -1, PoolSize: 1,
		// Disabled so that a failed login reports itself instead of falling back silently.
		DisableIdentity: true,
	}
	if c.Dial != nil {
		o.Dialer = c.Dial
	}
	return redis.NewClient(o)
}

// Check connects as c and runs a trivial command, proving the server is up and the credentials
// work. Connection refused is transient (the server may still be starting); bad credentials
// need the user.
func Check(ctx context.Context, c Conn) error {
	switch c.Engine {
	case EnginePostgres:
		conn, err := c.pg(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
		var one int
		if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
			return Classify(fmt.Errorf("postgres at %s: %w", c.addr(), err))
		}
		return nil
	case EngineMySQL:
		db, err := c.mysql()
		if err != nil {
			return err
		}
		defer func() { _ = db.Close() }()
		if err := db.PingContext(ctx); err != nil {
			return Classify(fmt.Errorf("connect to mysql at %s as %s: %w", c.addr(), c.User, err))
		}
		return nil
	case EngineRedis:
		rc := c.redis()
		defer func() { _ = rc.Close() }()
		if err := rc.Ping(ctx).Err(); err != nil {
			return Classify(fmt.Errorf("connect to redis at %s as %s: %w", c.addr(), c.User, err))
		}
		return nil
	}
	return fault.System(fmt.Errorf("unknown engine %q", c.Engine))
}

// Classify maps a driver error to a fault class, once, here where the drivers are understood.
func Classify(err error) error {
	if err == nil || fault.As(err).Code != "" {
		return err
	}
	var fe *fault.Error
	if errors.As(err, &fe) {
		return err
	}
	if errors.Is(err, netguard.ErrRefused) {
		return fault.UserAction(err, "OutboundRefused",
			"The server's address is refused by Groundwork's outbound policy (link-local and metadata addresses, or outside --outbound-allow).", "")
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "28P01" || pgErr.Code == "28000":
			return fault.UserAction(err, "AuthFailed", "Check the user name and password of the datastore.", "")
		case pgErr.Code == "3D000":
			return fault.UserAction(err, "DatabaseMissing", "The database does not exist on the server.", "")
		case pgErr.Code == "57P03" || strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "53300":
			return fault.Transient(err) // starting up, connection trouble, too many connections
		}
		return fault.System(err)
	}
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) {
		switch myErr.Number {
		case 1045, 1044, 1698:
			return fault.UserAction(err, "AuthFailed", "Check the user name and password of the datastore.", "")
		case 1040, 1203:
			return fault.Transient(err)
		}
		return fault.System(err)
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "WRONGPASS"), strings.Contains(msg, "NOAUTH"), strings.Contains(msg, "NOPERM"):
		return fault.UserAction(err, "AuthFailed", "Check the user name and password of the datastore.", "")
	case strings.HasPrefix(msg, "LOADING"):
		return fault.Transient(err)
	}
	var netErr net.Error
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.As(err, &netErr) ||
		errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, context.DeadlineExceeded) {
		return fault.Transient(err)
	}
	return fault.System(err)
}

// IsAuthFailure reports whether err says the credentials were refused.
func IsAuthFailure(err error) bool { return fault.As(Classify(err)).Code == "AuthFailed" }
