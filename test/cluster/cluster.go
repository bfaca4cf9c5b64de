package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Cluster is a running local cluster: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, containerd and kubelet of the
// real node, all host processes under one temporary directory, plus any
// simulated nodes and per-node processes added later. Stop it (always, e.g.
// with defer) to leave nothing behind.
type Cluster struct {
	opts Options
	cmd  Commander

	// Dir is the cluster's temporary directory.
	Dir string
	// Kubeconfig is an admin (system:masters) kubeconfig file.
	Kubeconfig string
	// Client is an admin client.
	Client kubernetes.Interface
	// RESTConfig is the admin client's configuration, for other clients.
	RESTConfig *rest.Config

	ports     *portAllocator
	pki       *pki
	serverURL string
	etcdURL   string
	nodeIP    net.IP
	lock      *machineLock
	before    hostState
	pause     Image // the sandbox image; its binary is also node-init's
	// peerCA signs the nodes' hpp-csi peer certificates (peer.go), made
	// at first need.
	peerCA *certAuthority

	mu        sync.Mutex
	procs     []*Process // control plane and real-node daemons, in start order
	realNode  *Node
	nodes     map[string]*Node // every node by name, real one included
	nodeOrder []string

	stopOnce  sync.Once
	stopErr   error
	sigCancel func()
}

// StepError is a failure of one bring-up step, with the log tail of the
// component the step was waiting for.
type StepError struct {
	Step      string
	Component string
	LogPath   string
	LogTail   string
	Err       error
}

func (e *StepError) Error() string {
	if e.Component == "" {
		return fmt.Sprintf("%s: %v", e.Step, e.Err)
	}
	return fmt.Sprintf("%s: %v\n--- last lines of %s (%s) ---\n%s", e.Step, e.Err, e.Component, e.LogPath, e.LogTail)
}

func (e *StepError) Unwrap() error { return e.Err }

// Start brings a cluster up and waits until the real node is Ready and the
// default namespace can run pods. On failure everything started so far is
// torn down and the error (a *StepError) names the step and carries the
// log tail of the component at fault.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("cluster options: %w", err)
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("cluster: must run as root (kubelet, containerd, mounts)")
	}
	lock, err := acquireMachineLock(ctx, opts.Logf)
	if err != nil {
		return nil, err
	}
	return startLocked(ctx, opts.withDefaults(), lock)
}

// startLocked is Start once the machine lock is held (lock is released by
// Stop, or here on failure).
func startLocked(ctx context.Context, opts Options, lock *machineLock) (*Cluster, error) {
	c := &Cluster{opts: opts, cmd: hostCommander{}, ports: newPortAllocator(), nodes: map[string]*Node{}, lock: lock}
	if opts.HandleSignals {
		c.handleSignals()
	}
	if err := c.start(ctx); err != nil {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		if stopErr := c.Stop(stopCtx); stopErr != nil {
			err = fmt.Errorf("%w\nteardown after the failure: %w", err, stopErr)
		}
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	started := time.Now()
	if err := sweepStale(ctx, c.cmd, c.opts, c.opts.Logf); err != nil {
		return &StepError{Step: "sweep state left by an earlier run", Err: err}
	}
	c.before = snapshotHostState(ctx, c.cmd)
	base := c.opts.BaseDir
	if base == "" {
		base = os.TempDir()
	}
	dir, err := os.MkdirTemp(base, staleDirPrefix)
	if err != nil {
		return &StepError{Step: "create the cluster directory", Err: err}
	}
	c.Dir = dir
	// Before anything is mounted under it and before the node namespace
	// copies the mount table: see nodens_linux.go.
	if err := makeSharedMount(c.Dir); err != nil {
		return &StepError{Step: "make the cluster directory a shared mount", Err: err}
	}
	for _, d := range []string{c.logDir(), c.pkiDir(), c.imageDir(), c.nodesDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return &StepError{Step: "create the cluster directory", Err: err}
		}
	}
	c.opts.Logf("cluster directory %s (logs in %s)", c.Dir, c.logDir())
	if c.nodeIP, err = hostIP(); err != nil {
		return &StepError{Step: "find the node IP", Err: err}
	}
	if err := c.writePKI(); err != nil {
		return &StepError{Step: "generate certificates", Err: err}
	}
	if err := c.startEtcd(ctx); err != nil {
		return err
	}
	if err := c.startAPIServer(ctx); err != nil {
		return err
	}
	if err := c.startControllers(ctx); err != nil {
		return err
	}
	if c.pause, err = buildPauseImage(ctx, c.imageDir(), c.opts.Binaries.Pause); err != nil {
		return &StepError{Step: "build the pause image", Err: err}
	}
	if err := c.startNodeNamespace(ctx, c.pause.Files[0].Source); err != nil {
		return err
	}
	if err := c.startContainerd(ctx); err != nil {
		return err
	}
	if err := c.importImages(ctx); err != nil {
		return err
	}
	if err := c.startKubelet(ctx); err != nil {
		return err
	}
	// After kubelet registered the Node, whose addresses kube-proxy reads.
	if c.opts.PodNetwork {
		if err := c.startKubeProxy(ctx); err != nil {
			return err
		}
	}
	if err := c.waitDefaultServiceAccount(ctx, "default"); err != nil {
		return &StepError{Step: "wait for the default service account", Component: "kube-controller-manager",
			LogPath: c.logPath("kube-controller-manager"), LogTail: tailFile(c.logPath("kube-controller-manager"), 30), Err: err}
	}
	c.opts.Logf("cluster ready in %s: node %s Ready, kubeconfig %s", time.Since(started).Round(100*time.Millisecond), c.opts.NodeName, c.Kubeconfig)
	return nil
}

