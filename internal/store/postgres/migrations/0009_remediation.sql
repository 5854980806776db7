-- The step-level timeline of remediation workflows. Only the engine writes it (the steps it
-- runs); one event per (job, step, event type), so a step re-run after a crash adds nothing.
CREATE TABLE remediation_audit (
	seq BIGSERIAL PRIMARY KEY,
	org_id TEXT NOT NULL,
	job_id TEXT NOT NULL,
	step_id TEXT NOT NULL,
	step_name TEXT NOT NULL,
	event_type TEXT NOT NULL,
	actor TEXT NOT NULL,
	reason TEXT NOT NULL DEFAULT '',
	created_at BIGINT NOT NULL,
	UNIQUE (job_id, step_id, event_type)
);
CREATE INDEX remediation_audit_job ON remediation_audit (org_id, job_id, seq);
-- Each notification a workflow sent (or failed to send), per channel: the delivery record.
CREATE TABLE remediation_notifications (
	job_id TEXT NOT NULL,
	org_id TEXT NOT NULL,
	step_id TEXT NOT NULL,
	kind TEXT NOT NULL,
	channel TEXT NOT NULL,
	status TEXT NOT NULL,
	attempts INTEGER NOT NULL,
	last_error TEXT NOT NULL DEFAULT '',
	updated_at BIGINT NOT NULL,
	PRIMARY KEY (job_id, step_id, kind, channel)
);
