package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

func (c *Cluster) containerdDir() string  { return filepath.Join(c.Dir, "containerd") }
func (c *Cluster) containerdSock() string { return filepath.Join(c.containerdDir(), "containerd.sock") }
func (c *Cluster) cniConfDir() string     { return filepath.Join(c.Dir, "cni", "net.d") }

// ContainerdSocket is the real node's containerd socket, for `ctr --address`.
func (c *Cluster) ContainerdSocket() string { return c.containerdSock() }

// KubeletDir is the real node's kubelet root directory (--root-dir), on
// the host and in the node; the node's mount namespace also shows it at
// /var/lib/kubelet (see nodens_linux.go).
func (c *Cluster) KubeletDir() string { return c.kubeletDir() }

// containerdConfig is containerd 1.6's configuration, every path inside
// the cluster directory. restrict_oom_score_adj: root here lacks
// CAP_SYS_RESOURCE, so runc cannot lower the sandbox's oom_score_adj and
// every sandbox would fail without it. netns_mounts_under_state_dir keeps
// the pods' network namespace mounts out of /run/netns, inside the
// directory teardown sweeps.
const containerdConfig = `version = 2
root = %[1]q
state = %[2]q

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = %[6]q
        Root = %[10]q
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[7]q
    conf_dir = %[8]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[9]q
`

// cniConfig is a bridge without masquerading: pods get an address and a
// loopback, and no rule lands in the host's iptables. With PodNetwork the
// bridge is the pods' gateway, so pods and this machine reach each other;
// nothing needs to leave the machine, hence still no masquerading.
func (c *Cluster) cniConfig() ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"cniVersion": "1.0.0",
		"name":       "hpp",
		"plugins": []map[string]any{{
			"type":      "bridge",
			"bridge":    c.opts.Bridge,
			"isGateway": c.opts.PodNetwork,
			// And the pods' default route: the kubernetes Service IP is
			// outside the pod CIDR.
			"isDefaultGateway": c.opts.PodNetwork,
			"ipMasq":           false,
			"ipam": map[string]any{
				"type":    "host-local",
				"ranges":  [][]map[string]string{{{"subnet": c.opts.PodCIDR}}},
				"dataDir": filepath.Join(c.Dir, "cni", "ipam"),
			},
		}},
	}, "", "  ")
}

func (c *Cluster) startContainerd(ctx context.Context) error {
	dir := c.containerdDir()
	for _, d := range []string{dir, c.cniConfDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return &StepError{Step: "configure containerd", Err: err}
		}
	}
	cfg := fmt.Sprintf(containerdConfig,
		filepath.Join(dir, "root"), filepath.Join(dir, "state"), c.containerdSock(), c.containerdSock()+".ttrpc",
		PauseImage, c.opts.Binaries.Runc, c.opts.Binaries.CNIBinDir, c.cniConfDir(), filepath.Join(dir, "opt"),
		filepath.Join(dir, "runc"))
	cfgPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return &StepError{Step: "configure containerd", Err: err}
	}
	cni, err := c.cniConfig()
	if err != nil {
		return &StepError{Step: "configure CNI", Err: err}
	}
	if err := os.WriteFile(filepath.Join(c.cniConfDir(), "10-hpp.conflist"), cni, 0o644); err != nil {
		return &StepError{Step: "configure CNI", Err: err}
	}
	if _, err := c.runInNode(ProcessSpec{
		Name: "containerd", Path: c.opts.Binaries.Containerd,
		Args: []string{"--config", cfgPath, "--log-level", "info"},
	}); err != nil {
		return &StepError{Step: "start containerd", Err: err}
	}
	c.opts.Logf("containerd starting on %s", c.containerdSock())
	proc := c.Process("containerd")
	if err := poll(ctx, startTimeout, 200*time.Millisecond, "containerd socket", func(ctx context.Context) (bool, error) {
		if !proc.Running() {
			return false, fmt.Errorf("containerd exited: %w", proc.ExitError())
		}
		_, err := c.cmd.Run(ctx, c.opts.Binaries.Ctr, "--address", c.containerdSock(), "version")
		return err == nil, nil
	}); err != nil {
		return c.stepError("wait for containerd", "containerd", err)
	}
	return nil
}

// importImages imports pause (built before the node started: node-init
// runs it too), busybox and the caller's images into containerd.
func (c *Cluster) importImages(ctx context.Context) error {
	busybox, err := busyboxImage(ctx, c.cmd, "/bin/busybox")
	if err != nil {
		return &StepError{Step: "build the busybox image", Err: err}
	}
	for _, img := range append([]Image{c.pause, busybox}, c.opts.Images...) {
		if err := c.ImportImage(ctx, img); err != nil {
			return c.stepError("import image "+img.Ref, "containerd", err)
		}
	}
	c.opts.Logf("images imported: %s, %s and %d more", PauseImage, BusyboxImage, len(c.opts.Images))
	return nil
}

// ImportImage builds img and imports it into the real node's containerd.
func (c *Cluster) ImportImage(ctx context.Context, img Image) error {
	archive := filepath.Join(c.imageDir(), filepath.Base(sanitize(img.Ref))+".tar")
	if err := writeDockerArchive(img, archive); err != nil {
		return err
	}
	return importImage(ctx, c.cmd, c.opts.Binaries.Ctr, c.containerdSock(), archive)
}

