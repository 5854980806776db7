package azure

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/provider/azure/azurefake"
)

// flexState is what the fake holds of a flexible server's updatable settings.
type flexState struct {
	SKU        struct{ Name string } `json:"sku"`
	Properties struct {
		State   string `json:"state"`
		Storage struct {
			StorageSizeGB int32 `json:"storageSizeGB"`
		} `json:"storage"`
		Backup struct {
			BackupRetentionDays int32 `json:"backupRetentionDays"`
		} `json:"backup"`
		HighAvailability struct {
			Mode string `json:"mode"`
		} `json:"highAvailability"`
	} `json:"properties"`
}

func patches(cloud *azurefake.Cloud) int {
	n := 0
	for _, c := range cloud.Calls() {
		if strings.HasPrefix(c, "PATCH ") && strings.Contains(strings.ToLower(c), "flexibleservers") {
			n++
		}
	}
	return n
}

// roundTrip is Data as the job records it and hands it back: through JSON.
func roundTrip(t *testing.T, data map[string]any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDatastoreModify changes a live flexible server in place: only the settings that differ
// are sent in one PATCH, the operation is resumed from its recorded token by a client opened
// again (a restarted server), the server holds the new values, and a re-run sends nothing.
// An update whose token was lost (a crash between the PATCH and its checkpoint) waits on the
// server and sends no second PATCH.
func TestDatastoreModify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		engine  ds.Engine
		storage float64 // the first size, and the size asked for
		grown   float64
	}{
		{ds.EnginePostgres, 32, 64},
		{ds.EngineMySQL, 20, 50},
	} {
		t.Run(string(tc.engine), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c, cloud := testClient(t)
			d := datastoreOn(c)
			jobID := "job_mod" + string(tc.engine)
			settings := map[string]any{"instanceClass": "Standard_D2ds_v5", "allocatedStorageGB": tc.storage, "backupRetentionDays": float64(7)}
			until(t, ctx, "create", func() (bool, error) {
				if _, err := d.Network.Ensure(ctx, dspipe.NetworkParams{JobID: jobID, Engine: tc.engine}); err != nil {
					return false, err
				}
				if _, err := d.Servers.Create(ctx, dspipe.CreateParams{JobID: jobID, Engine: tc.engine, AdminPassword: testPassword, Settings: settings}); err != nil {
					return false, err
				}
				st, err := d.Servers.Status(ctx, dspipe.StatusParams{JobID: jobID, Engine: tc.engine})
				return st.Ready, err
			})
			m := d.Servers.(dspipe.Modifier)
			if got := m.Modifiable(tc.engine); !slices.Equal(got, flexModifiable) {
				t.Fatalf("modifiable %v", got)
			}
			id := c.sub(strings.SplitN(engines[tc.engine].service, "/", 2)[0], "flexibleServers", serverName(&job.Job{ID: jobID}, engines[tc.engine]))
			read := func() flexState {
				raw, ok := cloud.Raw(id)
				if !ok {
					t.Fatalf("server %s is gone", id)
				}
				var s flexState
				if err := json.Unmarshal(raw, &s); err != nil {
					t.Fatal(err)
				}
				return s
			}

			// Nothing differs: nothing is sent.
			res, err := m.Modify(ctx, dspipe.ModifyParams{JobID: jobID, Engine: tc.engine, Settings: settings, ApplyImmediately: true})
			if err != nil || res.Wait || len(res.Changed) != 0 || patches(cloud) != 0 {
				t.Fatalf("modify to the same settings = %+v, %v; %d PATCH", res, err, patches(cloud))
			}

			next := map[string]any{"instanceClass": "Standard_D2ds_v5", "allocatedStorageGB": tc.grown, "backupRetentionDays": float64(14), "multiAZ": true}
			res, err = m.Modify(ctx, dspipe.ModifyParams{JobID: jobID, Engine: tc.engine, Settings: next, ApplyImmediately: true})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Wait || !slices.Equal(res.Changed, []string{"allocatedStorageGB", "backupRetentionDays", "multiAZ"}) || patches(cloud) != 1 {
				t.Fatalf("first modify = %+v; %d PATCH", res, patches(cloud))
			}
			if ops, _ := inFlight(roundTrip(t, res.Data)); ops[opUpdateServer] == "" {
				t.Fatalf("no resume token recorded: %+v", res.Data)
			}
			// A restarted server opens its client again and resumes the poller from the token.
			m2 := datastoreOn(clientOn(t, cloud, c.ResourceGroup)).Servers.(dspipe.Modifier)
			polls := cloud.OperationPolls()
			data := roundTrip(t, res.Data)
			until(t, ctx, "modify", func() (bool, error) {
				r, err := m2.Modify(ctx, dspipe.ModifyParams{JobID: jobID, Engine: tc.engine, Settings: next, ApplyImmediately: true, Data: data})
				if err != nil {
					return false, err
				}
				res, data = r, roundTrip(t, r.Data)
				return !r.Wait, nil
			})
			if cloud.OperationPolls() == polls {
				t.Error("the operation was not polled from its token")
			}
			if patches(cloud) != 1 || !slices.Equal(res.Changed, []string{"allocatedStorageGB", "backupRetentionDays", "multiAZ"}) {
				t.Fatalf("after resuming: %+v; %d PATCH", res, patches(cloud))
			}
			s := read()
			if s.Properties.Storage.StorageSizeGB != int32(tc.grown) || s.Properties.Backup.BackupRetentionDays != 14 ||
				s.Properties.HighAvailability.Mode != "ZoneRedundant" || s.SKU.Name != "Standard_D2ds_v5" {
				t.Fatalf("server after update: %+v", s)
			}
			// A re-run (the step run again after its checkpoint was lost) sends nothing.
			res, err = m2.Modify(ctx, dspipe.ModifyParams{JobID: jobID, Engine: tc.engine, Settings: next, ApplyImmediately: true})
			if err != nil || res.Wait || len(res.Changed) != 0 || patches(cloud) != 1 {
				t.Fatalf("re-run = %+v, %v; %d PATCH", res, err, patches(cloud))
			}

			// A crash between the PATCH and its checkpoint: the next call has no token, finds
			// the server mid-update, and waits on it instead of sending the PATCH again.
			third := map[string]any{"instanceClass": "Standard_D4ds_v5", "allocatedStorageGB": tc.grown, "backupRetentionDays": float64(14), "multiAZ": true}
			if res, err = m.Modify(ctx, dspipe.ModifyParams{JobID: jobID, Engine: tc.engine, Settings: third, ApplyImmediately: true}); err != nil || !res.Wait {
				t.Fatalf("size change = %+v, %v", res, err)
			}
			waited := false
			until(t, ctx, "modify after a lost token", func() (bool, error) {
				r, err := m2.Modify(ctx, dspipe.ModifyParams{JobID: jobID, Engine: tc.engine, Settings: third, ApplyImmediately: true})
				waited = waited || r.Wait
				return err == nil && !r.Wait, err
			})
			if !waited || patches(cloud) != 2 || read().SKU.Name != "Standard_D4ds_v5" {
				t.Fatalf("after a lost token: waited %v, %d PATCH, server %+v", waited, patches(cloud), read())
			}
			if st, err := d.Servers.Status(ctx, dspipe.StatusParams{JobID: jobID, Engine: tc.engine}); err != nil || !st.Ready {
				t.Fatalf("status after the updates = %+v, %v", st, err)
			}
		})
	}
}

