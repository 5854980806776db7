-- The latest drift inspection of each job (what the cloud holds against what the job
-- applied) and when the scheduled inspection is next due. next_inspect_at is moved by one
-- conditional write per interval, so that one replica of several inspects a job at a time.
CREATE TABLE job_inspections (
	job_id TEXT PRIMARY KEY,
	org_id TEXT NOT NULL,
	space_id TEXT NOT NULL DEFAULT '',
	drift TEXT NOT NULL DEFAULT '[]',
	drift_count BIGINT NOT NULL DEFAULT 0,
	inspected_at BIGINT,
	next_inspect_at BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX job_inspections_org ON job_inspections (org_id, job_id);
