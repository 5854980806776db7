package secrets_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/secrets/secretstest"
)

func TestLocalConformance(t *testing.T) {
	t.Parallel()
	secretstest.Run(t, func(t *testing.T) secrets.SecretStore {
		s, err := secrets.OpenLocal(t.TempDir(), "")
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestLocalKeyFileCreatedOnceWith0600(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s1, err := secrets.OpenLocal(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, "secret.key"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode = %v, want 0600", st.Mode().Perm())
	}
	ref, err := s1.Put(ctx, "n", "persisted")
	if err != nil {
		t.Fatal(err)
	}
	// A second open (a restart) reads the same key and can decrypt.
	s2, err := secrets.OpenLocal(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s2.Get(ctx, ref); err != nil || got != "persisted" {
		t.Fatalf("Get after reopen = %q, %v", got, err)
	}
}

func TestLocalEnvKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	other := make([]byte, 32)
	if _, err := rand.Read(other); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		env     string
		wantErr bool
	}{
		"valid":     {env: base64.StdEncoding.EncodeToString(key)},
		"short":     {env: base64.StdEncoding.EncodeToString(key[:16]), wantErr: true},
		"notBase64": {env: "!!!", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s, err := secrets.OpenLocal(dir, tc.env)
			if tc.wantErr {
				if err == nil {
					t.Fatal("OpenLocal accepted a bad key")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(dir, "secret.key")); !os.IsNotExist(err) {
				t.Fatalf("key file written although the key came from the environment: %v", err)
			}
			ref, err := s.Put(ctx, "n", "v")
			if err != nil {
				t.Fatal(err)
			}
			wrong, err := secrets.OpenLocal(dir, base64.StdEncoding.EncodeToString(other))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := wrong.Get(ctx, ref); err == nil {
				t.Fatal("a different key decrypted the secret")
			}
		})
	}
}

func TestLocalNoPlaintextOnDiskAndTamperDetected(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := secrets.OpenLocal(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	const value = "pl41nt3xt-canary-value"
	ref, err := s.Put(ctx, "canary", value)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(value)) || bytes.Contains(b, []byte(base64.StdEncoding.EncodeToString([]byte(value)))) {
			t.Errorf("%s holds the value in clear", p)
		}
		if filepath.Ext(p) == ".json" {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 {
		t.Fatalf("want one sealed file, found %v", files)
	}
	// Copying the sealed file under another reference must not yield the value: the reference
	// is bound into the seal.
	ref2, err := s.Put(ctx, "other", "x")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	id2 := ref2[len(secrets.LocalPrefix):]
	if err := os.WriteFile(filepath.Join(dir, "secrets", id2+".json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, ref2); err == nil {
		t.Fatalf("swapped file opened under another reference: %q", got)
	}
	if got, err := s.Get(ctx, ref); err != nil || got != value {
		t.Fatalf("original still readable = %q, %v", got, err)
	}
}
