-- The claim's indexes hold only the rows a claim looks for: queued jobs by due time, running
-- jobs by lease expiry, and jobs that are over (for retention) by their last change. Every
-- write of a job moves it between statuses, so a full index gained an entry on each write
-- for rows no query of it would ever read; a partial one gains an entry only when the row
-- enters its status. Finished jobs, most of a ledger, are in none of them.
DROP INDEX provisioning_jobs_due;
CREATE INDEX provisioning_jobs_due ON provisioning_jobs (next_run_at) WHERE status = 'queued';
DROP INDEX provisioning_jobs_lease;
CREATE INDEX provisioning_jobs_lease ON provisioning_jobs (lease_expires_at) WHERE status = 'running';
DROP INDEX provisioning_jobs_ended;
CREATE INDEX provisioning_jobs_ended ON provisioning_jobs (status, updated_at) WHERE status IN ('cancelled', 'deleted');