// TestDatastoreModifyRefusals: a cache is not modified, and the size change is one Azure
// applies at once.
func TestDatastoreModifyRefusals(t *testing.T) {
	t.Parallel()
	d := DatastoreDriver{}
	if got := d.Modifiable(ds.EngineRedis); len(got) != 0 {
		t.Errorf("redis modifiable %v", got)
	}
	if got := d.AppliedAtOnce(ds.EnginePostgres); !slices.Equal(got, []string{"instanceClass"}) {
		t.Errorf("applied at once %v", got)
	}
	if _, err := d.Modify(context.Background(), dspipe.ModifyParams{JobID: "job_x", Engine: ds.EngineRedis}); err == nil {
		t.Error("a cache was modified")
	}
	if why := d.WhyNotModifiable(ds.EngineRedis, "instanceClass"); !strings.Contains(why, "Azure Cache for Redis") {
		t.Errorf("why a cache keeps its size: %q", why)
	}
	if why := d.WhyNotModifiable(ds.EnginePostgres, "instanceClass"); why != "" {
		t.Errorf("a flexible server explains a refusal it does not make: %q", why)
	}
}

// A server deleted outside Groundwork is the user's to sort out: the update says so and sends
// nothing.
func TestDatastoreModifyOfAGoneServer(t *testing.T) {
	t.Parallel()
	c, cloud := testClient(t)
	m := datastoreOn(c).Servers.(dspipe.Modifier)
	_, err := m.Modify(context.Background(), dspipe.ModifyParams{JobID: "job_gone", Engine: ds.EnginePostgres,
		Settings: map[string]any{"allocatedStorageGB": float64(64)}, ApplyImmediately: true})
	if fe := fault.As(err); fe == nil || fe.Class != job.ClassUserAction || fe.Code != "ServerGone" {
		t.Fatalf("modify of a gone server: %v", err)
	}
	if n := patches(cloud); n != 0 {
		t.Errorf("%d PATCH sent", n)
	}
}
