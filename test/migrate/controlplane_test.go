package migrate

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hostpath-provisioner/hpp/internal/testutil"
	"github.com/hostpath-provisioner/hpp/test/cluster"
)

// controlPlane is etcd + kube-apiserver + kube-controller-manager as host
// processes under one temporary directory; the API server authenticates a
// static token (no PKI needed for a control plane without nodes).
type controlPlane struct {
	dir        string
	kubeconfig string
	config     *rest.Config
	client     kubernetes.Interface
	procs      []*exec.Cmd
}

// binaries returns the cached binaries, or skips (fails under CI=true)
// with the reason.
func binaries(t testing.TB) cluster.Binaries {
	t.Helper()
	cache, err := cluster.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	b := cluster.BinariesFromCache(cache)
	var missing []string
	for _, p := range []string{b.Etcd, b.KubeAPIServer, b.KubeControllerManager} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		testutil.MissingPrerequisite(t, "cluster binaries missing (%s): run `make cluster-binaries` (hack/cluster-binaries.sh)", strings.Join(missing, ", "))
	}
	return b
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// advertiseIP is a non-loopback address: the kubernetes Service's endpoint
// must not be a loopback one. Without one the test skips, or fails under
// CI=true (every control-plane test needs it).
func advertiseIP(t testing.TB) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	return advertiseIPFrom(t, addrs)
}

// advertiseIPFrom is advertiseIP's choice among addrs: the first global
// unicast IPv4 address.
func advertiseIPFrom(t testing.TB, addrs []net.Addr) string {
	t.Helper()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
			return ipn.IP.String()
		}
	}
	testutil.MissingPrerequisite(t, "no global unicast IPv4 address to advertise the API server on (interface addresses: %v)", addrs)
	return ""
}

// startControlPlane starts the three processes and stops them at cleanup
// (reverse order: the API server hangs on SIGTERM when etcd is gone).
// binderSync is kube-controller-manager's --pvclaimbinder-sync-period.
func startControlPlane(t testing.TB, b cluster.Binaries, binderSync time.Duration) *controlPlane {
	t.Helper()
	cp := &controlPlane{dir: t.TempDir()}
	t.Cleanup(cp.stop)
	token := "hpp-migrate-test-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	tokens := filepath.Join(cp.dir, "tokens.csv")
	write(t, tokens, token+`,admin,admin,"system:masters"`+"\n")
	saKey, saPub := serviceAccountKeys(t, cp.dir)

	etcdPort, peerPort, apiPort, kcmPort := freePort(t), freePort(t), freePort(t), freePort(t)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	cp.run(t, "etcd", b.Etcd, "--name=hpp", "--data-dir="+filepath.Join(cp.dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=hpp="+peerURL, "--unsafe-no-fsync", "--log-level=warn")
	cp.run(t, "kube-apiserver", b.KubeAPIServer,
		"--etcd-servers="+etcdURL, "--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(apiPort),
		"--advertise-address="+advertiseIP(t), "--cert-dir="+filepath.Join(cp.dir, "certs"),
		"--token-auth-file="+tokens, "--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+saPub, "--service-account-signing-key-file="+saKey,
		"--service-cluster-ip-range=10.96.0.0/16", "--profiling=false", "--v=1")

	server := fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	cp.kubeconfig = filepath.Join(cp.dir, "admin.kubeconfig")
	write(t, cp.kubeconfig, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: %q, insecure-skip-tls-verify: true}
users:
- name: admin
  user: {token: %q}
contexts:
- name: test
  context: {cluster: test, user: admin}
current-context: test
`, server, token))
	cp.config = &rest.Config{Host: server, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: 200, Burst: 400}
	var err error
	if cp.client, err = kubernetes.NewForConfig(cp.config); err != nil {
		t.Fatal(err)
	}
	cp.waitReady(t, "kube-apiserver", func(ctx context.Context) error {
		body, err := cp.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && string(body) != "ok" {
			err = fmt.Errorf("readyz: %s", body)
		}
		return err
	})
	// Only the controllers that act on PVs and claims: the binder (it binds
	// and marks claims Lost) and the two protection finalizers.
	cp.run(t, "kube-controller-manager", b.KubeControllerManager,
		"--kubeconfig="+cp.kubeconfig, "--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(kcmPort),
		"--controllers=persistentvolume-binder-controller,persistentvolume-protection-controller,persistentvolumeclaim-protection-controller",
		"--pvclaimbinder-sync-period="+binderSync.String(),
		"--kube-api-qps=200", "--kube-api-burst=400", "--v=2")
	return cp
}

func (cp *controlPlane) run(t testing.TB, name, path string, args ...string) {
	t.Helper()
	logf, err := os.Create(filepath.Join(cp.dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	cp.procs = append(cp.procs, cmd)
}

func (cp *controlPlane) stop() {
	for i := len(cp.procs) - 1; i >= 0; i-- {
		p := cp.procs[i]
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
	cp.procs = nil
}

// logTail returns the end of a component's log, for failure messages.
func (cp *controlPlane) logTail(name string, n int) string {
	data, _ := os.ReadFile(filepath.Join(cp.dir, name+".log"))
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (cp *controlPlane) waitReady(t testing.TB, name string, check func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		c, cancelTry := context.WithTimeout(ctx, 2*time.Second)
		last = check(c)
		cancelTry()
		if last == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s not ready: %v\n--- %s log ---\n%s", name, errors.Join(last, ctx.Err()), name, cp.logTail(name, 30))
}

func serviceAccountKeys(t testing.TB, dir string) (keyPath, pubPath string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	keyPath, pubPath = filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	write(t, keyPath, string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})))
	write(t, pubPath, string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})))
	return keyPath, pubPath
}

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
