package gcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/provider/drivertest"
	"github.com/groundworkhq/groundwork/internal/provider/gcp/gcpfake"
)

// datastoreOn is the datastore driver on c, for jobs with config cfg (nil: none).
func datastoreOn(c *Client) dspipe.Driver { return datastoreWith(c, nil) }

func datastoreWith(c *Client, cfg json.RawMessage) dspipe.Driver {
	return DatastoreDriver{Resolve: func(_ context.Context, jobID string) (Placement, error) {
		return Placement{C: c, J: &job.Job{ID: jobID, OrgID: "org_test", SpaceID: "spc_test", Provider: Name,
			Family: job.FamilyDatastore, Config: cfg}}, nil
	}}.Driver()
}

// observeDatastore is observe, with a Cloud SQL instance's job read from its
// settings.userLabels (where Cloud SQL keeps an instance's labels) and its users going with it.
func observeDatastore(cloud *gcpfake.Cloud) drivertest.Observer {
	return func(ctx context.Context) ([]drivertest.Resource, error) {
		all, err := observe(cloud)(ctx)
		for i, r := range all {
			if r.JobID != "" || !strings.HasPrefix(r.ID, "projects/") || !strings.Contains(r.ID, "/instances/") {
				continue
			}
			parts := strings.SplitN(r.ID, "/", 5)
			if in, ok := cloud.Lookup(gcpfake.HostSQLAdmin, strings.Join(parts[:4], "/")); ok {
				settings, _ := in.Body["settings"].(map[string]any)
				labels, _ := settings["userLabels"].(map[string]any)
				all[i].JobID, _ = labels[LabelJob].(string)
			}
		}
		return all, err
	}
}

// until calls f until it reports done, failing the test on an error that is not transient
// or at the deadline.
func until(t *testing.T, ctx context.Context, what string, f func() (bool, error)) {
	t.Helper()
	for {
		done, err := f()
		if err != nil && fault.ClassOf(err) != job.ClassTransient {
			t.Fatalf("%s: %v", what, err)
		}
		if err == nil && done {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not done before the deadline (last error %v)", what, err)
		case <-time.After(time.Millisecond):
		}
	}
}

// ensureDatastore runs the network and the server until the server is ready.
func ensureDatastore(t *testing.T, ctx context.Context, d dspipe.Driver, p dspipe.CreateParams) (dspipe.ServerInfo, dspipe.ServerStatus) {
	t.Helper()
	var info dspipe.ServerInfo
	var st dspipe.ServerStatus
	until(t, ctx, "ensure", func() (bool, error) {
		if _, err := d.Network.Ensure(ctx, dspipe.NetworkParams{JobID: p.JobID, Engine: p.Engine}); err != nil {
			return false, err
		}
		var err error
		if info, err = d.Servers.Create(ctx, p); err != nil {
			return false, err
		}
		st, err = d.Servers.Status(ctx, dspipe.StatusParams{JobID: p.JobID, Engine: p.Engine, AdminPassword: p.AdminPassword})
		return st.Ready, err
	})
	return info, st
}

func deleteDatastore(t *testing.T, ctx context.Context, d dspipe.Driver, jobID string, e ds.Engine) {
	t.Helper()
	until(t, ctx, "delete", func() (bool, error) {
		if gone, err := d.Servers.Delete(ctx, dspipe.DeleteParams{JobID: jobID, Engine: e}); err != nil || !gone {
			return false, err
		}
		return d.Network.Delete(ctx, dspipe.NetworkParams{JobID: jobID, Engine: e})
	})
}

