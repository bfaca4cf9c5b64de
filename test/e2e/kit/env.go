// Package kit is what test/e2e's scenarios share with `make demo`, the
// cluster benchmarks, test/onnode and test/conformance: a local cluster
// (test/cluster) with hpp-csi on the real node, builders and waits for
// StorageClasses, claims and pods, and the benchmarks' helpers. It is a
// package of its own so that test/e2e holds the scenarios only.
package kit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/hostpath-provisioner/hpp/test/cluster"
)

// Pool names every real node gets: plain directories on the host's
// filesystem; PoolShared is configured as a shared pool (storage every node
// mounts; on this one machine every node sees the same directory).
const (
	PoolLocal  = "local"
	PoolFast   = "fast"
	PoolShared = "shared"
	// PoolMigrated serves, in place, the legacy PVs that hpp-migrate moved
	// from hpp-legacy's PV_DIR Env.LegacyDir (its legacyPath).
	PoolMigrated = "migrated"
)

// Env is a running cluster with hpp-csi on its real node.
type Env struct {
	C *cluster.Cluster
	// HPPCSI is the hpp-csi binary every node runs.
	HPPCSI string
	// Pools of the real node, by name.
	Pools map[string]string
	// LegacyDir is the real node's legacy PV_DIR, PoolMigrated's legacyPath.
	LegacyDir string
	// Snapshotter is SetupOptions.Snapshotter, for the csi-snapshotter of
	// other nodes.
	Snapshotter *cluster.Snapshotter
	// Snapshots says whether snapshots are installed (SetupOptions.Snapshotter).
	Snapshots bool
	// NoQuota says, by pool name, why each of SetupOptions.QuotaPools
	// left out was (what mkfs or the kernel refused); served pools are
	// not in it.
	NoQuota map[string]string
}

// QuotaPool is an enforcing pool's filesystem: FS "xfs" or "ext4" of
// Size bytes on a loop device, mounted prjquota (cluster.MountQuotaFS).
type QuotaPool struct {
	FS   string
	Size int64
}

// SetupOptions configure Setup.
type SetupOptions struct {
	Binaries cluster.Binaries
	// HPPCSI is the hpp-csi binary; built from cmd/hpp-csi when empty.
	HPPCSI string
	Logf   func(string, ...any)
	// TmpfsPools are added to the real node's local and fast pools, each
	// on a tmpfs of its size (bytes), for capacity scenarios.
	TmpfsPools map[string]int64
	// QuotaPools are added to the real node as enforcing pools
	// (enforceSize), by name, each on its own filesystem mounted with
	// prjquota through a loop device. Where the kernel cannot (XFS
	// without CONFIG_XFS_QUOTA, ext4 without CONFIG_QFMT_V2) a pool is
	// left out and Env.NoQuota says why: the rest of the suite runs on any
	// kernel.
	QuotaPools map[string]QuotaPool
	// XFSPools are added to the real node, by name, each on XFS with
	// reflink of its size (bytes) through a loop device, without quotas
	// (cluster.MountReflinkXFS): pools whose clones share data.
	XFSPools map[string]int64
	// ProvisionerArgs go to the real node's csi-provisioner.
	ProvisionerArgs []string
	// HandleSignals: see cluster.Options.
	HandleSignals bool
	MaxPods       int
	// ControlPlaneQPS: see cluster.Options.
	ControlPlaneQPS int
	// Snapshotter, when set, installs snapshots: the CRDs,
	// snapshot-controller, a VolumeSnapshotClass and csi-snapshotter on
	// the real node; the local pool takes snapshots.
	Snapshotter *cluster.Snapshotter
}

// Setup starts a cluster, installs the CSIDriver object and runs hpp-csi
// and csi-provisioner on the real node. On error nothing is left running.
func Setup(ctx context.Context, opts SetupOptions) (*Env, error) {
	c, err := cluster.Start(ctx, cluster.Options{Binaries: opts.Binaries, Logf: opts.Logf, HandleSignals: opts.HandleSignals, MaxPods: opts.MaxPods,
		ControlPlaneQPS: opts.ControlPlaneQPS,
		// TestNodeLoss reads what the node-loss controller deleted from it.
		AuditLog: true})
	if err != nil {
		return nil, err
	}
	env := &Env{C: c, HPPCSI: opts.HPPCSI, Pools: map[string]string{}, NoQuota: map[string]string{}}
	if env.HPPCSI == "" {
		// Built into the cluster directory, so Stop removes it.
		env.HPPCSI = filepath.Join(c.Dir, "hpp-csi")
		err = BuildCommand(ctx, "hpp-csi", env.HPPCSI)
	}
	if err == nil {
		err = env.installDriver(ctx, opts)
	}
	if err != nil {
		if stopErr := c.Stop(context.WithoutCancel(ctx)); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		return nil, err
	}
	return env, nil
}

