// Package backup backs up a running Groundwork server with jobs part-way through their
// pipelines, restores the archive into a new data dir and checks that a server started there
// finishes those jobs and opens their secrets with the original key.
package backup

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/backup"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/testfamily"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store/sqlite"
	"github.com/groundworkhq/groundwork/internal/store/sqlstore"
	"github.com/groundworkhq/groundwork/internal/testenv/serverproc"
)

// envRelease names a file whose existence lets step2 finish; until then it waits.
const envRelease = "GW_BACKUP_RELEASE"

func TestMain(m *testing.M) {
	serverproc.Main(m, configure)
}

// configure makes the child a server with one three-step family: step1 stores a secret in the
// local secret store and keeps only its reference (as the datastore family does), step2 waits
// for the release file, step3 finishes.
func configure(o *app.Options) error {
	release := os.Getenv(envRelease)
	pipe := &testfamily.Pipeline{N: 3, Hook: func(ctx context.Context, c testfamily.Call, r *pipeline.Run) (pipeline.Result, error) {
		if c.Undo {
			return pipeline.Done(nil), nil
		}
		switch c.Step {
		case "step1":
			sec, err := secrets.OpenLocal(o.DataDir, os.Getenv(secrets.KeyEnv))
			if err != nil {
				return pipeline.Result{}, err
			}
			ref, err := sec.Put(ctx, "job-"+c.JobID, secretValue(c.JobID))
			if err != nil {
				return pipeline.Result{}, err
			}
			return pipeline.Done(map[string]any{"secretRef": ref}), nil
		case "step2":
			var cfg struct{ Hold bool }
			if err := r.Config(&cfg); err != nil {
				return pipeline.Result{}, err
			}
			for cfg.Hold && !exists(release) {
				// In flight, under lease, until released or the server goes.
				select {
				case <-ctx.Done():
					return pipeline.Result{}, ctx.Err()
				case <-time.After(20 * time.Millisecond):
				}
			}
			if !exists(release) {
				return pipeline.Wait(50*time.Millisecond, "waiting for release", nil), nil
			}
		}
		return pipeline.Done(map[string]any{c.Step: true}), nil
	}}
	o.Workers = 4
	o.Pipelines = []pipeline.Pipeline{pipe}
	return nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func secretValue(jobID string) string { return "s3cr3t-value-of-" + jobID }

type jobView struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Infra  struct {
		SecretRef string `json:"secretRef"`
	} `json:"infra"`
	Steps []struct {
		Name     string `json:"name"`
		Status   string `json:"status"`
		Attempts int    `json:"attempts"`
	} `json:"steps"`
}

