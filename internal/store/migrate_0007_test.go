package store_test

import (
	"context"
	"strings"
	"testing"
)

// Migration 0007 gives every secret stored before owners were recorded to the object that
// made it, the older object where two name one reference, and moves install-wide provisioner
// registrations to the first organisation. The same rows go through each store's migration.
func TestMigration0007Backfill(t *testing.T) {
	t.Parallel()
	for name, b := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			loc := b.fresh(t)
			old, err := b.open(t, loc, 6)
			must(t, err)
			for _, q := range []string{
				`INSERT INTO cloud_accounts (id, org_id, name, provider, region, auth_method, credentials_ref, permission_level, config, created_at)
					VALUES ('acc_victim', 'org_a', 'v', 'aws', 'r', 'static_keys', 'local:sec_acc', 'read_write', '{"managedCredentials":true}', 1)`,
				`INSERT INTO cloud_accounts (id, org_id, name, provider, region, auth_method, credentials_ref, permission_level, config, created_at)
					VALUES ('acc_thief', 'org_b', 't', 'aws', 'r', 'static_keys', 'local:sec_acc', 'read_write', '{"managedCredentials":true}', 2)`,
				`INSERT INTO spaces (id, org_id, name, provider, region, space_type, status, config, created_at)
					VALUES ('spc_k', 'org_a', 'k', 'local', 'local', 'kubernetes', 'ready', '{"cluster":{"credentialRef":"local:sec_kube"}}', 1)`,
				`INSERT INTO provisioning_jobs (id, org_id, space_id, kind, family, provider, mode, config, infra, steps, status, phase, lease_ttl_ms, next_run_at, version, created_at, updated_at)
					VALUES ('job_ds', 'org_a', 'spc_k', 'provisioning', 'datastore', 'local', 'create', '{}', '{"credentials":{"secretRef":"local:sec_admin"}}', '[]', 'completed', 'apply', 1, 0, 1, 1, 1)`,
				`INSERT INTO datastore_databases (id, job_id, name, owner, status, endpoint, secret_ref, created_at, updated_at)
					VALUES ('db_1', 'job_ds', 'app', 'app_owner', 'ready', '{}', 'local:sec_owner', 1, 1)`,
				`INSERT INTO provisioners (id, name, url, created_at) VALUES ('prv_1', 'p', 'http://p', 1)`,
				`INSERT INTO provisioner_pairs (kind, type, provisioner_id, position) VALUES ('managed-resource', 'bucket', 'prv_1', 0)`,
			} {
				if _, err := old.DB().ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			must(t, old.Close())
			cur, err := b.open(t, loc, 0)
			must(t, err)
			defer func() { must(t, cur.Close()) }()
			want := map[string]string{
				"local:sec_acc":   "org_a/cloud-account/acc_victim",
				"local:sec_kube":  "org_a/cluster/spc_k",
				"local:sec_admin": "org_a/job/job_ds",
				"local:sec_owner": "org_a/job/job_ds",
			}
			rows, err := cur.DB().QueryContext(ctx, `SELECT ref, org_id || '/' || owner_kind || '/' || owner_id FROM secret_owners`)
			must(t, err)
			got := map[string]string{}
			for rows.Next() {
				var ref, owner string
				must(t, rows.Scan(&ref, &owner))
				got[ref] = owner
			}
			must(t, rows.Close())
			if len(got) != len(want) {
				t.Errorf("owners %v, want %v", got, want)
			}
			for ref, o := range want {
				if got[ref] != o {
					t.Errorf("owner of %s = %q, want %q", ref, got[ref], o)
				}
			}
			var org string
			must(t, cur.DB().QueryRowContext(ctx, `SELECT p.org_id || ',' || pp.org_id FROM provisioners p JOIN provisioner_pairs pp ON pp.provisioner_id = p.id`).Scan(&org))
			if strings.Count(org, "org_default") != 2 {
				t.Errorf("provisioner and pair orgs = %s, want org_default", org)
			}
		})
	}
}
