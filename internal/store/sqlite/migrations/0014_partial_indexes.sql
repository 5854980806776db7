-- The claim's indexes hold only the rows a claim looks for: queued jobs by due time and
-- running jobs by lease expiry. Every write of a job moves it between statuses, so a full
-- index gained an entry on each write for rows no claim would ever read; a partial one gains
-- an entry only when the row enters its status. (The retention index stays whole here: SQLite
-- uses a partial index only for a query that names its condition, and retention asks for
-- each status that is over in turn.)
DROP INDEX provisioning_jobs_due;
CREATE INDEX provisioning_jobs_due ON provisioning_jobs (next_run_at) WHERE status = 'queued';
DROP INDEX provisioning_jobs_lease;
CREATE INDEX provisioning_jobs_lease ON provisioning_jobs (lease_expires_at) WHERE status = 'running';
