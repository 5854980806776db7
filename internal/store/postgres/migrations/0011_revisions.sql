-- Configuration revisions of jobs (config updates and rollbacks): the config each accepted
-- update asked for, the infra as it was then, and whether it was applied. Keyed by org as
-- well as job so that a read is always scoped to the caller's org.
CREATE TABLE job_revisions (
	org_id TEXT NOT NULL,
	job_id TEXT NOT NULL,
	number INTEGER NOT NULL,
	config TEXT NOT NULL,
	infra TEXT NOT NULL,
	status TEXT NOT NULL,
	reason TEXT NOT NULL,
	actor TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	PRIMARY KEY (org_id, job_id, number)
);
-- Retention deletes a pruned job's revisions by job.
CREATE INDEX job_revisions_job ON job_revisions (job_id);
