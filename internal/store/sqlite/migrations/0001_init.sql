CREATE TABLE provisioning_jobs (
	id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL,
	space_id TEXT NOT NULL,
	kind TEXT NOT NULL,
	family TEXT NOT NULL,
	provider TEXT NOT NULL,
	mode TEXT NOT NULL,
	name TEXT NOT NULL DEFAULT '',
	tags TEXT,
	subject_type TEXT NOT NULL DEFAULT '',
	subject_id TEXT NOT NULL DEFAULT '',
	config TEXT NOT NULL,
	infra TEXT NOT NULL,
	steps TEXT NOT NULL,
	status TEXT NOT NULL,
	phase TEXT NOT NULL,
	cancel_requested INTEGER NOT NULL DEFAULT 0,
	failure TEXT,
	lease_owner TEXT NOT NULL DEFAULT '',
	lease_token INTEGER NOT NULL DEFAULT 0,
	lease_expires_at INTEGER,
	lease_ttl_ms INTEGER NOT NULL,
	next_run_at INTEGER NOT NULL,
	version INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
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
	config TEXT,
	created_at INTEGER NOT NULL
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
	config TEXT,
	created_at INTEGER NOT NULL
);
