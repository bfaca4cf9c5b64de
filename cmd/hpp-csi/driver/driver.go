// Package driver is hpp-csi: the node-local CSI driver that serves Identity,
// Controller and Node on one socket, one process per node.
package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/capacity"
	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/pool"
	"github.com/hostpath-provisioner/hpp/internal/prjquota"
	"github.com/hostpath-provisioner/hpp/internal/selinux"
)

// Kubernetes sets these in the volume context of inline ephemeral volumes.
// The contract's names (driver, topology key, parameters) are in
// internal/contract.
const (
	ephemeralContextKey = "csi.storage.k8s.io/ephemeral"
	podUIDContextKey    = "csi.storage.k8s.io/pod.uid"
)

// Config is the validated configuration of one driver instance.
type Config struct {
	DriverName string
	// VendorVersion is what GetPluginInfo reports (the KubeVirt plugin's
	// --version); empty means hpp's own version.
	VendorVersion string
	NodeID        string
	Pools         *pool.Set
	// MaxVolumesPerNode is reported by NodeGetInfo; 0 lets the CO decide.
	MaxVolumesPerNode int64
	// ReservationAware makes offered capacity also subtract what live
	// volumes requested but have not written yet.
	ReservationAware bool
	// HostRootRef is a directory on the host's root filesystem as this
	// process sees it: in a DaemonSet, a hostPath mount such as the CSI
	// socket's directory (the KubeVirt driver compares with it too). A pool
	// on the same filesystem shares the OS disk; the container's own "/"
	// would say nothing about the host. Empty: not reported.
	HostRootRef string
	// StatsCacheTTL bounds how stale NodeGetVolumeStats usage may be;
	// StatsTimeout bounds one directory walk.
	StatsCacheTTL time.Duration
	StatsTimeout  time.Duration
	// ControllerOnly serves Identity and ControllerExpandVolume only, for
	// csi-resizer (controlleronly.go): no pools, no node, no Node service.
	ControllerOnly bool
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.DriverName == "" {
		errs = append(errs, errors.New("--drivername: required"))
	}
	if c.NodeID == "" && !c.ControllerOnly {
		errs = append(errs, errors.New("--nodeid: required (the Kubernetes node name)"))
	}
	if c.Pools == nil && !c.ControllerOnly {
		errs = append(errs, errors.New("--datadir: required (JSON list of pools, or env PV_DIR)"))
	}
	if c.MaxVolumesPerNode < 0 {
		errs = append(errs, fmt.Errorf("--max-volumes: %d must not be negative", c.MaxVolumesPerNode))
	}
	if c.StatsCacheTTL < 0 {
		errs = append(errs, fmt.Errorf("--stats-cache-ttl: %v must not be negative", c.StatsCacheTTL))
	}
	if c.StatsTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--stats-timeout: %v must be positive", c.StatsTimeout))
	}
	return errors.Join(errs...)
}

// Mounter does the node's mount work; the Linux one uses mount syscalls.
type Mounter interface {
	// BindMount mounts source at target, read-only if asked, with the
	// given (already validated) per-mount flags.
	BindMount(source, target string, readOnly bool, flags []string) error
	Unmount(target string) error
	IsMountPoint(path string) (bool, error)
	// BindTargets lists where source is bind mounted now.
	BindTargets(source string) ([]string, error)
}

// HostFS is the filesystem access the driver needs outside dirvol.
type HostFS interface {
	Statfs(path string) (capacity.Stats, error)
	// DeviceOf returns the device id of path's filesystem; errors wrap
	// fs.ErrNotExist when path is missing.
	DeviceOf(path string) (uint64, error)
	// SameFile reports whether a and b are the same inode (a bind mount
	// target and its source are).
	SameFile(a, b string) (bool, error)
	MkdirAll(path string, perm os.FileMode) error
	Remove(path string) error
	Exists(path string) (bool, error)
	Usage(ctx context.Context, path string) (dirvol.Usage, error)
}

// Deps are the driver's side effects, injected so handlers are testable.
type Deps struct {
	Mounter Mounter
	Labeler selinux.Labeler
	FS      HostFS
	Now     func() time.Time
	Logger  *zap.Logger
	Metrics *Metrics
	// Binding, when set, lets CreateVolume refuse Immediate StorageClasses.
	Binding BindingModes
	// Quota enforces the sizes of pools with enforceSize; nil makes such
	// pools not ready. QuotaStep, when set, hears each step of the quota
	// layer (a crash test kills the process there).
	Quota     prjquota.Backend
	QuotaStep func(step string)
}

// Driver implements the CSI Identity, Controller and Node services.
type Driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	csi.UnimplementedNodeServer

	cfg   Config
	deps  Deps
	log   *zap.Logger
	pools []*poolState
	locks *volumeLocks
	stats *usageCache
	// mismatches: volumes refused for another pool identity (poolid.go;
	// the record is in problem.go).
	mismatches identityMismatches
}

func (d *Driver) topology() *csi.Topology {
	return &csi.Topology{Segments: map[string]string{contract.TopologyKey: d.cfg.NodeID}}
}
