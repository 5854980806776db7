// Package kubeenv runs a real Kubernetes API server (kube-apiserver backed by etcd) for tests.
// The binaries come from KUBEBUILDER_ASSETS or from .cache/kube/<version>/, which
// scripts/setup.d/30-kube.sh builds from the Go module proxy. There is no controller manager
// and no kubelet: objects are stored and served exactly as on a cluster, but nothing reconciles
// them, so a test that needs a Deployment to look available writes its status itself.
package kubeenv

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Version is the Kubernetes release the setup script builds.
const Version = "v1.37.2"

// User is the name the bearer token authenticates as; it is in system:masters.
const User = "groundwork-test"

// Env is one running API server with its etcd.
type Env struct {
	// Host is the API server's URL, https://127.0.0.1:<port>.
	Host string
	// CA is the PEM bundle that verifies the API server's serving certificate.
	CA []byte
	// Token is a bearer token of a cluster admin.
	Token string
	// Config is a client config for Host with CA and Token.
	Config *rest.Config

	dir      string
	binDir   string
	port     int
	etcdURL  string
	mu       sync.Mutex
	apiProc  *proc
	etcdProc *proc
}

// BinDir returns the folder holding kube-apiserver and etcd, or an error saying how to get them.
func BinDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		if err := hasBinaries(dir); err != nil {
			return "", fmt.Errorf("KUBEBUILDER_ASSETS=%s: %w", dir, err)
		}
		return dir, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, ".cache", "kube", Version)
	if err := hasBinaries(dir); err != nil {
		return "", fmt.Errorf("%w (run scripts/setup.d/30-kube.sh or set KUBEBUILDER_ASSETS)", err)
	}
	return dir, nil
}

func hasBinaries(dir string) error {
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("no %s in %s", name, dir)
		}
	}
	return nil
}

// moduleRoot walks up from the working directory (a test runs in its package folder) to the
// main module's go.mod, skipping nested modules such as tools/kubeapiserver.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("getwd: %w", err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module github.com/groundworkhq/groundwork\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod of github.com/groundworkhq/groundwork not found above the working directory")
		}
		dir = parent
	}
}

// Start runs etcd and kube-apiserver and stops them when t ends. Without the binaries it skips
// the test, or fails it when CI=true, where a missing dependency is a broken setup.
func Start(t testing.TB) *Env {
	t.Helper()
	bin, err := BinDir()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("kube-apiserver unavailable: %v", err)
		}
		t.Skipf("kube-apiserver unavailable: %v", err)
	}
	e, err := start(t.TempDir(), bin)
	if err != nil {
		t.Fatalf("start kube-apiserver: %v", err)
	}
	t.Cleanup(e.stop)
	return e
}

func start(dir, bin string) (*Env, error) {
	e := &Env{dir: dir, binDir: bin, Token: randomHex(16)}
	if err := e.writeCredentials(); err != nil {
		return nil, err
	}
	if err := e.startEtcd(); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		e.stop()
		return nil, err
	}
	e.port = port
	e.Host = "https://127.0.0.1:" + strconv.Itoa(port)
	e.Config = &rest.Config{
		Host:            e.Host,
		BearerToken:     e.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: e.CA},
		QPS:             100,
		Burst:           200,
	}
	if err := e.startAPIServer(); err != nil {
		e.stop()
		return nil, err
	}
	return e, nil
}

// Kubeconfig returns a kubeconfig document for the cluster admin.
func (e *Env) Kubeconfig() []byte {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: e.Host, CertificateAuthorityData: e.CA}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: e.Token}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	cfg.CurrentContext = "test"
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		// Writing an in-memory config only fails on a programming error.
		panic(err)
	}
	return b
}

// StopAPIServer stops kube-apiserver (etcd keeps running), so that the cluster looks
// unreachable. StartAPIServer brings it back on the same port with the same credentials.
func (e *Env) StopAPIServer(t testing.TB) {
	t.Helper()
	e.mu.Lock()
	p := e.apiProc
	e.apiProc = nil
	e.mu.Unlock()
	if p != nil {
		p.stop()
	}
}

// StartAPIServer starts kube-apiserver again after StopAPIServer and waits until it is ready.
func (e *Env) StartAPIServer(t testing.TB) {
	t.Helper()
	if err := e.startAPIServer(); err != nil {
		t.Fatalf("restart kube-apiserver: %v", err)
	}
}

