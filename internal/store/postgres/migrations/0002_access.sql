CREATE TABLE orgs (
	id TEXT PRIMARY KEY,
	name TEXT NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE TABLE users (
	org_id TEXT NOT NULL,
	email TEXT NOT NULL,
	name TEXT NOT NULL DEFAULT '',
	created_at BIGINT NOT NULL,
	PRIMARY KEY (org_id, email)
);
CREATE TABLE teams (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL,
	name TEXT NOT NULL,
	members TEXT NOT NULL,
	space_ids TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	UNIQUE (org_id, name)
);
CREATE TABLE api_tokens (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL,
	email TEXT NOT NULL,
	name TEXT NOT NULL,
	secret_sha256 TEXT NOT NULL UNIQUE,
	expires_at BIGINT,
	revoked_at BIGINT,
	created_at BIGINT NOT NULL
);
CREATE INDEX api_tokens_owner ON api_tokens (org_id, email);
CREATE TABLE roles (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL,
	name TEXT NOT NULL,
	description TEXT NOT NULL DEFAULT '',
	policies TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	UNIQUE (org_id, name)
);
CREATE TABLE role_assignments (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL,
	email TEXT NOT NULL,
	role_id TEXT NOT NULL,
	scope TEXT NOT NULL DEFAULT '',
	created_at BIGINT NOT NULL,
	UNIQUE (org_id, email, role_id, scope)
);
CREATE TABLE audit_logs (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL,
	scope TEXT NOT NULL,
	action TEXT NOT NULL,
	actor TEXT NOT NULL,
	resource_type TEXT NOT NULL,
	resource_id TEXT NOT NULL,
	metadata TEXT,
	created_at BIGINT NOT NULL
);
CREATE INDEX audit_logs_org_time ON audit_logs (org_id, created_at, id);
CREATE FUNCTION audit_logs_immutable() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'audit log entries are immutable'; END $$;
CREATE TRIGGER audit_logs_no_change BEFORE UPDATE OR DELETE ON audit_logs FOR EACH ROW EXECUTE FUNCTION audit_logs_immutable();
CREATE TRIGGER audit_logs_no_truncate BEFORE TRUNCATE ON audit_logs FOR EACH STATEMENT EXECUTE FUNCTION audit_logs_immutable();
