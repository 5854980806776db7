-- Remote provisioners and the (category, type) pairs each holds. The primary key on
-- provisioner_pairs is what makes "each pair has exactly one provisioner" hold when two
-- replicas register at once.
CREATE TABLE provisioners (
	id TEXT PRIMARY KEY,
	name TEXT NOT NULL,
	url TEXT NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE TABLE provisioner_pairs (
	kind TEXT NOT NULL,
	type TEXT NOT NULL,
	provisioner_id TEXT NOT NULL,
	position INTEGER NOT NULL,
	PRIMARY KEY (kind, type)
);
CREATE INDEX provisioner_pairs_holder ON provisioner_pairs (provisioner_id);
-- The job each provisioner-protocol apply started, by its idempotency key, so that the same
-- apply twice answers the same operation.
CREATE TABLE protocol_requests (
	org_id TEXT NOT NULL,
	request_key TEXT NOT NULL,
	job_id TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (org_id, request_key)
);
