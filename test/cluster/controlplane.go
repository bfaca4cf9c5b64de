package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// serviceCIDR is the cluster's service range; 10.96.0.1 is the
// kubernetes Service. Only with Options.PodNetwork does kube-proxy route
// ClusterIPs; otherwise pods talk to nothing, they write files.
const serviceCIDR = "10.96.0.0/16"

// pki holds the paths of every certificate, key and kubeconfig.
type pki struct {
	ca                                    *certAuthority
	caCert                                string
	apiserverCert, apiserverKey           string
	kubeletClientCert, kubeletClientKey   string
	kubeletServingCert, kubeletServingKey string
	saKey, saPub                          string
	kubeconfigs                           map[string]string // by user: admin, controller-manager, scheduler, kubelet, kube-proxy
}

func (c *Cluster) writePKI() error {
	ca, err := newCA("hpp-test-ca")
	if err != nil {
		return err
	}
	dir := c.pkiDir()
	p := &pki{ca: ca, caCert: filepath.Join(dir, "ca.crt"), kubeconfigs: map[string]string{}}
	if err := os.WriteFile(p.caCert, ca.certPEM, 0o644); err != nil {
		return err
	}
	issue := func(name string, req certRequest) (string, string, error) {
		kp, err := ca.issue(req)
		if err != nil {
			return "", "", err
		}
		return kp.writeTo(dir, name)
	}
	if p.apiserverCert, p.apiserverKey, err = issue("apiserver", certRequest{
		CommonName: "kube-apiserver", Server: true,
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPs:      []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 96, 0, 1), c.nodeIP},
	}); err != nil {
		return err
	}
	if p.kubeletClientCert, p.kubeletClientKey, err = issue("apiserver-kubelet-client", certRequest{
		CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}, Client: true,
	}); err != nil {
		return err
	}
	if p.kubeletServingCert, p.kubeletServingKey, err = issue("kubelet-serving", certRequest{
		CommonName: c.opts.NodeName, Server: true,
		DNSNames: []string{c.opts.NodeName, "localhost"},
		IPs:      []net.IP{net.IPv4(127, 0, 0, 1), c.nodeIP},
	}); err != nil {
		return err
	}
	priv, pub, err := serviceAccountKey()
	if err != nil {
		return err
	}
	p.saKey, p.saPub = filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if err := os.WriteFile(p.saKey, priv, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(p.saPub, pub, 0o644); err != nil {
		return err
	}
	port, err := c.ports.next()
	if err != nil {
		return err
	}
	c.serverURL = "https://127.0.0.1:" + strconv.Itoa(port)
	users := map[string]certRequest{
		"admin":              {CommonName: "hpp-admin", Organization: []string{"system:masters"}, Client: true},
		"controller-manager": {CommonName: "system:kube-controller-manager", Client: true},
		"scheduler":          {CommonName: "system:kube-scheduler", Client: true},
		"kubelet":            {CommonName: "system:node:" + c.opts.NodeName, Organization: []string{"system:nodes"}, Client: true},
		"kube-proxy":         {CommonName: kubeProxyUser, Client: true},
	}
	for user, req := range users {
		kp, err := ca.issue(req)
		if err != nil {
			return err
		}
		path := filepath.Join(dir, user+".kubeconfig")
		if err := writeKubeconfig(path, c.serverURL, ca.certPEM, user, kp); err != nil {
			return err
		}
		p.kubeconfigs[user] = path
	}
	c.pki = p
	c.Kubeconfig = p.kubeconfigs["admin"]
	return c.loadAdminClient()
}

// apiserverPort is the port of serverURL.
func (c *Cluster) apiserverPort() string {
	_, port, _ := net.SplitHostPort(c.serverURL[len("https://"):])
	return port
}

