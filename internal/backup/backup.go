// Package backup writes and restores one archive of a SQLite installation: a consistent copy of
// the job store taken while the server runs, the local secret store's sealed files and, only
// when asked, the secret key that opens them.
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
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/groundworkhq/groundwork/internal/store/sqlstore"
)

// Format is the archive layout version this package writes and reads.
const Format = 1

// Archive member names.
const (
	manifestName = "manifest.json"
	dbName       = "groundwork.db"
	keyName      = "secret.key"
	secretsDir   = "secrets"
)

// Manifest is the archive's first member: what it holds and which schema its database is at.
type Manifest struct {
	Format          int       `json:"format"`
	CreatedAt       time.Time `json:"createdAt"`
	SchemaVersion   int       `json:"schemaVersion"`
	SchemaMigration string    `json:"schemaMigration"`
	Secrets         int       `json:"secrets"`
	SecretKey       bool      `json:"secretKey"`
}

// Paths locate an installation: its data dir (secret store, default database) and its SQLite
// database file.
type Paths struct {
	DataDir string
	DB      string
}

// Options of Create.
type Options struct {
	// IncludeSecretKey puts <DataDir>/secret.key into the archive. Without it the archive
	// holds only sealed values, useless to whoever takes it without the key.
	IncludeSecretKey bool
	// Now stamps the manifest; zero is time.Now.
	Now time.Time
}

// Create writes the archive of p to w. The database is copied first with VACUUM INTO, which
// reads one snapshot under SQLite's own locking while the server goes on writing; the secret
// files after it, so every reference the copied database holds has its value in the archive
// (a secret is always written before the row naming it).
func Create(ctx context.Context, p Paths, w io.Writer, o Options) (Manifest, error) {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	m := Manifest{Format: Format, CreatedAt: o.Now.UTC()}
	if _, err := os.Stat(p.DB); err != nil {
		return m, fmt.Errorf("database %s: %w", p.DB, err)
	}
	tmp, err := os.MkdirTemp("", "groundwork-backup-*")
	if err != nil {
		return m, err
	}
	defer os.RemoveAll(tmp)
	snap := filepath.Join(tmp, dbName)
	if err := vacuumInto(ctx, p.DB, snap); err != nil {
		return m, err
	}
	if m.SchemaVersion, m.SchemaMigration, err = schemaOf(ctx, snap); err != nil {
		return m, err
	}
	secretFiles, err := listSecrets(filepath.Join(p.DataDir, secretsDir))
	if err != nil {
		return m, err
	}
	m.Secrets = len(secretFiles)
	var key []byte
	if o.IncludeSecretKey {
		if key, err = os.ReadFile(filepath.Join(p.DataDir, keyName)); err != nil {
			return m, fmt.Errorf("--include-secret-key: %w (a key given in GROUNDWORK_SECRET_KEY is not in the data dir; keep it where you keep that variable)", err)
		}
		m.SecretKey = true
	}

	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return m, err
	}
	if err := addBytes(tw, manifestName, mb, m.CreatedAt); err != nil {
		return m, err
	}
	if err := addFile(tw, dbName, snap, m.CreatedAt); err != nil {
		return m, err
	}
	for _, rel := range secretFiles {
		b, err := os.ReadFile(filepath.Join(p.DataDir, secretsDir, rel))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted since the listing: its row is gone or going too
		}
		if err != nil {
			return m, fmt.Errorf("read secret file: %w", err)
		}
		if err := addBytes(tw, path.Join(secretsDir, filepath.ToSlash(rel)), b, m.CreatedAt); err != nil {
			return m, err
		}
	}
	if key != nil {
		if err := addBytes(tw, keyName, key, m.CreatedAt); err != nil {
			return m, err
		}
	}
	if err := tw.Close(); err != nil {
		return m, fmt.Errorf("write archive: %w", err)
	}
	if err := gz.Close(); err != nil {
		return m, fmt.Errorf("write archive: %w", err)
	}
	return m, nil
}

func sqliteDSN(p string, q url.Values) string {
	q.Add("_pragma", "busy_timeout(10000)")
	return "file:" + p + "?" + q.Encode()
}

// vacuumInto copies the live database at src into the new file dst. It opens src without
// migrating it: a backup must not change what it backs up.
func vacuumInto(ctx context.Context, src, dst string) error {
	db, err := sql.Open("sqlite", sqliteDSN(src, url.Values{}))
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, dst); err != nil {
		return fmt.Errorf("copy database (VACUUM INTO): %w", err)
	}
	return nil
}

func schemaOf(ctx context.Context, dbPath string) (int, string, error) {
	q := url.Values{}
	q.Set("mode", "ro")
	db, err := sql.Open("sqlite", sqliteDSN(dbPath, q))
	if err != nil {
		return 0, "", fmt.Errorf("open database copy: %w", err)
	}
	defer db.Close()
	var ok string
	if err := db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		return 0, "", fmt.Errorf("database copy failed its integrity check: %q %v", ok, err)
	}
	v, name, err := sqlstore.Applied(ctx, db)
	if err != nil {
		return 0, "", fmt.Errorf("database schema version: %w", err)
	}
	return v, name, nil
}

// listSecrets lists the sealed values and name bindings under dir, relative to it, leaving out
// the temporary files of writes in flight.
func listSecrets(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == dir {
			return fs.SkipAll
		}
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list secret store: %w", err)
	}
	return out, nil
}

func addBytes(tw *tar.Writer, name string, b []byte, at time.Time) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(b)), ModTime: at, Typeflag: tar.TypeReg}); err != nil {
		return fmt.Errorf("write archive: %w", err)
	}
	if _, err := tw.Write(b); err != nil {
		return fmt.Errorf("write archive: %w", err)
	}
	return nil
}

func addFile(tw *tar.Writer, name, src string, at time.Time) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: fi.Size(), ModTime: at, Typeflag: tar.TypeReg}); err != nil {
		return fmt.Errorf("write archive: %w", err)
	}
	if _, err := io.Copy(tw, f); err != nil {
		return fmt.Errorf("write archive: %w", err)
	}
	return nil
}
