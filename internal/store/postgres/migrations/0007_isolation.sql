-- Who owns each secret: an organisation and one object in it (a job, a cloud account, a
-- registered cluster's space). Values never live here; the secret store keeps them, and
-- answers a reference only to the owner recorded for it.
CREATE TABLE secret_owners (
	ref TEXT PRIMARY KEY,
	org_id TEXT NOT NULL,
	owner_kind TEXT NOT NULL,
	owner_id TEXT NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE INDEX secret_owners_owner ON secret_owners (org_id, owner_kind, owner_id);
-- Secrets stored before owners were recorded go to the object that made them. Where two
-- objects name one reference (a reference copied into a request, which is now refused), the
-- one created first made it: rows are taken oldest first and a taken reference is skipped.
INSERT INTO secret_owners (ref, org_id, owner_kind, owner_id, created_at)
	SELECT DISTINCT ON (credentials_ref) credentials_ref, org_id, 'cloud-account', id, created_at FROM cloud_accounts
	WHERE credentials_ref <> '' AND config->>'managedCredentials' = 'true'
	ORDER BY credentials_ref, created_at, id
	ON CONFLICT (ref) DO NOTHING;
INSERT INTO secret_owners (ref, org_id, owner_kind, owner_id, created_at)
	SELECT DISTINCT ON (config->'cluster'->>'credentialRef') config->'cluster'->>'credentialRef', org_id, 'cluster', id, created_at FROM spaces
	WHERE config->'cluster'->>'credentialRef' <> ''
	ORDER BY config->'cluster'->>'credentialRef', created_at, id
	ON CONFLICT (ref) DO NOTHING;
INSERT INTO secret_owners (ref, org_id, owner_kind, owner_id, created_at)
	SELECT DISTINCT ON (infra->'credentials'->>'secretRef') infra->'credentials'->>'secretRef', org_id, 'job', id, created_at FROM provisioning_jobs
	WHERE family = 'datastore' AND infra->'credentials'->>'secretRef' <> ''
	ORDER BY infra->'credentials'->>'secretRef', created_at, id
	ON CONFLICT (ref) DO NOTHING;
INSERT INTO secret_owners (ref, org_id, owner_kind, owner_id, created_at)
	SELECT DISTINCT ON (d.secret_ref) d.secret_ref, j.org_id, 'job', d.job_id, d.created_at
	FROM datastore_databases d JOIN provisioning_jobs j ON j.id = d.job_id
	WHERE d.secret_ref <> ''
	ORDER BY d.secret_ref, d.created_at, d.id
	ON CONFLICT (ref) DO NOTHING;
-- Provisioner registrations belong to one organisation: a pair is held once per organisation.
-- Registrations made before that were install-wide; they go to the first organisation.
ALTER TABLE provisioners ADD COLUMN org_id TEXT NOT NULL DEFAULT 'org_default';
ALTER TABLE provisioners ALTER COLUMN org_id DROP DEFAULT;
ALTER TABLE provisioner_pairs ADD COLUMN org_id TEXT NOT NULL DEFAULT 'org_default';
ALTER TABLE provisioner_pairs ALTER COLUMN org_id DROP DEFAULT;
ALTER TABLE provisioner_pairs DROP CONSTRAINT provisioner_pairs_pkey;
ALTER TABLE provisioner_pairs ADD PRIMARY KEY (org_id, kind, type);
CREATE INDEX provisioners_org ON provisioners (org_id, created_at);
