package driver

import (
	"errors"
	"time"

	"go.uber.org/zap"
)

// New builds a driver; it touches no disk until OpenPools. It stands apart
// from driver.go on purpose: New wires every part of the driver together
// (pools, locks, usage cache, the pool metrics collector), while the types
// in driver.go are what every part uses; together they would tie each file
// to each other.
func New(cfg Config, deps Deps) (*Driver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Mounter == nil || deps.Labeler == nil || deps.FS == nil {
		return nil, errors.New("driver.New: Mounter, Labeler and FS are required")
	}
	if deps.Logger == nil {
		deps.Logger = zap.NewNop()
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Metrics == nil {
		deps.Metrics = NewMetrics()
	}
	d := &Driver{cfg: cfg, deps: deps, log: deps.Logger, locks: newVolumeLocks()}
	d.stats = newUsageCache(deps.FS.Usage, deps.Now, cfg.StatsCacheTTL, cfg.StatsTimeout)
	for _, p := range cfg.Pools.All() {
		d.pools = append(d.pools, newPoolState(p))
	}
	deps.Metrics.registerPools(d)
	return d, nil
}
