package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/pool"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

// The hpp-csi compatibility names (docs/design.md, the compatibility contract) are in internal/contract.
const (
	// CSINamespace is where csi-provisioner puts its CSIStorageCapacity
	// objects (its NAMESPACE).
	CSINamespace = "hpp-system"
)

// Pool is one storage pool of hpp-csi. Path is the host pool directory;
// hpp-csi's --datadir gets <Path>/csi, as a deployment that mounts the host
// pool directory passes it, so volumes land at <Path>/csi/<id>.
type Pool struct {
	Name string
	Path string
	// Shared marks storage every node mounts: volumes get no topology.
	Shared bool
	// LegacyPath is the legacy provisioner's PV_DIR whose migrated volumes
	// the pool serves in place; created like a DaemonSet's hostPath
	// volume would be.
	LegacyPath string
	// SnapshotProvider ("reflink") turns snapshots on for the pool.
	SnapshotProvider string
	// EnforceSize gives every volume a project quota (issue 22); the
	// pool's filesystem must have them (MountQuotaFS).
	EnforceSize bool
}

// volumesSubdir is the pool's subdirectory that holds the CSI volumes.
const volumesSubdir = "csi"

// datadir is hpp-csi's --datadir for pools, written as internal/pool's
// Pool (the one type of the format).
func datadir(pools []Pool) (string, error) {
	entries := make([]pool.Pool, len(pools))
	for i, p := range pools {
		entries[i] = pool.Pool{Name: p.Name, Path: filepath.Join(p.Path, volumesSubdir), Shared: p.Shared, LegacyPath: p.LegacyPath, SnapshotProvider: p.SnapshotProvider, EnforceSize: p.EnforceSize}
	}
	data, err := json.Marshal(entries)
	return string(data), err
}

// HPPCSIConfig is the CSI driver one node runs: hpp-csi and csi-provisioner
// as host processes.
type HPPCSIConfig struct {
	// Binary is hpp-csi, built from cmd/hpp-csi.
	Binary string
	// Pools are the node's storage pools; their directories are created.
	Pools []Pool
	// DriverArgs are added to hpp-csi's flags.
	DriverArgs []string
	// ProvisionerArgs are added to csi-provisioner's flags (later ones
	// win), e.g. --kube-api-qps=100.
	ProvisionerArgs []string
}

func (cfg HPPCSIConfig) validate() error {
	var errs []error
	if !filepath.IsAbs(cfg.Binary) {
		errs = append(errs, fmt.Errorf("hpp-csi binary %q: must be absolute", cfg.Binary))
	} else if _, err := os.Stat(cfg.Binary); err != nil {
		errs = append(errs, fmt.Errorf("hpp-csi binary: %w (run `make build`)", err))
	}
	if len(cfg.Pools) == 0 {
		errs = append(errs, errors.New("hpp-csi pools: at least one"))
	}
	for i, p := range cfg.Pools {
		if p.Name == "" || !filepath.IsAbs(p.Path) {
			errs = append(errs, fmt.Errorf("hpp-csi pools[%d] %+v: want a name and an absolute path", i, p))
		}
	}
	return errors.Join(errs...)
}

// InstallCSIDriver creates the CSIDriver object as hpp's operator does,
// and the namespace for csi-provisioner's capacity objects.
func (c *Cluster) InstallCSIDriver(ctx context.Context) error {
	obj := &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: contract.DriverName},
		Spec: storagev1.CSIDriverSpec{
			AttachRequired:  ptr.To(false),
			PodInfoOnMount:  ptr.To(true),
			StorageCapacity: ptr.To(true),
			FSGroupPolicy:   ptr.To(storagev1.FileFSGroupPolicy),
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{
				storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral,
			},
		},
	}
	if _, err := c.Client.StorageV1().CSIDrivers().Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("csidriver %s: %w", contract.DriverName, err)
	}
	return c.CreateNamespace(ctx, CSINamespace)
}

// csiSocket is where a node's hpp-csi listens: on the real node kubelet's
// plugin directory (kubelet dials it after registration).
func (n *Node) csiSocket() string {
	if n.Simulated {
		return filepath.Join(n.dir, "csi", "csi.sock")
	}
	return filepath.Join(n.c.kubeletDir(), "plugins", contract.DriverName, "csi.sock")
}

// CSISocket is the node's hpp-csi socket path.
func (n *Node) CSISocket() string { return n.csiSocket() }

// AddSimulatedCSINode adds a simulated node that carries hpp-csi's topology
// label and CSINode entry, as kubelet would after the driver registered.
func (c *Cluster) AddSimulatedCSINode(ctx context.Context, name string, opts SimulatedNodeOptions) (*Node, error) {
	if opts.Labels == nil {
		opts.Labels = map[string]string{}
	}
	opts.Labels[contract.TopologyKey] = name
	opts.CSIDrivers = append(opts.CSIDrivers, CSINodeDriver{Name: contract.DriverName, NodeID: name, TopologyKeys: []string{contract.TopologyKey}})
	return c.AddSimulatedNode(ctx, name, opts)
}