func (e *Env) installDriver(ctx context.Context, opts SetupOptions) error {
	if err := e.C.InstallCSIDriver(ctx); err != nil {
		return &cluster.StepError{Step: "create the CSIDriver object", Err: err}
	}
	node := e.C.RealNode()
	pools := []cluster.Pool{
		{Name: PoolLocal, Path: filepath.Join(node.Dir(), "pools", PoolLocal), SnapshotProvider: "reflink"},
		{Name: PoolFast, Path: filepath.Join(node.Dir(), "pools", PoolFast)},
		{Name: PoolShared, Path: filepath.Join(node.Dir(), "pools", PoolShared), Shared: true},
		{Name: PoolMigrated, Path: filepath.Join(node.Dir(), "pools", PoolMigrated), LegacyPath: filepath.Join(node.Dir(), "legacy-pv-dir")},
	}
	e.LegacyDir = pools[len(pools)-1].LegacyPath
	for name, size := range opts.TmpfsPools {
		p := cluster.Pool{Name: name, Path: filepath.Join(node.Dir(), "pools", name)}
		if err := cluster.MountTmpfs(p.Path, size); err != nil {
			return &cluster.StepError{Step: "mount pool " + name, Err: err}
		}
		pools = append(pools, p)
	}
	for name, size := range opts.XFSPools {
		p := cluster.Pool{Name: name, Path: filepath.Join(node.Dir(), "pools", name), SnapshotProvider: "reflink"}
		if err := cluster.MountReflinkXFS(ctx, p.Path, size); err != nil {
			return &cluster.StepError{Step: "mount pool " + name, Err: err}
		}
		pools = append(pools, p)
	}
	for name, q := range opts.QuotaPools {
		p := cluster.Pool{Name: name, Path: filepath.Join(node.Dir(), "pools", name), EnforceSize: true}
		if err := cluster.MountQuotaFS(ctx, p.Path, q.FS, q.Size); err != nil {
			e.NoQuota[name] = fmt.Sprintf("enforcing pool %s (%s): %v", name, q.FS, err)
			if opts.Logf != nil {
				opts.Logf("left out: %s", e.NoQuota[name])
			}
			continue
		}
		pools = append(pools, p)
	}
	for _, p := range pools {
		e.Pools[p.Name] = p.Path
	}
	// The peer transport on: clones and restores of sources on other
	// (simulated) nodes come over it (test/e2e/crossnode_test.go).
	peerArgs, err := e.C.PeerArgs(node, e.C.NodeIP())
	if err != nil {
		return &cluster.StepError{Step: "peer certificate of the real node", Err: err}
	}
	if err := node.StartHPPCSI(ctx, cluster.HPPCSIConfig{Binary: e.HPPCSI, Pools: pools, ProvisionerArgs: opts.ProvisionerArgs, DriverArgs: peerArgs}); err != nil {
		return err
	}
	if opts.Snapshotter == nil {
		return nil
	}
	if err := e.C.InstallSnapshots(ctx, *opts.Snapshotter); err != nil {
		return err
	}
	if err := node.StartCSISnapshotter(*opts.Snapshotter); err != nil {
		return err
	}
	e.Snapshots = true
	e.Snapshotter = opts.Snapshotter
	return nil
}

// Stop tears the cluster down.
func (e *Env) Stop(ctx context.Context) error { return e.C.Stop(ctx) }

// BuildCommand builds cmd/<name> (found from this source file, three
// directories below the repository root: the tests and benchmarks run from a
// checkout) into the file out.
func BuildCommand(ctx context.Context, name, out string) error {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return fmt.Errorf("build %s: cannot locate the source tree", name)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, ".")
	cmd.Dir = filepath.Join(filepath.Dir(self), "..", "..", "..", "cmd", name)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s in %s: %w: %s", name, cmd.Dir, err, strings.TrimSpace(string(b)))
	}
	return nil
}

// AddSimulatedNodes adds simulated nodes sim-1..sim-count, each with room
// for maxPods pods and, when withCSI, its own hpp-csi serving a "local" pool
// under the node's directory (the benchmarks' multi-node layout).
func (e *Env) AddSimulatedNodes(ctx context.Context, count, maxPods int, withCSI bool) error {
	for i := range count {
		n, err := e.C.AddSimulatedCSINode(ctx, fmt.Sprintf("sim-%d", i+1), cluster.SimulatedNodeOptions{Pods: maxPods})
		if err != nil {
			return err
		}
		if !withCSI {
			continue
		}
		pool := cluster.Pool{Name: PoolLocal, Path: filepath.Join(n.Dir(), "pools", PoolLocal)}
		if err := n.StartHPPCSI(ctx, cluster.HPPCSIConfig{Binary: e.HPPCSI, Pools: []cluster.Pool{pool}}); err != nil {
			return err
		}
	}
	return nil
}
