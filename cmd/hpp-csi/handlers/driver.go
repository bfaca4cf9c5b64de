package handlers

import (
	"errors"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools"
	"github.com/hostpath-provisioner/hpp/internal/contract"
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
	// MaxVolumesPerNode is reported by NodeGetInfo; 0 lets the CO decide.
	MaxVolumesPerNode int64
	// ControllerOnly serves Identity and ControllerExpandVolume only, for
	// csi-resizer (controlleronly.go): no pools, no node, no Node service.
	ControllerOnly bool
	// Config is the pool runtime's part: the node, the pools and how they
	// are measured. The handlers read the node and the pools' settings.
	pools.Config
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

// Deps are the handlers' own side effects, injected so they are testable;
// the pools' are the runtime's (pools.Deps).
type Deps struct {
	Logger  *zap.Logger
	Metrics *Metrics
	// Binding, when set, lets CreateVolume refuse Immediate StorageClasses.
	Binding BindingModes
}

// Driver implements the CSI Identity, Controller and Node services.
type Driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	csi.UnimplementedNodeServer

	cfg   Config
	deps  Deps
	log   *zap.Logger
	pools *pools.Runtime
}

// New builds the handlers over the node's pool runtime (built from
// cfg.Config); it touches no disk.
func New(cfg Config, rt *pools.Runtime, deps Deps) (*Driver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rt == nil {
		return nil, errors.New("handlers.New: the pool runtime is required")
	}
	if deps.Logger == nil {
		deps.Logger = zap.NewNop()
	}
	if deps.Metrics == nil {
		deps.Metrics = NewMetrics()
	}
	return &Driver{cfg: cfg, deps: deps, log: deps.Logger, pools: rt}, nil
}

func (d *Driver) topology() *csi.Topology {
	return &csi.Topology{Segments: map[string]string{contract.TopologyKey: d.cfg.NodeID}}
}
