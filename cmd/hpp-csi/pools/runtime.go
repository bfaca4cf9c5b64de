package pools

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/capacity"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/pool"
	"github.com/hostpath-provisioner/hpp/internal/prjquota"
	"github.com/hostpath-provisioner/hpp/internal/selinux"
)

// Config is the runtime's part of hpp-csi's validated configuration.
type Config struct {
	NodeID string
	Pools  *pool.Set
	// ReservationAware makes offered capacity also subtract what live
	// volumes requested but have not written yet.
	ReservationAware bool
	// HostRootRef is a directory on the host's root filesystem as this
	// process sees it: in a DaemonSet, a hostPath mount such as the CSI
	// socket's directory (the KubeVirt driver compares with it too). A pool
	// on the same filesystem shares the OS disk; the container's own "/"
	// would say nothing about the host. Empty: not reported.
	HostRootRef string
	// StatsCacheTTL bounds how stale a volume's measured usage may be;
	// StatsTimeout bounds one directory walk.
	StatsCacheTTL time.Duration
	StatsTimeout  time.Duration
	// CopyStallTimeout ends a copy from another node that has received
	// nothing for this long (Unavailable); 0 is DefaultCopyStall.
	CopyStallTimeout time.Duration
	// UncollectedSweepInterval is how often copies no CreateVolume
	// collected are checked (uncollected.go); 0 is
	// defaultUncollectedSweep.
	UncollectedSweepInterval time.Duration
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

// HostFS is the filesystem access the runtime needs outside dirvol.
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

// Deps are the runtime's side effects, injected so it is testable.
type Deps struct {
	Mounter Mounter
	Labeler selinux.Labeler
	FS      HostFS
	Now     func() time.Time
	Logger  *zap.Logger
	// Metrics is where the pool figures are registered (nil: a registry
	// of their own, which nobody scrapes).
	Metrics prometheus.Registerer
	// Quota enforces the sizes of pools with enforceSize; nil makes such
	// pools not ready. QuotaStep, when set, hears each step of the quota
	// layer (a crash test kills the process there).
	Quota     prjquota.Backend
	QuotaStep func(step string)
	// Remote fetches clone and restore sources that live on other nodes
	// (remote.go); nil keeps them node-local.
	Remote RemoteSources
	// Claims answers the sweep of copies from other nodes that no
	// CreateVolume collected (uncollected.go); nil: no sweep.
	Claims ClaimLookup
}

// Runtime is the node's pools at run time. Handlers only ask it; it is
// the only writer of the pools.
type Runtime struct {
	cfg   Config
	deps  Deps
	log   *zap.Logger
	pools []*poolState
	locks *volumeLocks
	stats *usageCache
	// mismatches: volumes refused for another pool identity (identity.go;
	// the record is in problem.go).
	mismatches identityMismatches
	reflink    *prometheus.GaugeVec
	// copies are the running and failed copies from other nodes
	// (copyjobs.go), and their figures.
	copies *copyJobs
	// uncollected are the volumes those copies made that no CreateVolume
	// returned yet (uncollected.go).
	uncollected   *uncollectedSet
	remoteBytes   *prometheus.CounterVec
	remoteResults *prometheus.CounterVec
	// The clone cache's figures (clonecache.go), by pool.
	cacheHits, cacheMisses, cacheEvictions *prometheus.CounterVec
}

// New builds the runtime; it touches no disk until Open. The configuration
// is validated by the caller (its messages name hpp-csi's flags).
func New(cfg Config, deps Deps) (*Runtime, error) {
	if deps.Mounter == nil || deps.Labeler == nil || deps.FS == nil {
		return nil, errors.New("pools.New: Mounter, Labeler and FS are required")
	}
	if deps.Logger == nil {
		deps.Logger = zap.NewNop()
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if cfg.CopyStallTimeout <= 0 {
		cfg.CopyStallTimeout = DefaultCopyStall
	}
	if cfg.UncollectedSweepInterval <= 0 {
		cfg.UncollectedSweepInterval = defaultUncollectedSweep
	}
	if deps.Metrics == nil {
		deps.Metrics = prometheus.NewRegistry()
	}
	rt := &Runtime{cfg: cfg, deps: deps, log: deps.Logger, locks: newVolumeLocks(), copies: newCopyJobs(), uncollected: newUncollectedSet()}
	rt.stats = newUsageCache(deps.FS.Usage, deps.Now, cfg.StatsCacheTTL, cfg.StatsTimeout)
	for _, p := range cfg.Pools.All() {
		rt.pools = append(rt.pools, newPoolState(p))
	}
	if err := rt.registerMetrics(deps.Metrics); err != nil {
		return nil, err
	}
	return rt, nil
}