func (c *Cluster) startEtcd(ctx context.Context) error {
	client, err := c.ports.next()
	if err != nil {
		return &StepError{Step: "start etcd", Err: err}
	}
	peer, err := c.ports.next()
	if err != nil {
		return &StepError{Step: "start etcd", Err: err}
	}
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", client)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	c.etcdURL = clientURL
	if _, err := c.run(ProcessSpec{
		Name: "etcd", Path: c.opts.Binaries.Etcd,
		Args: []string{
			"--name=hpp", "--data-dir=" + filepath.Join(c.Dir, "etcd"),
			"--listen-client-urls=" + clientURL, "--advertise-client-urls=" + clientURL,
			"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=hpp=" + peerURL,
			// A test cluster's data dies with it; fsync only costs time.
			"--unsafe-no-fsync", "--log-level=warn",
		},
	}); err != nil {
		return &StepError{Step: "start etcd", Err: err}
	}
	c.opts.Logf("etcd starting on %s", clientURL)
	if err := waitHTTP(ctx, "etcd", clientURL+"/health", nil, c.Process("etcd")); err != nil {
		return c.stepError("wait for etcd", "etcd", err)
	}
	return nil
}

func (c *Cluster) startAPIServer(ctx context.Context) error {
	p := c.pki
	args, err := c.apiserverExtraArgs()
	if err != nil {
		return &StepError{Step: "configure kube-apiserver", Err: err}
	}
	if _, err := c.run(ProcessSpec{
		Name: "kube-apiserver", Path: c.opts.Binaries.KubeAPIServer,
		Args: append([]string{
			"--etcd-servers=" + c.etcdURL,
			"--secure-port=" + c.apiserverPort(),
			// Not loopback: the kubernetes Service's endpoint must validate.
			"--advertise-address=" + c.nodeIP.String(),
			"--service-cluster-ip-range=" + serviceCIDR,
			"--client-ca-file=" + p.caCert,
			"--tls-cert-file=" + p.apiserverCert, "--tls-private-key-file=" + p.apiserverKey,
			"--kubelet-client-certificate=" + p.kubeletClientCert, "--kubelet-client-key=" + p.kubeletClientKey,
			"--kubelet-certificate-authority=" + p.caCert,
			// The node's name does not resolve here; its InternalIP does.
			"--kubelet-preferred-address-types=InternalIP,Hostname",
			"--service-account-issuer=https://kubernetes.default.svc",
			"--service-account-key-file=" + p.saPub, "--service-account-signing-key-file=" + p.saKey,
			"--authorization-mode=Node,RBAC",
			"--allow-privileged=true",
			"--profiling=false",
			"--v=1",
		}, args...),
		StopTimeout: 15 * time.Second,
	}); err != nil {
		return &StepError{Step: "start kube-apiserver", Err: err}
	}
	c.opts.Logf("kube-apiserver starting on %s", c.serverURL)
	if err := c.waitAPIReady(ctx); err != nil {
		return c.stepError("wait for kube-apiserver", "kube-apiserver", err)
	}
	return nil
}

// apiReadyTimeout bounds kube-apiserver's start. Five minutes, not two:
// inside the quota VM (qemu under emulation) one start took over two
// (make quota-vm-cluster, 2026-11-28, its caches synced after 56 s and
// /readyz still failing at 2 min), and a healthy start returns as soon as
// it is ready.
const apiReadyTimeout = 5 * time.Minute

func (c *Cluster) waitAPIReady(ctx context.Context) error {
	proc := c.Process("kube-apiserver")
	return poll(ctx, apiReadyTimeout, 200*time.Millisecond, "kube-apiserver /readyz", func(ctx context.Context) (bool, error) {
		if !proc.Running() {
			return false, fmt.Errorf("kube-apiserver exited: %w", proc.ExitError())
		}
		body, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && string(body) == "ok" {
			return true, nil
		}
		// The checks still failing, for the error if the wait runs out.
		verbose, _ := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").Param("verbose", "true").DoRaw(ctx)
		var failing []string
		for _, l := range strings.Split(string(verbose), "\n") {
			if strings.HasPrefix(l, "[-]") {
				failing = append(failing, strings.TrimPrefix(l, "[-]"))
			}
		}
		if err != nil {
			return false, tryAgain(fmt.Errorf("/readyz (failing checks %v): %w", failing, err))
		}
		return false, tryAgain(fmt.Errorf("/readyz answered %q; failing checks %v", body, failing))
	})
}

