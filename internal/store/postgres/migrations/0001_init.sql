CREATE TABLE provisioning_jobs (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL,
	space_id TEXT NOT NULL,
	kind TEXT NOT NULL,
	family TEXT NOT NULL,
	provider TEXT NOT NULL,
	mode TEXT NOT NULL,
	name TEXT NOT NULL DEFAULT '',
	tags JSONB,
	subject_type TEXT NOT NULL DEFAULT '',
	subject_id TEXT NOT NULL DEFAULT '',
	config JSONB NOT NULL,
	infra JSONB NOT NULL,
	steps JSONB NOT NULL,
	status TEXT NOT NULL,
	phase TEXT NOT NULL,
	cancel_requested INTEGER NOT NULL DEFAULT 0,
	failure JSONB,
	lease_owner TEXT NOT NULL DEFAULT '',
	lease_token BIGINT NOT NULL DEFAULT 0,
	lease_expires_at BIGINT,
	lease_ttl_ms BIGINT NOT NULL,
	next_run_at BIGINT NOT NULL,
	version BIGINT NOT NULL,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL
);
CREATE INDEX provisioning_jobs_due ON provisioning_jobs (status, next_run_at);
CREATE INDEX provisioning_jobs_lease ON provisioning_jobs (status, lease_expires_at);
CREATE INDEX provisioning_jobs_org ON provisioning_jobs (org_id, id);
CREATE TABLE spaces (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL,
	name TEXT NOT NULL,
	provider TEXT NOT NULL,
	region TEXT NOT NULL,
	space_type TEXT NOT NULL,
	cloud_account_id TEXT NOT NULL DEFAULT '',
	status TEXT NOT NULL,
	config JSONB,
	created_at BIGINT NOT NULL
);
CREATE TABLE cloud_accounts (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL,
	name TEXT NOT NULL,
	provider TEXT NOT NULL,
	region TEXT NOT NULL,
	auth_method TEXT NOT NULL,
	credentials_ref TEXT NOT NULL DEFAULT '',
	permission_level TEXT NOT NULL,
	config JSONB,
	created_at BIGINT NOT NULL
);
