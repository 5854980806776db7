// Package kube reaches a Kubernetes cluster with client-go and installs Helm releases into it
// with the Helm v4 SDK. A cluster is named either by endpoint, CA and bearer token or by a
// kubeconfig document; both become the same in-memory client config, so every later call
// (reachability, Helm, readiness) goes through one path.
package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/groundworkhq/groundwork/internal/fault"
)

// ValidateCredentials checks that the credentials are complete; errors name the field.
func ValidateCredentials(c Credentials) error {
	_, err := clientConfig(c)
	return err
}

// apiConfig turns either form into one kubeconfig document.
func apiConfig(c Credentials) (*clientcmdapi.Config, error) {
	if len(c.Kubeconfig) > 0 {
		if c.Endpoint != "" || c.Token != "" {
			return nil, errors.New("kubeconfig: give either a kubeconfig or endpoint and token, not both")
		}
		cfg, err := clientcmd.Load(c.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig: %w", err)
		}
		if err := checkSelfContained(cfg); err != nil {
			return nil, err
		}
		return cfg, nil
	}
	if c.Endpoint == "" {
		return nil, errors.New("endpoint: required (or give a kubeconfig)")
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("endpoint: %q is not an http(s) URL", c.Endpoint)
	}
	if c.Token == "" {
		return nil, errors.New("token: required with endpoint")
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: c.Endpoint, CertificateAuthorityData: c.CAData}
	cfg.AuthInfos["groundwork"] = &clientcmdapi.AuthInfo{Token: c.Token}
	cfg.Contexts["cluster"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "groundwork"}
	cfg.CurrentContext = "cluster"
	return cfg, nil
}

// checkSelfContained refuses kubeconfigs that would make the server run a program or read its
// own files: a kubeconfig is user input here, and an exec plugin in it would run on our host.
func checkSelfContained(cfg *clientcmdapi.Config) error {
	if cfg.CurrentContext == "" {
		return errors.New("kubeconfig: current-context is not set")
	}
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		return fmt.Errorf("kubeconfig: context %q not found", cfg.CurrentContext)
	}
	cl, ok := cfg.Clusters[ctx.Cluster]
	if !ok {
		return fmt.Errorf("kubeconfig: cluster %q not found", ctx.Cluster)
	}
	if cl.CertificateAuthority != "" {
		return errors.New("kubeconfig: certificate-authority file paths are not accepted; embed certificate-authority-data")
	}
	if cl.ProxyURL != "" {
		return errors.New("kubeconfig: proxy-url is not accepted")
	}
	for name, ai := range cfg.AuthInfos {
		switch {
		case ai.Exec != nil:
			return fmt.Errorf("kubeconfig: user %q uses an exec plugin; give a static token instead", name)
		case ai.AuthProvider != nil:
			return fmt.Errorf("kubeconfig: user %q uses an auth-provider; give a static token instead", name)
		case ai.TokenFile != "" || ai.ClientCertificate != "" || ai.ClientKey != "":
			return fmt.Errorf("kubeconfig: user %q refers to files; embed token or client-certificate-data", name)
		}
	}
	return nil
}

func clientConfig(c Credentials) (*rest.Config, error) {
	cfg, err := apiConfig(c)
	if err != nil {
		return nil, err
	}
	rc, err := clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return rc, nil
}

// Cluster is a connection to one API server.
type Cluster struct {
	raw    clientcmdapi.Config
	rest   *rest.Config
	client kubernetes.Interface
}

// Connect builds clients for the cluster named by creds. It does not call the cluster; Ping
// does. Bad credentials are a user_action error.
func Connect(creds Credentials) (*Cluster, error) {
	cfg, err := apiConfig(creds)
	if err != nil {
		return nil, fault.UserAction(err, "InvalidClusterCredentials", "register the cluster again with a complete kubeconfig or endpoint, CA and token", "")
	}
	rc, err := clientConfig(creds)
	if err != nil {
		return nil, fault.UserAction(err, "InvalidClusterCredentials", "register the cluster again with a complete kubeconfig or endpoint, CA and token", "")
	}
	rc.UserAgent = "groundwork"
	if creds.Dial != nil {
		rc.Dial = creds.Dial
		// No proxy from the environment: it would connect on the server's behalf, past Dial.
		rc.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fault.System(fmt.Errorf("kubernetes client: %w", err))
	}
	return &Cluster{raw: *cfg, rest: rc, client: cs}, nil
}

// Clientset returns the typed client.
func (c *Cluster) Clientset() kubernetes.Interface { return c.client }

// RESTConfig returns a copy of the client config.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.rest) }

// Ping asks the API server for its version: the cheapest call that proves the endpoint
// answers, the certificate verifies and the token is accepted.
func (c *Cluster) Ping(ctx context.Context) (string, error) {
	body, err := c.client.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return "", classify("reach the cluster", err)
	}
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return "", fault.System(fmt.Errorf("decode server version: %w", err))
	}
	return v.GitVersion, nil
}

// restGetter serves Helm the clients for one namespace of the cluster (Helm's
// genericclioptions.RESTClientGetter). Discovery is cached for the getter's life, which is one
// Helm operation.
type restGetter struct {
	cluster   *Cluster
	namespace string

	once sync.Once
	disc discovery.CachedDiscoveryInterface
	err  error
}

func (g *restGetter) ToRESTConfig() (*rest.Config, error) { return g.cluster.RESTConfig(), nil }

func (g *restGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	g.once.Do(func() {
		rc := g.cluster.RESTConfig()
		// Discovery of a large cluster issues many requests at once.
		rc.Burst = 300
		dc, err := discovery.NewDiscoveryClientForConfig(rc)
		if err != nil {
			g.err = fmt.Errorf("discovery client: %w", err)
			return
		}
		g.disc = memory.NewMemCacheClient(dc)
	})
	return g.disc, g.err
}

func (g *restGetter) ToRESTMapper() (meta.RESTMapper, error) {
	dc, err := g.ToDiscoveryClient()
	if err != nil {
		return nil, err
	}
	m := restmapper.NewDeferredDiscoveryRESTMapper(dc)
	return restmapper.NewShortcutExpander(m, dc, nil), nil
}

func (g *restGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return clientcmd.NewDefaultClientConfig(g.cluster.raw, &clientcmd.ConfigOverrides{
		Context: clientcmdapi.Context{Namespace: g.namespace},
	})
}
