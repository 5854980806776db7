-- Who owns each secret: an organisation and one object in it (a job, a cloud account, a
-- registered cluster's space). Values never live here; the secret store keeps them, and
-- answers a reference only to the owner recorded for it.
CREATE TABLE secret_owners (
	ref TEXT PRIMARY KEY,
	org_id TEXT NOT NULL,
	owner_kind TEXT NOT NULL,
	owner_id TEXT NOT NULL,
	created_at INTEGER NOT NULL
);
CREATE INDEX secret_owners_owner ON secret_owners (org_id, owner_kind, owner_id);
-- Secrets stored before owners were recorded go to the object that made them. Where two
-- objects name one reference (a reference copied into a request, which is now refused), the
-- one created first made it: rows are taken oldest first and a taken reference is skipped.
INSERT OR IGNORE INTO secret_owners (ref, org_id, owner_kind, owner_id, created_at)
	SELECT credentials_ref, org_id, 'cloud-account', id, created_at FROM cloud_accounts
	WHERE credentials_ref <> '' AND json_extract(config, '$.managedCredentials') = 1
	ORDER BY created_at, id;
INSERT OR IGNORE INTO secret_owners (ref, org_id, owner_kind, owner_id, created_at)
	SELECT json_extract(config, '$.cluster.credentialRef'), org_id, 'cluster', id, created_at FROM spaces
	WHERE json_extract(config, '$.cluster.credentialRef') <> ''
	ORDER BY created_at, id;
INSERT OR IGNORE INTO secret_owners (ref, org_id, owner_kind, owner_id, created_at)
	SELECT json_extract(infra, '$.credentials.secretRef'), org_id, 'job', id, created_at FROM provisioning_jobs
	WHERE family = 'datastore' AND json_extract(infra, '$.credentials.secretRef') <> ''
	ORDER BY created_at, id;
INSERT OR IGNORE INTO secret_owners (ref, org_id, owner_kind, owner_id, created_at)
	SELECT d.secret_ref, j.org_id, 'job', d.job_id, d.created_at
	FROM datastore_databases d JOIN provisioning_jobs j ON j.id = d.job_id
	WHERE d.secret_ref <> ''
	ORDER BY d.created_at, d.id;
-- Provisioner registrations belong to one organisation: a pair is held once per organisation.
-- Registrations made before that were install-wide; they go to the first organisation.
ALTER TABLE provisioners ADD COLUMN org_id TEXT NOT NULL DEFAULT 'org_default';
CREATE TABLE provisioner_pairs_by_org (
	org_id TEXT NOT NULL,
	kind TEXT NOT NULL,
	type TEXT NOT NULL,
	provisioner_id TEXT NOT NULL,
	position INTEGER NOT NULL,
	PRIMARY KEY (org_id, kind, type)
);
INSERT INTO provisioner_pairs_by_org (org_id, kind, type, provisioner_id, position)
	SELECT p.org_id, pp.kind, pp.type, pp.provisioner_id, pp.position
	FROM provisioner_pairs pp JOIN provisioners p ON p.id = pp.provisioner_id;
DROP TABLE provisioner_pairs;
ALTER TABLE provisioner_pairs_by_org RENAME TO provisioner_pairs;
CREATE INDEX provisioner_pairs_holder ON provisioner_pairs (provisioner_id);
CREATE INDEX provisioners_org ON provisioners (org_id, created_at);
