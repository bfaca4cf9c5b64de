package pools

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostpath-provisioner/hpp/internal/capacity"
	"github.com/hostpath-provisioner/hpp/internal/treecopy"
)

var (
	poolCapacityDesc  = prometheus.NewDesc("hpp_pool_capacity_bytes", "Size of the pool's filesystem.", []string{"pool"}, nil)
	poolUsedDesc      = prometheus.NewDesc("hpp_pool_used_bytes", "Bytes used on the pool's filesystem.", []string{"pool"}, nil)
	poolAvailableDesc = prometheus.NewDesc("hpp_pool_available_bytes", "Bytes offered to new volumes: free space minus the reserved headroom.", []string{"pool"}, nil)
	poolFreeDesc      = prometheus.NewDesc("hpp_pool_free_bytes", "Free bytes on the pool's filesystem (as seen by non-root).", []string{"pool"}, nil)
	poolSharesOSDesc  = prometheus.NewDesc("hpp_pool_shares_os_filesystem", "1 when the pool lives on the same filesystem as the node's root filesystem.", []string{"pool"}, nil)
	poolHealthyDesc   = prometheus.NewDesc("hpp_pool_healthy", "1 when the pool has no known problem.", []string{"pool"}, nil)
	// The KubeVirt driver's metric, under its name: its alert
	// HPPSharingPoolPathWithOS and users' dashboards read it.
	poolCacheBytesDesc       = prometheus.NewDesc("hpp_pool_clone_cache_bytes", "Bytes held by the pool's clone cache (copies of sources fetched from other nodes; on the pool's disk, so counted as used).", []string{"pool"}, nil)
	poolCacheLimitDesc       = prometheus.NewDesc("hpp_pool_clone_cache_limit_bytes", "The most the pool's clone cache may hold (cacheBytes, or its default).", []string{"pool"}, nil)
	upstreamSharedWithOSDesc = prometheus.NewDesc("kubevirt_hpp_pool_path_shared_with_os",
		"HPP pool path sharing a filesystem with OS, fix to prevent HPP PVs from causing disk pressure and affecting node operation", nil, nil)
)

// registerMetrics adds the pool figures to reg: the copy mode probed at
// open, and the rest read at scrape time.
func (rt *Runtime) registerMetrics(reg prometheus.Registerer) error {
	rt.reflink = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hpp_pool_reflink", Help: "1 when clones and snapshots in the pool share data by reflink, 0 when they copy it (probed when the pool is opened).",
	}, []string{"pool"})
	rt.remoteBytes = poolCounter("hpp_pool_remote_copy_received_bytes_total", "Bytes of treecopy stream received from other nodes for clones and restores whose source is there.")
	rt.remoteResults = poolCounter("hpp_pool_remote_copies_total", "Clones and restores copied from other nodes, by result (succeeded, canceled, or the failure: not_found, unavailable, denied, invalid, no_room, failed).", "result")
	rt.cacheHits = poolCounter("hpp_pool_clone_cache_hits_total", "Clones and restores whose source is on another node filled from the pool's clone cache, with no data sent.")
	rt.cacheMisses = poolCounter("hpp_pool_clone_cache_misses_total", "Clones and restores whose source is on another node fetched over the network by a pool with a clone cache.")
	rt.cacheEvictions = poolCounter("hpp_pool_clone_cache_evictions_total", "Clone cache entries removed to stay within the limit or to make room for a volume.")
	for _, c := range []prometheus.Collector{rt.reflink, rt.remoteBytes, rt.remoteResults, rt.cacheHits, rt.cacheMisses, rt.cacheEvictions, &poolCollector{rt: rt}} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// poolCounter is a counter by pool and by the further labels, as the
// pools' copy figures are.
func poolCounter(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, append([]string{"pool"}, labels...))
}

func (rt *Runtime) setCopyMode(pool string, mode treecopy.Mode) {
	v := 0.0
	if mode == treecopy.Reflink {
		v = 1
	}
	rt.reflink.WithLabelValues(pool).Set(v)
}

// poolCollector reads pool figures at scrape time: statfs is cheap, and a
// cached figure would hide a pool filling up between scrapes.
type poolCollector struct{ rt *Runtime }

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolCapacityDesc, poolUsedDesc, poolAvailableDesc, poolFreeDesc, poolSharesOSDesc, poolHealthyDesc, poolCacheBytesDesc, poolCacheLimitDesc, upstreamSharedWithOSDesc} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	anyShares, known := 0.0, false
	for _, p := range c.rt.pools {
		healthy := 1.0
		if len(c.rt.rootProblems(p, p.own)) > 0 {
			healthy = 0
		}
		ch <- prometheus.MustNewConstMetric(poolHealthyDesc, prometheus.GaugeValue, healthy, p.name())
		if cache := p.cloneCache(); cache != nil {
			ch <- prometheus.MustNewConstMetric(poolCacheBytesDesc, prometheus.GaugeValue, float64(cache.Bytes()), p.name())
			ch <- prometheus.MustNewConstMetric(poolCacheLimitDesc, prometheus.GaugeValue, float64(cache.Limit()), p.name())
		}
		st, err := c.rt.deps.FS.Statfs(p.cfg.Path)
		if err != nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(poolCapacityDesc, prometheus.GaugeValue, float64(st.TotalBytes), p.name())
		ch <- prometheus.MustNewConstMetric(poolUsedDesc, prometheus.GaugeValue, float64(st.UsedBytes), p.name())
		ch <- prometheus.MustNewConstMetric(poolFreeDesc, prometheus.GaugeValue, float64(st.AvailableBytes), p.name())
		ch <- prometheus.MustNewConstMetric(poolAvailableDesc, prometheus.GaugeValue, float64(capacity.Offered(st, p.headroom)), p.name())
		if shares, err := c.rt.sharesHostRoot(p); err == nil {
			v := 0.0
			if shares {
				v, anyShares = 1, 1
			}
			known = true
			ch <- prometheus.MustNewConstMetric(poolSharesOSDesc, prometheus.GaugeValue, v, p.name())
		}
	}
	if known {
		// One figure for the node, as the KubeVirt driver reports it: 1
		// when any pool shares the OS filesystem.
		ch <- prometheus.MustNewConstMetric(upstreamSharedWithOSDesc, prometheus.GaugeValue, anyShares)
	}
}

// sharesHostRoot reports whether the pool is on the host's root filesystem,
// by device id against Config.HostRootRef (bind mounts of one filesystem
// count as the same). A shared pool is on network storage by definition.
func (rt *Runtime) sharesHostRoot(p *poolState) (bool, error) {
	if rt.cfg.HostRootRef == "" {
		return false, errors.New("no host root reference configured")
	}
	ref, err := rt.deps.FS.DeviceOf(rt.cfg.HostRootRef)
	if err != nil {
		return false, err
	}
	dev, err := rt.deps.FS.DeviceOf(p.cfg.Path)
	if err != nil {
		return false, err
	}
	return dev == ref, nil
}