func (c *Cluster) startControllers(ctx context.Context) error {
	p := c.pki
	kcmPort, err := c.ports.next()
	if err != nil {
		return &StepError{Step: "start kube-controller-manager", Err: err}
	}
	schedPort, err := c.ports.next()
	if err != nil {
		return &StepError{Step: "start kube-scheduler", Err: err}
	}
	var qps []string
	if q := c.opts.ControlPlaneQPS; q > 0 {
		qps = []string{"--kube-api-qps=" + strconv.Itoa(q), "--kube-api-burst=" + strconv.Itoa(2*q)}
	}
	// Both come back when they exit, as kubelet restarts their static pods
	// on a real control-plane node: kube-scheduler exits by design when it
	// finds its cache corrupted ("Pod updated on a different node than
	// previously added to", seen by the chaos tier after an API server
	// restart), and a cluster without a scheduler leaves every new pod
	// Pending for a reason no storage driver has.
	kcm := p.kubeconfigs["controller-manager"]
	if _, err := c.run(ProcessSpec{
		Name: "kube-controller-manager", Path: c.opts.Binaries.KubeControllerManager, RestartOnExit: true,
		Args: append([]string{
			"--kubeconfig=" + kcm, "--authentication-kubeconfig=" + kcm, "--authorization-kubeconfig=" + kcm,
			"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(kcmPort),
			"--leader-elect=false",
			"--service-account-private-key-file=" + p.saKey, "--root-ca-file=" + p.caCert,
			"--use-service-account-credentials=true",
			"--service-cluster-ip-range=" + serviceCIDR,
			"--v=1",
		}, qps...),
	}); err != nil {
		return &StepError{Step: "start kube-controller-manager", Err: err}
	}
	sched := p.kubeconfigs["scheduler"]
	if _, err := c.run(ProcessSpec{
		Name: "kube-scheduler", Path: c.opts.Binaries.KubeScheduler, RestartOnExit: true,
		Args: append([]string{
			"--kubeconfig=" + sched, "--authentication-kubeconfig=" + sched, "--authorization-kubeconfig=" + sched,
			"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(schedPort),
			"--leader-elect=false",
			"--v=1",
		}, qps...),
	}); err != nil {
		return &StepError{Step: "start kube-scheduler", Err: err}
	}
	c.opts.Logf("kube-controller-manager and kube-scheduler starting")
	insecure := &http.Client{Timeout: probeTimeout, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback health probe of a test cluster
	if err := waitHTTP(ctx, "kube-controller-manager", fmt.Sprintf("https://127.0.0.1:%d/healthz", kcmPort), insecure, c.Process("kube-controller-manager")); err != nil {
		return c.stepError("wait for kube-controller-manager", "kube-controller-manager", err)
	}
	if err := waitHTTP(ctx, "kube-scheduler", fmt.Sprintf("https://127.0.0.1:%d/healthz", schedPort), insecure, c.Process("kube-scheduler")); err != nil {
		return c.stepError("wait for kube-scheduler", "kube-scheduler", err)
	}
	return nil
}

// waitDefaultServiceAccount waits until pods can be created in ns: the
// ServiceAccount admission plugin refuses them until the controller-manager
// made the "default" account.
func (c *Cluster) waitDefaultServiceAccount(ctx context.Context, ns string) error {
	return poll(ctx, startTimeout, 200*time.Millisecond, "service account "+ns+"/default", func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, nil
	})
}

// CreateNamespace creates a namespace and waits until pods can be created
// in it.
func (c *Cluster) CreateNamespace(ctx context.Context, name string) error {
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", name, err)
	}
	return c.waitDefaultServiceAccount(ctx, name)
}