// A Cloud SQL instance is made as asked: private IP only in the job's own network and range,
// the machine type, high availability, disk, backups with point-in-time recovery, no
// deletion protection, the job's labels, and the pipeline's password as the admin user's; it
// is not ready until Cloud SQL says RUNNABLE, and goes with its delete.
func TestCloudSQLLifecycle(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		engine            ds.Engine
		version, dbv, got string
		port              int
		admin, logSetting string
	}{
		{ds.EnginePostgres, "15.4", "POSTGRES_15", "15", 5432, "postgres", "pointInTimeRecoveryEnabled"},
		{ds.EngineMySQL, "", "MYSQL_8_0", "8.0", 3306, "root", "binaryLogEnabled"},
	} {
		t.Run(string(tc.engine), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c, cloud := testClient(t)
			d := datastoreOn(c)
			jobID := "job_sql" + string(tc.engine)
			pw := ds.GeneratePassword()
			settings := map[string]any{"instanceClass": "db-custom-4-15360", "multiAZ": true, "allocatedStorageGB": float64(50), "backupRetentionDays": 14}
			p := dspipe.CreateParams{JobID: jobID, Engine: tc.engine, Version: tc.version, AdminPassword: pw, Settings: settings}

			if _, err := d.Network.Ensure(ctx, dspipe.NetworkParams{JobID: jobID, Engine: tc.engine}); err != nil {
				t.Fatal(err)
			}
			cloud.SetTicks(200) // the create outlasts the first call
			short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
			_, err := d.Servers.Create(short, p)
			stop()
			if fault.ClassOf(err) != job.ClassTransient {
				t.Fatalf("create while Cloud SQL works = %v; want transient", err)
			}
			if st, err := d.Servers.Status(ctx, dspipe.StatusParams{JobID: jobID, Engine: tc.engine}); err != nil || st.Ready || !strings.Contains(st.Message, "PENDING_CREATE") {
				t.Fatalf("status while creating = %+v, %v; want not ready, PENDING_CREATE", st, err)
			}
			info, _ := ensureDatastore(t, ctx, d, p)

			inst := name(&job.Job{ID: jobID}, sqlEngines[tc.engine].role)
			if info.ID != "projects/"+gcpfake.Project+"/instances/"+inst || info.Port != tc.port || info.AdminUser != tc.admin ||
				!strings.HasPrefix(info.Host, "10.") || info.Version != tc.got {
				t.Errorf("server info %+v", info)
			}
			if got, ok := cloud.SQLPassword(inst, tc.admin); !ok || got != pw {
				t.Errorf("the %s user's password is not the pipeline's (found %v)", tc.admin, ok)
			}
			res, ok := cloud.Lookup(gcpfake.HostSQLAdmin, "projects/"+gcpfake.Project+"/instances/"+inst)
			if !ok {
				t.Fatal("no instance")
			}
			b := res.Body
			s := b["settings"].(map[string]any)
			ipc := s["ipConfiguration"].(map[string]any)
			bc := s["backupConfiguration"].(map[string]any)
			wantNet := "projects/" + gcpfake.Project + "/global/networks/" + name(&job.Job{ID: jobID}, roleDSNetwork)
			for what, pair := range map[string][2]any{
				"databaseVersion":             {b["databaseVersion"], tc.dbv},
				"region":                      {b["region"], "europe-west1"},
				"rootPassword stored":         {b["rootPassword"], nil},
				"tier":                        {s["tier"], "db-custom-4-15360"},
				"edition":                     {s["edition"], "ENTERPRISE"},
				"availabilityType":            {s["availabilityType"], "REGIONAL"},
				"dataDiskSizeGb":              {s["dataDiskSizeGb"], "50"},
				"deletionProtectionEnabled":   {s["deletionProtectionEnabled"], false},
				"ipv4Enabled":                 {ipc["ipv4Enabled"], false},
				"privateNetwork":              {ipc["privateNetwork"], wantNet},
				"allocatedIpRange":            {ipc["allocatedIpRange"], name(&job.Job{ID: jobID}, roleDSRange)},
				"backups":                     {bc["enabled"], true},
				tc.logSetting:                 {bc[tc.logSetting], true},
				"retainedBackups":             {bc["backupRetentionSettings"].(map[string]any)["retainedBackups"], float64(14)},
				"transactionLogRetentionDays": {bc["transactionLogRetentionDays"], float64(7)},
			} {
				if fmt.Sprint(pair[0]) != fmt.Sprint(pair[1]) {
					t.Errorf("%s = %v, want %v", what, pair[0], pair[1])
				}
			}
			if !owns(&job.Job{ID: jobID, OrgID: "org_test"}, stringMap(s["userLabels"])) {
				t.Errorf("userLabels %v", s["userLabels"])
			}

			// Ensuring again changes nothing.
			before := len(cloud.Calls())
			if again, _ := ensureDatastore(t, ctx, d, p); again != info {
				t.Errorf("ensure again = %+v, want %+v", again, info)
			}
			for _, call := range cloud.Calls()[before:] {
				if call.Method != http.MethodGet {
					t.Errorf("ensure again made %s %s", call.Method, call.Path)
				}
			}

			deleteDatastore(t, ctx, d, jobID, tc.engine)
			if left, _ := observeDatastore(cloud)(ctx); len(left) != 0 {
				t.Errorf("left after delete: %v", left)
			}
		})
	}
}

func stringMap(v any) map[string]string {
	out := map[string]string{}
	m, _ := v.(map[string]any)
	for k, x := range m {
		out[k] = fmt.Sprint(x)
	}
	return out
}
