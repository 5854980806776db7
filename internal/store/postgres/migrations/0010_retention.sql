-- Retention prunes jobs that are over (cancelled, deleted) by the time of their last change;
-- this index finds the old ones without walking the whole ledger.
CREATE INDEX provisioning_jobs_ended ON provisioning_jobs (status, updated_at);