func (e *Env) writeCredentials() error {
	caPEM, certPEM, keyPEM, err := servingCert()
	if err != nil {
		return err
	}
	e.CA = caPEM
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("service-account key: %w", err)
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return fmt.Errorf("service-account public key: %w", err)
	}
	files := map[string][]byte{
		"serving.crt": certPEM,
		"serving.key": keyPEM,
		"sa.key":      pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)}),
		"sa.pub":      pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub}),
		// token,user,uid,"group1,group2"
		"tokens.csv": fmt.Appendf(nil, "%s,%s,%s,\"system:masters\"\n", e.Token, User, User),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(e.dir, name), b, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

func (e *Env) startEtcd() error {
	clientPort, err := freePort()
	if err != nil {
		return err
	}
	peerPort, err := freePort()
	if err != nil {
		return err
	}
	e.etcdURL = "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	p, err := startProc(filepath.Join(e.binDir, "etcd"), filepath.Join(e.dir, "etcd.log"),
		"--name=default",
		"--data-dir="+filepath.Join(e.dir, "etcd-data"),
		"--listen-client-urls="+e.etcdURL,
		"--advertise-client-urls="+e.etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL,
		// Durability is worthless in a throwaway test cluster and fsync dominates its latency.
		"--unsafe-no-fsync",
		"--log-level=warn",
	)
	if err != nil {
		return err
	}
	e.etcdProc = p
	ready := func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.etcdURL+"/health", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		if !strings.Contains(body.String(), `"health":"true"`) {
			return fmt.Errorf("etcd health: %s", body.String())
		}
		return nil
	}
	return p.waitReady(30*time.Second, ready)
}

func (e *Env) startAPIServer() error {
	d := e.dir
	p, err := startProc(filepath.Join(e.binDir, "kube-apiserver"), filepath.Join(d, "kube-apiserver.log"),
		"--etcd-servers="+e.etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(e.port),
		"--cert-dir="+filepath.Join(d, "certs"),
		"--tls-cert-file="+filepath.Join(d, "serving.crt"),
		"--tls-private-key-file="+filepath.Join(d, "serving.key"),
		"--token-auth-file="+filepath.Join(d, "tokens.csv"),
		"--service-account-key-file="+filepath.Join(d, "sa.pub"),
		"--service-account-signing-key-file="+filepath.Join(d, "sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--authorization-mode=RBAC",
		// No controller manager runs, so the kubernetes Service's endpoints would never be
		// reconciled against a real node; and no pod is ever admitted that needs a token.
		"--endpoint-reconciler-type=none",
		"--disable-admission-plugins=ServiceAccount",
		"--allow-privileged=true",
	)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: certPool(e.CA)}}}
	ready := func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.Host+"/readyz", nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+e.Token)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz: %s", resp.Status)
		}
		return nil
	}
	if err := p.waitReady(90*time.Second, ready); err != nil {
		p.stop()
		return err
	}
	e.mu.Lock()
	e.apiProc = p
	e.mu.Unlock()
	return nil
}

func (e *Env) stop() {
	e.mu.Lock()
	api := e.apiProc
	e.apiProc = nil
	e.mu.Unlock()
	if api != nil {
		api.stop()
	}
	if e.etcdProc != nil {
		e.etcdProc.stop()
		e.etcdProc = nil
	}
}

// proc is one child process whose output goes to a log file.
type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func startProc(bin, logPath string, args ...string) (*proc, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", logPath, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// If the test binary dies (a timeout panic, a SIGKILL), the servers die with it instead of
	// holding ports and memory.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", filepath.Base(bin), err)
	}
	p := &proc{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// waitReady polls ready until it succeeds, the process exits, or timeout passes.
func (p *proc) waitReady(timeout time.Duration, ready func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited (%v) before it was ready; log:\n%s", filepath.Base(p.cmd.Path), p.err, p.tail())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		last = ready(ctx)
		cancel()
		if last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %s: %v; log:\n%s", filepath.Base(p.cmd.Path), timeout, last, p.tail())
}

func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// servingCert makes a CA and a serving certificate for 127.0.0.1 and localhost signed by it,
// so that clients verify the API server as they would a real one.
func servingCert() (caPEM, certPEM, keyPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("CA key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kubeenv-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("parse CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("serving key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("encode serving key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		nil
}

func certPool(pemBytes []byte) *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	return pool
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return fmt.Sprintf("%x", b)
}
