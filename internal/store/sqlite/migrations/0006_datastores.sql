-- Databases and connections under datastore jobs. A database row is written "creating" before
-- any SQL runs on the server and "deleting" before the drop, so a crash leaves a row saying
-- what to finish. The unique key on (job_id, name) is what makes a re-sent create harmless.
-- Endpoints are JSON {engine, host, port, user, database, secretRef}: references, never values.
CREATE TABLE datastore_databases (
	id TEXT PRIMARY KEY,
	job_id TEXT NOT NULL,
	name TEXT NOT NULL,
	owner TEXT NOT NULL,
	status TEXT NOT NULL,
	endpoint TEXT NOT NULL,
	secret_ref TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	UNIQUE (job_id, name)
);
CREATE INDEX datastore_databases_status ON datastore_databases (status);
CREATE INDEX datastore_databases_secret ON datastore_databases (secret_ref);
-- database_id is '' for a job-scoped connection.
CREATE TABLE datastore_connections (
	id TEXT PRIMARY KEY,
	job_id TEXT NOT NULL,
	database_id TEXT NOT NULL,
	name TEXT NOT NULL,
	endpoint TEXT NOT NULL,
	secret_ref TEXT NOT NULL,
	created_at INTEGER NOT NULL
);
CREATE INDEX datastore_connections_scope ON datastore_connections (job_id, database_id);
CREATE INDEX datastore_connections_secret ON datastore_connections (secret_ref);