func (c *Cluster) startKubelet(ctx context.Context) error {
	dir := c.kubeletDir()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return &StepError{Step: "configure kubelet", Err: err}
	}
	port, err := c.ports.next()
	if err != nil {
		return &StepError{Step: "configure kubelet", Err: err}
	}
	healthz, err := c.ports.next()
	if err != nil {
		return &StepError{Step: "configure kubelet", Err: err}
	}
	cfg := c.kubeletConfig(int32(port), int32(healthz))
	root := dir
	if c.opts.StandardKubeletRoot {
		root = nodeKubeletRoot
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return &StepError{Step: "configure kubelet", Err: err}
	}
	cfgPath := filepath.Join(c.Dir, "kubelet-config.json")
	if err := os.WriteFile(cfgPath, data, 0o644); err != nil {
		return &StepError{Step: "configure kubelet", Err: err}
	}
	if _, err := c.runInNode(ProcessSpec{
		Name: "kubelet", Path: c.opts.Binaries.Kubelet,
		Args: []string{
			"--config=" + cfgPath,
			"--kubeconfig=" + c.pki.kubeconfigs["kubelet"],
			"--root-dir=" + root,
			"--cert-dir=" + filepath.Join(root, "pki"),
			"--hostname-override=" + c.opts.NodeName,
			"--node-ip=" + c.nodeIP.String(),
			"--v=" + strconv.Itoa(c.opts.KubeletVerbosity),
		},
		StopTimeout: 15 * time.Second,
	}); err != nil {
		return &StepError{Step: "start kubelet", Err: err}
	}
	c.opts.Logf("kubelet starting (node %s, root %s)", c.opts.NodeName, dir)
	proc := c.Process("kubelet")
	if err := poll(ctx, startTimeout, 500*time.Millisecond, "node "+c.opts.NodeName+" Ready", func(ctx context.Context) (bool, error) {
		if !proc.Running() {
			return false, fmt.Errorf("kubelet exited: %w", proc.ExitError())
		}
		node, err := c.Client.CoreV1().Nodes().Get(ctx, c.opts.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && nodeReady(node), nil
	}); err != nil {
		return c.stepError("wait for node "+c.opts.NodeName+" Ready", "kubelet", err)
	}
	c.mu.Lock()
	c.realNode = &Node{Name: c.opts.NodeName, c: c, dir: filepath.Join(c.nodesDir(), c.opts.NodeName)}
	c.nodes[c.opts.NodeName] = c.realNode
	c.nodeOrder = append(c.nodeOrder, c.opts.NodeName)
	c.mu.Unlock()
	return os.MkdirAll(c.realNode.dir, 0o755)
}

func (c *Cluster) kubeletConfig(port, healthz int32) *kubeletv1beta1.KubeletConfiguration {
	return &kubeletv1beta1.KubeletConfiguration{
		TypeMeta:           metav1.TypeMeta{APIVersion: "kubelet.config.k8s.io/v1beta1", Kind: "KubeletConfiguration"},
		Address:            c.nodeIP.String(),
		Port:               port,
		ReadOnlyPort:       0,
		HealthzPort:        ptr.To(healthz),
		HealthzBindAddress: "127.0.0.1",
		TLSCertFile:        c.pki.kubeletServingCert,
		TLSPrivateKeyFile:  c.pki.kubeletServingKey,
		Authentication: kubeletv1beta1.KubeletAuthentication{
			X509:      kubeletv1beta1.KubeletX509Authentication{ClientCAFile: c.pki.caCert},
			Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(false)},
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
		},
		// Only the apiserver (system:masters certificate) reaches kubelet.
		Authorization:            kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow},
		CgroupDriver:             "cgroupfs",
		FailCgroupV1:             ptr.To(false),
		FailSwapOn:               ptr.To(false),
		ContainerRuntimeEndpoint: "unix://" + c.containerdSock(),
		// Local images have no registry to be pulled again from.
		ImageGCHighThresholdPercent: ptr.To[int32](100),
		ImageGCLowThresholdPercent:  ptr.To[int32](99),
		EvictionHard: map[string]string{
			"memory.available": "100Mi", "nodefs.available": "1%", "nodefs.inodesFree": "1%", "imagefs.available": "1%",
		},
		MaxPods:              int32(c.opts.MaxPods),
		VolumeStatsAggPeriod: metav1.Duration{Duration: 10 * time.Second},
		PodLogsDir:           filepath.Join(c.Dir, "pod-logs"),
		ResolverConfig:       ptr.To(""),
		ShutdownGracePeriod:  metav1.Duration{},
		KubeAPIQPS:           ptr.To[int32](100),
		KubeAPIBurst:         200,
		SerializeImagePulls:  ptr.To(false),
		// Pods start as soon as possible: tests and benchmarks wait on them.
		SyncFrequency:      metav1.Duration{Duration: 10 * time.Second},
		FileCheckFrequency: metav1.Duration{Duration: 10 * time.Second},
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// hostIP is the first global unicast IPv4 address of an interface that is
// up: kubelet refuses a loopback node IP, and the apiserver reaches
// kubelet on it (traffic that never leaves this machine).
func hostIP() (net.IP, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 || iface.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := iface.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
				return ipn.IP.To4(), nil
			}
		}
	}
	return nil, errors.New("no interface has a global unicast IPv4 address for the node IP")
}

// sanitize turns an image ref into a file name.
func sanitize(s string) string {
	out := []byte(s)
	for i, b := range out {
		switch {
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9', b == '-', b == '.':
		default:
			out[i] = '_'
		}
	}
	return string(out)
}
