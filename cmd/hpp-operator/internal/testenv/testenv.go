// Package testenv starts envtest against the real kube-apiserver and etcd
// that the cluster harness builds (hack/cluster-binaries.sh), never a
// downloaded or fake one, and counts the API requests a client makes.
package testenv

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/hostpath-provisioner/hpp/internal/manifests"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

// Versions of the harness's binaries (hack/cluster-binaries.sh).
const (
	k8sVersion  = "v1.37.1"
	etcdVersion = "v3.6.16"
)

// RepoRoot is the repository root, found from this file.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..")
}

func cacheDir() string {
	if d := os.Getenv("HPP_CACHE"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "hpp")
}

// AssetsDir returns a directory with kube-apiserver, etcd and kubectl
// linked from the harness's cache, or a reason why there is none.
func AssetsDir(dir string) (string, error) {
	k8s := os.Getenv("HPP_K8S_DIR")
	if k8s == "" {
		k8s = filepath.Join(cacheDir(), "k8s", k8sVersion)
	}
	etcd := os.Getenv("HPP_ETCD_DIR")
	if etcd == "" {
		etcd = filepath.Join(cacheDir(), "etcd", etcdVersion)
	}
	for name, src := range map[string]string{
		"kube-apiserver": filepath.Join(k8s, "kube-apiserver"),
		"kubectl":        filepath.Join(k8s, "kubectl"),
		"etcd":           filepath.Join(etcd, "etcd"),
	} {
		if _, err := os.Stat(src); err != nil {
			return "", fmt.Errorf("%s not built (%w): run make cluster-binaries", name, err)
		}
		if err := os.Symlink(src, filepath.Join(dir, name)); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// Start starts envtest with hpp's CRD installed. Without the binaries it
// skips the test with the reason, or fails under CI=true.
func Start(t testing.TB, opts envtest.WebhookInstallOptions) (*envtest.Environment, *rest.Config) {
	t.Helper()
	assets, err := AssetsDir(t.TempDir())
	if err != nil {
		testutil.MissingPrerequisite(t, "envtest needs the harness's kube-apiserver and etcd: %v", err)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "deploy", "crd")},
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: opts,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop envtest: %v", err)
		}
	})
	return env, cfg
}

// Counter counts the requests made through a rest.Config, by HTTP method.
type Counter struct {
	mu        sync.Mutex
	counts    map[string]int
	log       []string
	forbidden []string
}

// Wrap makes cfg's requests count.
func (c *Counter) Wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			c.mu.Lock()
			if c.counts == nil {
				c.counts = map[string]int{}
			}
			c.counts[req.Method]++
			c.log = append(c.log, req.Method+" "+req.URL.Path)
			c.mu.Unlock()
			resp, err := rt.RoundTrip(req)
			if err == nil && resp.StatusCode == http.StatusForbidden {
				c.mu.Lock()
				c.forbidden = append(c.forbidden, req.Method+" "+req.URL.String())
				c.mu.Unlock()
			}
			return resp, err
		})
	})
	return cfg
}

// Reset zeroes the counts.
func (c *Counter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts, c.log = map[string]int{}, nil
}

// Writes returns the number of POST, PUT, PATCH and DELETE requests and
// their list.
func (c *Counter) Writes() (int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var w []string
	for _, l := range c.log {
		switch l[:3] {
		case "POS", "PUT", "PAT", "DEL":
			w = append(w, l)
		}
	}
	return len(w), w
}

// Forbidden returns every request the API server answered 403 (RBAC).
func (c *Counter) Forbidden() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.forbidden...)
}

// Requests returns every request as "METHOD path".
func (c *Counter) Requests() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.log...)
}

// Total returns the number of requests.
func (c *Counter) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.log)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// ReadManifests decodes the manifests in the file at path (manifests.ReadFile)
// and fails the test when it cannot.
func ReadManifests(t testing.TB, path string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := manifests.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}
