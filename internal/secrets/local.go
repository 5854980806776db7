package secrets

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/oklog/ulid/v2"
)

// LocalPrefix is the backend part of references made by Local.
const LocalPrefix = "local:"

// KeyEnv names the environment variable that may carry the master key (base64 of 32 bytes).
const KeyEnv = "GROUNDWORK_SECRET_KEY"

// Local is the embedded secret store: one AES-256-GCM sealed file per secret under
// <dataDir>/secrets, apart from the job store so that a dump of the job store never holds a
// value, not even encrypted. The reference is bound into each seal as additional data, so a
// file copied under another reference fails to open instead of yielding the wrong secret.
type Local struct {
	dir  string
	aead cipher.AEAD
}

var _ SecretStore = (*Local)(nil)

type sealed struct {
	Ref        string `json:"ref"`
	Name       string `json:"name,omitempty"`
	Nonce      []byte `json:"nonce"`
	Ciphertext []byte `json:"ciphertext"`
}

// OpenLocal opens (creating when missing) the store under dataDir. envKey is the value of
// GROUNDWORK_SECRET_KEY; when empty, the key is read from <dataDir>/secret.key, which is
// created with mode 0600 at first start.
func OpenLocal(dataDir, envKey string) (*Local, error) {
	key, err := loadKey(dataDir, envKey)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("secret key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("secret key: %w", err)
	}
	dir := filepath.Join(dataDir, "secrets")
	if err := os.MkdirAll(filepath.Join(dir, "names"), 0o700); err != nil {
		return nil, fmt.Errorf("secret store dir: %w", err)
	}
	return &Local{dir: dir, aead: aead}, nil
}

func loadKey(dataDir, envKey string) ([]byte, error) {
	if envKey != "" {
		key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(envKey))
		if err != nil || len(key) != 32 {
			return nil, fmt.Errorf("%s must be the base64 encoding of 32 bytes", KeyEnv)
		}
		return key, nil
	}
	path := filepath.Join(dataDir, "secret.key")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return createKeyFile(dataDir, path)
	}
	if err != nil {
		return nil, fmt.Errorf("read secret key file: %w", err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) != 32 {
		return nil, fmt.Errorf("secret key file %s is not the base64 encoding of 32 bytes", path)
	}
	return key, nil
}

func createKeyFile(dataDir, path string) ([]byte, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("generate secret key: %w", err)
	}
	// O_EXCL: two processes starting at once must not each write a different key.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return loadKey(dataDir, "")
	}
	if err != nil {
		return nil, fmt.Errorf("create secret key file: %w", err)
	}
	if _, err := f.WriteString(base64.StdEncoding.EncodeToString(key) + "\n"); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("write secret key file: %w", err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("sync secret key file: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("close secret key file: %w", err)
	}
	return key, nil
}

// Put implements SecretStore.
func (l *Local) Put(ctx context.Context, key, value string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if key == "" {
		return "", errors.New("secret name or reference is required")
	}
	ref, name := key, ""
	if IsRef(key) {
		p, err := l.path(ref)
		if err != nil {
			return "", err
		}
		// Replacing needs an existing secret: a reference is only ever handed out by Put.
		if _, err := l.read(p); err != nil {
			return "", fmt.Errorf("secret %s: %w", ref, err)
		}
	} else {
		name = key
		var err error
		if ref, err = l.refForName(name); err != nil {
			return "", err
		}
	}
	if err := l.write(ref, name, value); err != nil {
		return "", err
	}
	return ref, nil
}

