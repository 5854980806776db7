package backup

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
)

// ErrNotEmpty is returned when a restore would overwrite an existing installation.
var ErrNotEmpty = errors.New("target is not empty")

// RestoreOptions of Restore.
type RestoreOptions struct {
	// Force replaces an existing database and secret store.
	Force bool
	// SchemaVersion is the newest schema the restoring binary knows; a backup of a newer
	// schema is refused, since this binary could not run on it. 0 skips the check.
	SchemaVersion int
}

// Restore unpacks the archive read from r into p. Everything is unpacked into a staging
// directory and checked first; only then are the files moved into place, so a truncated or
// refused archive leaves the target as it was.
func Restore(ctx context.Context, r io.Reader, p Paths, o RestoreOptions) (Manifest, error) {
	var m Manifest
	if !o.Force {
		if err := checkEmpty(p); err != nil {
			return m, err
		}
	}
	gz, err := gzip.NewReader(r)
	if err != nil {
		return m, fmt.Errorf("read archive: %w", err)
	}
	tr := tar.NewReader(gz)
	hdr, err := tr.Next()
	if err != nil || hdr.Name != manifestName {
		return m, fmt.Errorf("read archive: not a Groundwork backup (first member is not %s)", manifestName)
	}
	if err := json.NewDecoder(io.LimitReader(tr, 1<<20)).Decode(&m); err != nil {
		return m, fmt.Errorf("read manifest: %w", err)
	}
	if m.Format != Format {
		return m, fmt.Errorf("backup format %d is not one this binary reads (%d)", m.Format, Format)
	}
	if o.SchemaVersion > 0 && m.SchemaVersion > o.SchemaVersion {
		return m, fmt.Errorf("backup is of schema version %d (migration %s), newer than this binary's schema version %d: restore it with a Groundwork at least as new as the one that made it",
			m.SchemaVersion, m.SchemaMigration, o.SchemaVersion)
	}

	if err := os.MkdirAll(p.DataDir, 0o700); err != nil {
		return m, fmt.Errorf("data dir: %w", err)
	}
	stage, err := os.MkdirTemp(p.DataDir, ".restore-*")
	if err != nil {
		return m, err
	}
	defer os.RemoveAll(stage)
	seen := map[string]bool{}
	for {
		if err := ctx.Err(); err != nil {
			return m, err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return m, fmt.Errorf("read archive: %w", err)
		}
		name, err := memberPath(hdr)
		if err != nil {
			return m, err
		}
		seen[name] = true
		if err := extract(tr, filepath.Join(stage, filepath.FromSlash(name))); err != nil {
			return m, err
		}
	}
	if !seen[dbName] {
		return m, fmt.Errorf("read archive: no %s in it", dbName)
	}
	v, _, err := schemaOf(ctx, filepath.Join(stage, dbName))
	if err != nil {
		return m, err
	}
	if v != m.SchemaVersion {
		return m, fmt.Errorf("archive database is at schema version %d, its manifest says %d", v, m.SchemaVersion)
	}
	if err := releaseLeases(ctx, filepath.Join(stage, dbName)); err != nil {
		return m, err
	}
	return m, install(stage, p, seen[keyName])
}

// releaseLeases ends the leases the copied jobs carry. They were held by processes of the
// backed-up installation, none of which will ever renew them in this database; left alone, the
// restored server would wait out each lease before resuming its job. The engine fences on the
// lease token, which is kept, so this cannot let two workers commit the same step.
func releaseLeases(ctx context.Context, dbPath string) error {
	db, err := sql.Open("sqlite", sqliteDSN(dbPath, url.Values{}))
	if err != nil {
		return fmt.Errorf("open restored database: %w", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `UPDATE provisioning_jobs SET lease_expires_at = 0 WHERE status = 'running'`); err != nil {
		return fmt.Errorf("release leases in restored database: %w", err)
	}
	return db.Close()
}

// checkEmpty refuses a target holding a database or secrets. A data dir holding only the
// secret key counts as empty, so that the key can be put in place before the restore.
func checkEmpty(p Paths) error {
	if fi, err := os.Stat(p.DB); err == nil && fi.Size() > 0 {
		return fmt.Errorf("%w: database %s exists (use --force to replace it)", ErrNotEmpty, p.DB)
	}
	entries, err := os.ReadDir(p.DataDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	for _, e := range entries {
		if e.Name() != keyName {
			return fmt.Errorf("%w: data dir %s holds %s (use --force to replace its database and secrets)", ErrNotEmpty, p.DataDir, e.Name())
		}
	}
	return nil
}

// memberPath accepts only the members Create writes, so that an archive cannot write outside
// the target (no absolute paths, no "..", no links).
func memberPath(hdr *tar.Header) (string, error) {
	name := path.Clean(hdr.Name)
	if hdr.Typeflag != tar.TypeReg || !filepath.IsLocal(name) {
		return "", fmt.Errorf("read archive: unexpected member %q", hdr.Name)
	}
	switch dir := path.Dir(name); {
	case name == dbName, name == keyName:
	case dir == secretsDir, dir == secretsDir+"/names":
	default:
		return "", fmt.Errorf("read archive: unexpected member %q", hdr.Name)
	}
	return name, nil
}

func extract(r io.Reader, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	_, cerr := io.Copy(f, r)
	if err := errors.Join(cerr, f.Sync(), f.Close()); err != nil {
		return fmt.Errorf("unpack %s: %w", filepath.Base(dst), err)
	}
	return nil
}

// install moves the staged files into place, replacing the database (and its WAL, which
// belongs to the old one), the secret store and, when the archive has one, the key.
func install(stage string, p Paths, hasKey bool) error {
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		if err := os.Remove(p.DB + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove old %s: %w", filepath.Base(p.DB+suffix), err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(p.DB), 0o700); err != nil {
		return err
	}
	if err := move(filepath.Join(stage, dbName), p.DB); err != nil {
		return err
	}
	sec := filepath.Join(p.DataDir, secretsDir)
	if err := os.RemoveAll(sec); err != nil {
		return fmt.Errorf("remove old secret store: %w", err)
	}
	staged := filepath.Join(stage, secretsDir)
	if _, err := os.Stat(staged); err == nil {
		if err := os.Rename(staged, sec); err != nil {
			return fmt.Errorf("install secret store: %w", err)
		}
	}
	if hasKey {
		if err := os.Rename(filepath.Join(stage, keyName), filepath.Join(p.DataDir, keyName)); err != nil {
			return fmt.Errorf("install secret key: %w", err)
		}
	}
	return nil
}

// move renames src to dst, copying when they are on different file systems (a --database
// outside the data dir).
func move(src, dst string) error {
	if err := os.Rename(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".restore"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("install database: %w", err)
	}
	_, cerr := io.Copy(out, in)
	if err := errors.Join(cerr, out.Sync(), out.Close()); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("install database: %w", err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("install database: %w", err)
	}
	return nil
}