// handleSignals tears the cluster down on SIGINT/SIGTERM, then exits: an
// interrupted `go test` or `make demo` must leave nothing behind.
func (c *Cluster) handleSignals() {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	c.sigCancel = func() {
		signal.Stop(sigs)
		close(done)
	}
	go func() {
		select {
		case sig := <-sigs:
			fmt.Fprintf(os.Stderr, "\n==> %v: tearing the cluster down\n", sig)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			err := c.Stop(ctx)
			cancel()
			if err != nil {
				fmt.Fprintf(os.Stderr, "==> teardown: %v\n", err)
			}
			os.Exit(130)
		case <-done:
		}
	}()
}

// run starts a control-plane or real-node daemon and records it for Stop.
func (c *Cluster) run(spec ProcessSpec) (*Process, error) {
	p, err := startProcess(spec, c.logDir(), c.Dir)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return p, nil
}

// Process returns a control-plane or real-node daemon by name
// ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
// "containerd", "kubelet", "kube-proxy" with PodNetwork), or nil.
func (c *Cluster) Process(name string) *Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		if p.Name() == name {
			return p
		}
	}
	for _, n := range c.nodes {
		if p := n.Process(name); p != nil {
			return p
		}
	}
	return nil
}

// Processes returns every process of the cluster: daemons first, then each
// node's processes.
func (c *Cluster) Processes() []*Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := append([]*Process(nil), c.procs...)
	for _, name := range c.nodeOrder {
		out = append(out, c.nodes[name].Processes()...)
	}
	return out
}

// LogDir is where every process's log file is.
func (c *Cluster) LogDir() string { return c.logDir() }

// DumpLogTails writes the last n lines of every process's log to w, for a
// failed test's output.
func (c *Cluster) DumpLogTails(w io.Writer, n int) {
	for _, p := range c.Processes() {
		fmt.Fprintf(w, "\n--- last %d lines of %s (%s) ---\n%s\n", n, p.Name(), p.LogPath(), p.Tail(n))
	}
}

// SaveLogs copies every log file into dir (created if missing), so they
// outlive Stop, which removes the cluster directory.
func (c *Cluster) SaveLogs(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("save logs dir %q: must be absolute", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("save logs: %w", err)
	}
	entries, err := os.ReadDir(c.logDir())
	if err != nil {
		return fmt.Errorf("save logs: %w", err)
	}
	var errs []error
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(c.logDir(), e.Name()))
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// NodeIP is the real node's InternalIP (this machine's own address: kubelet
// refuses a loopback one).
func (c *Cluster) NodeIP() net.IP { return c.nodeIP }

// ServerURL is the apiserver's https URL on 127.0.0.1.
func (c *Cluster) ServerURL() string { return c.serverURL }

func (c *Cluster) logDir() string   { return filepath.Join(c.Dir, "logs") }
func (c *Cluster) pkiDir() string   { return filepath.Join(c.Dir, "pki") }
func (c *Cluster) imageDir() string { return filepath.Join(c.Dir, "images") }
func (c *Cluster) nodesDir() string { return filepath.Join(c.Dir, "nodes") }
func (c *Cluster) kubeletDir() string {
	return filepath.Join(c.Dir, "kubelet")
}
func (c *Cluster) logPath(name string) string {
	return filepath.Join(c.logDir(), strings.ReplaceAll(name, "/", "_")+".log")
}

// stepError wraps err for a step waiting on a named process.
func (c *Cluster) stepError(step, component string, err error) error {
	return &StepError{Step: step, Component: component, LogPath: c.logPath(component), LogTail: tailFile(c.logPath(component), 30), Err: err}
}

// loadAdminClient builds the admin client from the admin kubeconfig.
func (c *Cluster) loadAdminClient() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 200, 400
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	c.RESTConfig, c.Client = cfg, client
	return nil
}

// sortedNodeNames returns node names in creation order.
func (c *Cluster) sortedNodeNames() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := append([]string(nil), c.nodeOrder...)
	if len(names) == 0 {
		for n := range c.nodes {
			names = append(names, n)
		}
		sort.Strings(names)
	}
	return names
}