// refForName returns the reference a name is bound to, binding a new one the first time. The
// binding file is written in full under a temporary name and then hard-linked into place: the
// link fails if the name is taken, so concurrent Puts of one name agree on one ref, and no
// reader ever sees a half-written binding.
func (l *Local) refForName(name string) (string, error) {
	np := l.namePath(name)
	for range 3 {
		b, err := os.ReadFile(np)
		if err == nil {
			return strings.TrimSpace(string(b)), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("read secret name: %w", err)
		}
		ref := LocalPrefix + "sec_" + ulid.Make().String()
		f, err := os.CreateTemp(filepath.Dir(np), ".bind-*")
		if err != nil {
			return "", fmt.Errorf("bind secret name: %w", err)
		}
		tmp := f.Name()
		_, werr := f.WriteString(ref)
		if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
			_ = os.Remove(tmp)
			return "", fmt.Errorf("bind secret name: %w", err)
		}
		err = os.Link(tmp, np)
		_ = os.Remove(tmp)
		if errors.Is(err, fs.ErrExist) {
			continue // another writer bound it first; read theirs
		}
		if err != nil {
			return "", fmt.Errorf("bind secret name: %w", err)
		}
		return ref, nil
	}
	return "", errors.New("bind secret name: lost a race repeatedly")
}

func (l *Local) namePath(name string) string {
	sum := sha256.Sum256([]byte(name))
	return filepath.Join(l.dir, "names", hex.EncodeToString(sum[:]))
}

// path maps a reference to its file, refusing anything that is not one of ours so that a
// crafted reference cannot name a file outside the store.
func (l *Local) path(ref string) (string, error) {
	id, ok := strings.CutPrefix(ref, LocalPrefix)
	if !ok || !strings.HasPrefix(id, "sec_") {
		return "", fmt.Errorf("reference %q is not a local secret: %w", ref, ErrNotFound)
	}
	if _, err := ulid.ParseStrict(strings.TrimPrefix(id, "sec_")); err != nil {
		return "", fmt.Errorf("reference %q is malformed: %w", ref, ErrNotFound)
	}
	return filepath.Join(l.dir, id+".json"), nil
}

func (l *Local) write(ref, name, value string) error {
	p, err := l.path(ref)
	if err != nil {
		return err
	}
	if name == "" {
		// Replacing by reference keeps the name binding the file already records.
		if old, err := l.read(p); err == nil {
			name = old.Name
		}
	}
	nonce := make([]byte, l.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return fmt.Errorf("nonce: %w", err)
	}
	s := sealed{Ref: ref, Name: name, Nonce: nonce, Ciphertext: l.aead.Seal(nil, nonce, []byte(value), []byte(ref))}
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode secret: %w", err)
	}
	return writeAtomic(p, b)
}

// writeAtomic writes through a temporary file and a rename so that a crash leaves either the
// old or the new value, never a torn one.
func writeAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("write secret: %w", err)
	}
	tmp := f.Name()
	defer func() { _ = os.Remove(tmp) }()
	if err := f.Chmod(0o600); err != nil {
		_ = f.Close()
		return fmt.Errorf("write secret: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return fmt.Errorf("write secret: %w", err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("sync secret: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write secret: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write secret: %w", err)
	}
	return nil
}

func (l *Local) read(p string) (sealed, error) {
	var s sealed
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return s, ErrNotFound
	}
	if err != nil {
		return s, fmt.Errorf("read secret: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("decode secret: %w", err)
	}
	return s, nil
}

// Get implements SecretStore.
func (l *Local) Get(ctx context.Context, ref string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	p, err := l.path(ref)
	if err != nil {
		return "", err
	}
	s, err := l.read(p)
	if err != nil {
		return "", fmt.Errorf("secret %s: %w", ref, err)
	}
	plain, err := l.aead.Open(nil, s.Nonce, s.Ciphertext, []byte(ref))
	if err != nil {
		return "", fmt.Errorf("secret %s cannot be decrypted (wrong key or tampered file): %w", ref, err)
	}
	return string(plain), nil
}

// Delete implements SecretStore.
func (l *Local) Delete(ctx context.Context, ref string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := l.path(ref)
	if err != nil {
		return err
	}
	s, err := l.read(p)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if s.Name != "" {
		// Unbind the name first: a crash after it leaves a file that a re-run removes,
		// never a name pointing at a deleted value.
		np := l.namePath(s.Name)
		if b, err := os.ReadFile(np); err == nil && strings.TrimSpace(string(b)) == ref {
			if err := os.Remove(np); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("unbind secret name: %w", err)
			}
		}
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete secret: %w", err)
	}
	return nil
}