func getJob(t *testing.T, p *serverproc.Proc, id string) jobView {
	t.Helper()
	st, raw := p.Call(t, "GET", "/api/provisioning-jobs/"+id, nil)
	if st != 200 {
		t.Fatalf("get job %s: %d %s", id, st, raw)
	}
	var j jobView
	if err := json.Unmarshal(raw, &j); err != nil {
		t.Fatal(err)
	}
	return j
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestBackupWhileRunningRestoresAndResumes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	srcDir, dstDir := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	src := serverproc.Start(t, serverproc.Options{DataDir: srcDir, Env: []string{envRelease + "=" + filepath.Join(dir, "never")}})

	var sp struct{ ID string }
	st, raw := src.Call(t, "POST", "/api/spaces", map[string]string{"name": "backup", "provider": "local", "region": "local"})
	if st != 201 || json.Unmarshal(raw, &sp) != nil {
		t.Fatalf("create space: %d %s", st, raw)
	}
	// Three jobs wait between polls; the last holds its step in flight, so the backup copies a
	// job under a lease of the server it was taken from.
	ids := make([]string, 4)
	for i := range ids {
		var j struct{ ID string }
		body := map[string]any{"spaceID": sp.ID, "kind": "test", "config": map[string]any{"hold": i == len(ids)-1}}
		st, raw := src.Call(t, "POST", "/api/provisioning-jobs", body)
		if st != 201 || json.Unmarshal(raw, &j) != nil {
			t.Fatalf("create job: %d %s", st, raw)
		}
		ids[i] = j.ID
	}
	// Every job mid-pipeline: step1 done (its secret stored), step2 waiting or, for the last,
	// running.
	refs := map[string]string{}
	waitFor(t, "every job to be in step2", 30*time.Second, func() bool {
		for i, id := range ids {
			j := getJob(t, src, id)
			want := "waiting"
			if i == len(ids)-1 {
				want = "running"
			}
			if j.Steps[0].Status != "done" || j.Steps[1].Status != want {
				return false
			}
			refs[id] = j.Infra.SecretRef
		}
		return true
	})

	// The backup runs against the live server's files while it keeps polling the waiting jobs.
	var archive bytes.Buffer
	m, err := backup.Create(ctx, backup.Paths{DataDir: srcDir, DB: filepath.Join(srcDir, "groundwork.db")}, &archive, backup.Options{})
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	latest, err := sqlstore.Latest(sqlite.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	if m.SchemaVersion != latest || m.SecretKey || m.Secrets < len(ids) {
		t.Fatalf("manifest = %+v, want schema %d, no key, at least %d secret files", m, latest, len(ids))
	}
	keyFile, err := os.ReadFile(filepath.Join(srcDir, "secret.key"))
	if err != nil {
		t.Fatal(err)
	}
	assertNoKey(t, archive.Bytes(), keyFile, ids)
	src.Kill()

	// A second restore into the same place is refused: it would overwrite an installation.
	if _, err := backup.Restore(ctx, bytes.NewReader(archive.Bytes()), dstPaths(dstDir), backup.RestoreOptions{SchemaVersion: latest}); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if _, err := backup.Restore(ctx, bytes.NewReader(archive.Bytes()), dstPaths(dstDir), backup.RestoreOptions{SchemaVersion: latest}); !errors.Is(err, backup.ErrNotEmpty) {
		t.Fatalf("second restore without force: err = %v, want ErrNotEmpty", err)
	}
	// The key travels apart from the archive, as an operator keeps it.
	if err := os.WriteFile(filepath.Join(dstDir, "secret.key"), keyFile, 0o600); err != nil {
		t.Fatal(err)
	}
	release := filepath.Join(dir, "release")
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dst := serverproc.Start(t, serverproc.Options{DataDir: dstDir, Token: src.Token, Env: []string{envRelease + "=" + release}})
	waitFor(t, "every restored job to complete", 30*time.Second, func() bool {
		for _, id := range ids {
			if j := getJob(t, dst, id); j.Status != "completed" {
				t.Logf("job %s: %s %+v", id, j.Status, j.Steps)
				return false
			}
		}
		return true
	})
	sec, err := secrets.OpenLocal(dstDir, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		j := getJob(t, dst, id)
		// step1 committed before the backup, so the restored server must not have run it again.
		if j.Infra.SecretRef != refs[id] || j.Steps[0].Attempts != 1 {
			t.Errorf("job %s: step1 re-ran after restore (ref %s → %s, attempts %d)", id, refs[id], j.Infra.SecretRef, j.Steps[0].Attempts)
		}
		got, err := sec.Get(ctx, j.Infra.SecretRef)
		if err != nil || got != secretValue(id) {
			t.Errorf("secret of %s after restore = %q, %v; want %q", id, got, err, secretValue(id))
		}
	}
}

func dstPaths(dir string) backup.Paths {
	return backup.Paths{DataDir: dir, DB: filepath.Join(dir, "groundwork.db")}
}

// assertNoKey unpacks the archive and fails if the key, in its file form or raw, or any
// secret's plain value appears anywhere in it.
func assertNoKey(t *testing.T, archive, keyFile []byte, ids []string) {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(gz)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(keyFile)))
	if err != nil {
		t.Fatal(err)
	}
	for what, needle := range map[string][]byte{"key file": bytes.TrimSpace(keyFile), "raw key": raw} {
		if bytes.Contains(plain, needle) {
			t.Errorf("archive holds the secret key (%s)", what)
		}
	}
	for _, id := range ids {
		if bytes.Contains(plain, []byte(secretValue(id))) {
			t.Errorf("archive holds the plain value of %s's secret", id)
		}
	}
	tr := tar.NewReader(bytes.NewReader(plain))
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if filepath.Base(h.Name) == "secret.key" {
			t.Errorf("archive has member %s", h.Name)
		}
	}
	if len(names) < 2 || names[0] != "manifest.json" || names[1] != "groundwork.db" {
		t.Errorf("archive members = %v, want manifest.json, groundwork.db first", names)
	}
}

func TestRestoreWithIncludedKeyOpensSecrets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := t.TempDir()
	st, err := app.OpenStore(ctx, "", src, nil)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	sec, err := secrets.OpenLocal(src, "")
	if err != nil {
		t.Fatal(err)
	}
	ref, err := sec.Put(ctx, "db-password", "hunter2")
	if err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if _, err := backup.Create(ctx, dstPaths(src), &archive, backup.Options{IncludeSecretKey: true}); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "restored")
	m, err := backup.Restore(ctx, &archive, dstPaths(dst), backup.RestoreOptions{})
	if err != nil || !m.SecretKey {
		t.Fatalf("restore: %+v %v", m, err)
	}
	got, err := secrets.OpenLocal(dst, "")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := got.Get(ctx, ref); err != nil || v != "hunter2" {
		t.Fatalf("restored secret = %q, %v", v, err)
	}
}

func TestRestoreRefusesNewerSchemaAndForeignMembers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := t.TempDir()
	st, err := app.OpenStore(ctx, "", src, nil)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	var archive bytes.Buffer
	m, err := backup.Create(ctx, dstPaths(src), &archive, backup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "restored")
	_, err = backup.Restore(ctx, bytes.NewReader(archive.Bytes()), dstPaths(dst), backup.RestoreOptions{SchemaVersion: m.SchemaVersion - 1})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("schema version %d", m.SchemaVersion)) {
		t.Fatalf("restore of a newer schema: err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dst, "groundwork.db")); err == nil {
		t.Fatal("a refused restore left a database behind")
	}

	// An archive naming a path outside the data dir is refused before anything is installed.
	var evil bytes.Buffer
	gz := gzip.NewWriter(&evil)
	tw := tar.NewWriter(gz)
	mb, _ := json.Marshal(backup.Manifest{Format: backup.Format})
	for name, body := range map[string][]byte{"manifest.json": mb} {
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(body)), Typeflag: tar.TypeReg})
		_, _ = tw.Write(body)
	}
	_ = tw.WriteHeader(&tar.Header{Name: "../escape", Mode: 0o600, Size: 1, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("x"))
	_ = tw.Close()
	_ = gz.Close()
	if _, err := backup.Restore(ctx, &evil, dstPaths(dst), backup.RestoreOptions{}); err == nil || !strings.Contains(err.Error(), "unexpected member") {
		t.Fatalf("restore of ../escape: err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dst), "escape")); err == nil {
		t.Fatal("archive wrote outside the data dir")
	}
}