// StartHPPCSI starts hpp-csi ("hpp-csi@<node>") and csi-provisioner
// ("csi-provisioner@<node>") on the node and waits until the driver
// serves (/healthz) and, on the real node, kubelet has registered it. On
// the real node it also starts the cluster's csi-resizer (resizer.go).
func (n *Node) StartHPPCSI(ctx context.Context, cfg HPPCSIConfig) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	for _, p := range cfg.Pools {
		if err := os.MkdirAll(p.Path, 0o755); err != nil {
			return fmt.Errorf("pool %s: %w", p.Name, err)
		}
		if p.LegacyPath != "" {
			if err := os.MkdirAll(p.LegacyPath, 0o755); err != nil {
				return fmt.Errorf("pool %s: legacy path: %w", p.Name, err)
			}
		}
	}
	pools, err := datadir(cfg.Pools)
	if err != nil {
		return err
	}
	sock := n.csiSocket()
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		return err
	}
	health, err := n.c.ports.next()
	if err != nil {
		return err
	}
	metrics, err := n.c.ports.next()
	if err != nil {
		return err
	}
	n.metricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics)
	args := []string{
		"--endpoint=unix://" + sock,
		"--nodeid=" + n.Name,
		"--datadir=" + pools,
		"--health-address=127.0.0.1:" + strconv.Itoa(health),
		"--metrics-address=127.0.0.1:" + strconv.Itoa(metrics),
		// Tests read kubelet's stats summary right after a pod wrote.
		"--stats-cache-ttl=1s",
		// Refuse Immediate StorageClasses with a clear event.
		"--check-binding-mode",
		"--kubeconfig=" + n.c.Kubeconfig,
	}
	if !n.Simulated {
		args = append(args,
			"--kubelet-registration-path="+sock,
			"--plugin-registration-dir="+filepath.Join(n.c.kubeletDir(), "plugins_registry"))
	}
	proc, err := n.StartProcess(ProcessSpec{Name: "hpp-csi", Path: cfg.Binary, Args: append(args, cfg.DriverArgs...), StopTimeout: 35 * time.Second, RestartOnExit: true})
	if err != nil {
		return err
	}
	if err := waitHTTP(ctx, "hpp-csi on "+n.Name, fmt.Sprintf("http://127.0.0.1:%d/healthz", health), nil, proc); err != nil {
		return n.c.stepError("wait for hpp-csi on "+n.Name, proc.Name(), err)
	}
	if !n.Simulated {
		if err := n.waitCSINode(ctx); err != nil {
			return n.c.stepError("wait for kubelet to register hpp-csi", "kubelet", err)
		}
	}
	if err := n.StartCSIProvisioner(cfg.ProvisionerArgs...); err != nil {
		return err
	}
	// Expansion: kubelet expands on the real node only (simulated nodes
	// run no pods), and the cluster needs one csi-resizer for all nodes.
	if !n.Simulated {
		if err := n.c.startCSIResizer(ctx, cfg.Binary); err != nil {
			return err
		}
	}
	n.c.opts.Logf("hpp-csi and csi-provisioner running on node %s (pools %s)", n.Name, pools)
	return nil
}

// StartCSIProvisioner starts csi-provisioner ("csi-provisioner@<node>")
// for the node's hpp-csi in node-deployment mode with capacity, as hpp's
// operator deploys it; extraArgs are appended (later flags win). Stop it
// with StopProcess(ctx, "csi-provisioner") to restart with other flags.
func (n *Node) StartCSIProvisioner(extraArgs ...string) error {
	if fi, err := os.Stat(n.c.opts.Binaries.CSIProvisioner); err != nil || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("binaries.CSIProvisioner %s: missing or not executable (run `make cluster-binaries`): %w", n.c.opts.Binaries.CSIProvisioner, err)
	}
	args := append([]string{
		"--csi-address=" + n.csiSocket(),
		"--kubeconfig=" + n.c.Kubeconfig,
		"--node-deployment=true",
		"--enable-capacity",
		"--strict-topology",
		"--immediate-topology=false",
		"--extra-create-metadata",
		"--feature-gates=Topology=true",
		// Outside a pod there is no owner for the capacity objects.
		"--capacity-ownerref-level=-1",
		// Capacity seen by the scheduler within seconds of a change.
		"--capacity-poll-interval=10s",
		// Immediate claims: in node-deployment mode csi-provisioner
		// v6.4.0 takes one by setting the selected-node annotation to its
		// own node, so its CreateVolume looks like a WaitForFirstConsumer
		// one; hpp-csi (--check-binding-mode) looks up the StorageClass
		// and refuses it, which puts a ProvisioningFailed event saying
		// "use WaitForFirstConsumer" on the claim.
		"--v=3",
	}, extraArgs...)
	_, err := n.StartProcess(ProcessSpec{
		Name: "csi-provisioner", Path: n.c.opts.Binaries.CSIProvisioner, Args: args,
		Env:           []string{"NAMESPACE=" + CSINamespace},
		RestartOnExit: true,
	})
	return err
}

// waitCSINode waits until kubelet lists hpp-csi in the node's CSINode.
func (n *Node) waitCSINode(ctx context.Context) error {
	return poll(ctx, startTimeout, 250*time.Millisecond, "CSINode "+n.Name+" with "+contract.DriverName, func(ctx context.Context) (bool, error) {
		cn, err := n.c.Client.StorageV1().CSINodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, tryAgain(err)
		}
		for _, d := range cn.Spec.Drivers {
			if d.Name == contract.DriverName {
				return true, nil
			}
		}
		return false, nil
	})
}

// WaitCSIRegistered waits until kubelet has (re-)registered hpp-csi on the
// real node.
func (n *Node) WaitCSIRegistered(ctx context.Context) error { return n.waitCSINode(ctx) }

// HPPCSIMetrics is the text of the node's hpp-csi /metrics.
func (n *Node) HPPCSIMetrics(ctx context.Context) (string, error) {
	if n.metricsURL == "" {
		return "", fmt.Errorf("node %s: hpp-csi not started by StartHPPCSI", n.Name)
	}
	text, err := testutil.HTTPGetOK(ctx, n.metricsURL)
	if err != nil {
		return "", fmt.Errorf("hpp-csi /metrics on %s: %w", n.Name, err)
	}
	return text, nil
}
