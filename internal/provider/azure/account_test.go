package azure

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
)

// A service principal authenticates by its secret or by its certificate; each method's
// missing or malformed parts are the user's to fix, before anything is called.
func TestCredentials(t *testing.T) {
	t.Parallel()
	certPEM := selfSigned(t)
	base := Account{SubscriptionID: "sub", Location: "westeurope", ResourceGroup: "rg", TenantID: "00000000-0000-0000-0000-000000000001",
		ClientID: "00000000-0000-0000-0000-000000000002"}
	cases := map[string]struct {
		edit func(a *Account)
		want any // the credential's type, or nil for a user_action refusal
	}{
		"secret":            {func(a *Account) { a.AuthMethod, a.ClientSecret = AuthServicePrincipal, "s3cret" }, &azidentity.ClientSecretCredential{}},
		"certificate":       {func(a *Account) { a.AuthMethod, a.ClientCertificate = AuthServicePrincipal, certPEM }, &azidentity.ClientCertificateCredential{}},
		"bad certificate":   {func(a *Account) { a.AuthMethod, a.ClientCertificate = AuthServicePrincipal, "not a pem" }, nil},
		"none, no endpoint": {func(a *Account) { a.AuthMethod = AuthNone }, nil},
		"no subscription":   {func(a *Account) { a.AuthMethod, a.ClientSecret, a.SubscriptionID = AuthServicePrincipal, "s", "" }, nil},
		"unknown method":    {func(a *Account) { a.AuthMethod = "static_keys" }, nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a := base
			tc.edit(&a)
			c, err := Open(a)
			if tc.want == nil {
				if fault.ClassOf(err) != job.ClassUserAction {
					t.Fatalf("Open: %v; want a user_action refusal", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch tc.want.(type) {
			case *azidentity.ClientSecretCredential:
				if _, ok := c.Credential().(*azidentity.ClientSecretCredential); !ok {
					t.Fatalf("credential %T", c.Credential())
				}
			case *azidentity.ClientCertificateCredential:
				if _, ok := c.Credential().(*azidentity.ClientCertificateCredential); !ok {
					t.Fatalf("credential %T", c.Credential())
				}
			}
		})
	}
}

// selfSigned is a certificate and its key, PEM, as an app registration's would be.
func selfSigned(t *testing.T) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048) // Entra ID takes RSA certificates only
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "groundwork"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})) +
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
}
