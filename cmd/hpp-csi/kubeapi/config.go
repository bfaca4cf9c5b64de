package kubeapi

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Why not client-go's rest and clientcmd packages: linking them costs the
// node plugin about 4 MiB of resident memory on every node (their package
// initialisation touches most of apimachinery; measured with `make bench`,
// idle RSS 24.4 MiB with them, 20.6 MiB without) for two GETs. What hpp-csi
// needs of them is small and stable: the in-cluster service account, and
// the subset of kubeconfig that certificate and token users write. Anything
// else (exec and auth-provider plugins, basic auth) is refused by name.

// In-cluster service account files, as the kubelet projects them.
const (
	serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	requestTimeout    = 30 * time.Second
)

// InClusterClient is the API server's address and an HTTP client that
// authenticates as the pod's service account. The token file is read on
// every request: bound service account tokens are rotated by the kubelet.
func InClusterClient(host, port string) (string, *http.Client, error) {
	if host == "" || port == "" {
		return "", nil, errors.New("not running in a pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set (give --kubeconfig)")
	}
	pool, err := caPool(filepath.Join(serviceAccountDir, "ca.crt"), nil)
	if err != nil {
		return "", nil, err
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	auth := tokenAuth{file: filepath.Join(serviceAccountDir, "token")}
	return "https://" + net.JoinHostPort(host, port), newHTTPClient(tlsCfg, auth), nil
}

// kubeconfig is the part of a kubeconfig file that hpp-csi understands.
type kubeconfig struct {
	CurrentContext string `json:"current-context"`
	Clusters       []struct {
		Name    string `json:"name"`
		Cluster struct {
			Server   string `json:"server"`
			CA       string `json:"certificate-authority"`
			CAData   []byte `json:"certificate-authority-data"`
			Insecure bool   `json:"insecure-skip-tls-verify"`
		} `json:"cluster"`
	} `json:"clusters"`
	Users []struct {
		Name string `json:"name"`
		User struct {
			Token        string         `json:"token"`
			TokenFile    string         `json:"tokenFile"`
			Cert         string         `json:"client-certificate"`
			CertData     []byte         `json:"client-certificate-data"`
			Key          string         `json:"client-key"`
			KeyData      []byte         `json:"client-key-data"`
			Exec         map[string]any `json:"exec"`
			AuthProvider map[string]any `json:"auth-provider"`
			Username     string         `json:"username"`
		} `json:"user"`
	} `json:"users"`
	Contexts []struct {
		Name    string `json:"name"`
		Context struct {
			Cluster string `json:"cluster"`
			User    string `json:"user"`
		} `json:"context"`
	} `json:"contexts"`
}

// KubeconfigClient reads the current context of the kubeconfig file at path
// and returns its server and an HTTP client with its credentials. Relative
// file names in it are taken relative to the file, as kubectl does.
func KubeconfigClient(path string) (string, *http.Client, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	var kc kubeconfig
	if err := yaml.Unmarshal(data, &kc); err != nil {
		return "", nil, fmt.Errorf("%s: %w", path, err)
	}
	dir := filepath.Dir(path)
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	clusterName, userName, err := kc.current()
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", path, err)
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	var server string
	for _, c := range kc.Clusters {
		if c.Name != clusterName {
			continue
		}
		server = strings.TrimSuffix(c.Cluster.Server, "/")
		if c.Cluster.Insecure {
			tlsCfg.InsecureSkipVerify = true //nolint:gosec // the kubeconfig asks for it explicitly
		} else if c.Cluster.CA != "" || len(c.Cluster.CAData) > 0 {
			if tlsCfg.RootCAs, err = caPool(rel(c.Cluster.CA), c.Cluster.CAData); err != nil {
				return "", nil, fmt.Errorf("%s: cluster %q: %w", path, clusterName, err)
			}
		}
	}
	if server == "" {
		return "", nil, fmt.Errorf("%s: cluster %q: not found or has no server", path, clusterName)
	}
	auth := tokenAuth{}
	for _, u := range kc.Users {
		if u.Name != userName {
			continue
		}
		usr := u.User
		switch {
		case usr.Exec != nil, usr.AuthProvider != nil, usr.Username != "":
			return "", nil, fmt.Errorf("%s: user %q: only client certificates and tokens are supported by hpp-csi (not exec, auth-provider or basic auth)", path, userName)
		}
		auth = tokenAuth{token: usr.Token, file: rel(usr.TokenFile)}
		if usr.Cert != "" || len(usr.CertData) > 0 {
			cert, err := clientCert(rel(usr.Cert), usr.CertData, rel(usr.Key), usr.KeyData)
			if err != nil {
				return "", nil, fmt.Errorf("%s: user %q: %w", path, userName, err)
			}
			tlsCfg.Certificates = []tls.Certificate{cert}
		}
	}
	return server, newHTTPClient(tlsCfg, auth), nil
}

// current names the cluster and user of the current context.
func (kc kubeconfig) current() (cluster, user string, err error) {
	if kc.CurrentContext == "" {
		return "", "", errors.New("current-context: not set")
	}
	for _, c := range kc.Contexts {
		if c.Name == kc.CurrentContext {
			return c.Context.Cluster, c.Context.User, nil
		}
	}
	return "", "", fmt.Errorf("current-context: context %q not found", kc.CurrentContext)
}

func caPool(file string, data []byte) (*x509.CertPool, error) {
	if len(data) == 0 {
		var err error
		if data, err = os.ReadFile(file); err != nil {
			return nil, fmt.Errorf("certificate authority: %w", err)
		}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("certificate authority %s: no PEM certificate in it", file)
	}
	return pool, nil
}

func clientCert(certFile string, certPEM []byte, keyFile string, keyPEM []byte) (tls.Certificate, error) {
	var err error
	if len(certPEM) == 0 {
		if certPEM, err = os.ReadFile(certFile); err != nil {
			return tls.Certificate{}, fmt.Errorf("client certificate: %w", err)
		}
	}
	if len(keyPEM) == 0 {
		if keyPEM, err = os.ReadFile(keyFile); err != nil {
			return tls.Certificate{}, fmt.Errorf("client key: %w", err)
		}
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("client certificate and key: %w", err)
	}
	return cert, nil
}

// tokenAuth adds a bearer token: a fixed one, or one read from file on
// each request.
type tokenAuth struct {
	token string
	file  string
	next  http.RoundTripper
}

func (a tokenAuth) RoundTrip(req *http.Request) (*http.Response, error) {
	token := a.token
	if a.file != "" {
		data, err := os.ReadFile(a.file)
		if err != nil {
			return nil, fmt.Errorf("service account token: %w", err)
		}
		token = strings.TrimSpace(string(data))
	}
	if token != "" {
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return a.next.RoundTrip(req)
}

func newHTTPClient(tlsCfg *tls.Config, auth tokenAuth) *http.Client {
	tr := &http.Transport{TLSClientConfig: tlsCfg, Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true,
		MaxIdleConnsPerHost: 2, IdleConnTimeout: 90 * time.Second}
	auth.next = tr
	return &http.Client{Transport: auth, Timeout: requestTimeout}
}
