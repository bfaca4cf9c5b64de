package main

import (
	"encoding/json"
	"fmt"
	"time"
)

type report struct {
	Machine    string    `json:"machine"`
	K8sVersion string    `json:"k8s_version"`
	StartedAt  time.Time `json:"started_at"`
	N          int       `json:"n"`
	DataMiB    int       `json:"data_mib"`
	// PoolFS: the real node's pool for the N clones (-pool-fs).
	PoolFS string `json:"pool_fs"`
	// AllocatedBytes: what the golden image's tree holds on disk.
	AllocatedBytes int64 `json:"allocated_bytes"`
	// BoundSeconds: from the first create to all N clones Bound;
	// ReadSeconds: to every pod having read its copy back.
	BoundSeconds float64 `json:"bound_seconds"`
	ReadSeconds  float64 `json:"read_seconds"`
	ReadBack     int     `json:"pods_read_the_source_bytes"`
	// One clone alone into the fast pool, before the N (the machine
	// quiet), against tar of the same tree into the same pool.
	AloneDataBytes int64     `json:"alone_data_bytes"`
	AloneRuns      []float64 `json:"alone_runs_seconds"`
	AloneSeconds   float64   `json:"alone_seconds"`
	AloneMiBps     float64   `json:"alone_mib_per_second"`
	TarRuns        []float64 `json:"tar_runs_seconds"`
	TarSeconds     float64   `json:"tar_seconds"`
	TarMiBps       float64   `json:"tar_mib_per_second"`
	RatioToTar     float64   `json:"alone_ratio_to_tar"`
	// The N clones' transfers over the network, from the real node's
	// hpp-csi log: the first is the cache fill, amid the N creates.
	Transfers       int     `json:"transfers"`
	FirstDataBytes  int64   `json:"first_transfer_data_bytes"`
	FirstStream     int64   `json:"first_transfer_stream_bytes"`
	FirstSeconds    float64 `json:"first_transfer_seconds"`
	FirstMiBps      float64 `json:"first_transfer_mib_per_second"`
	FirstRatioToTar float64 `json:"first_transfer_ratio_to_tar"`
	FilledFromCache int     `json:"filled_from_cache"`
	// CreateVolume calls of the N answered with a retry, by reason.
	RetriesBusySource  int `json:"retries_source_busy"`
	RetriesWaitingFill int `json:"retries_waiting_for_cache_fill"`
	RetriesCopying     int `json:"retries_copying"`
	OtherRefusals      int `json:"other_refusals"`
	// BoundP50Seconds: when half the N were Bound.
	BoundP50Seconds float64 `json:"bound_p50_seconds"`
	// From the nodes' metrics: the golden node's sender and the real
	// node's receiver and cache.
	SentBytes      int64 `json:"sent_bytes"`
	SentAfterFirst int64 `json:"sent_bytes_clones_2_to_n"`
	Served         int   `json:"requests_served"`
	NotModified    int   `json:"requests_not_modified"`
	ReceivedBytes  int64 `json:"received_bytes"`
	CacheHits      int   `json:"cache_hits"`
	CacheMisses    int   `json:"cache_misses"`
}

// counters records the metrics' differences.
func (r *report) counters(before, after counters) {
	r.SentBytes = int64(after.sent - before.sent)
	r.Served = int(after.served - before.served)
	r.NotModified = int(after.notModified - before.notModified)
	r.ReceivedBytes = int64(after.received - before.received)
	r.CacheHits = int(after.hits - before.hits)
	r.CacheMisses = int(after.misses - before.misses)
}

// transfers records the first transfer's figures; the bytes sent for
// clones 2 to N are what the golden node sent beyond that first stream.
func (r *report) transfers(c copyLogs) {
	r.Transfers, r.FilledFromCache = len(c.transfers), c.fromCache
	r.RetriesBusySource, r.RetriesWaitingFill, r.RetriesCopying, r.OtherRefusals = c.busySource, c.waitingFill, c.pending, c.otherRefusals
	r.TarMiBps = mibps(r.AllocatedBytes, r.TarSeconds)
	r.AloneMiBps = mibps(r.AloneDataBytes, r.AloneSeconds)
	if r.TarMiBps > 0 {
		r.RatioToTar = r.AloneMiBps / r.TarMiBps
	}
	r.SentAfterFirst = r.SentBytes
	if len(c.transfers) == 0 {
		return
	}
	first := c.transfers[0]
	r.FirstDataBytes, r.FirstStream, r.FirstSeconds = first.DataBytes, first.StreamBytes, first.Took
	r.FirstMiBps = mibps(first.DataBytes, first.Took)
	if r.TarMiBps > 0 {
		r.FirstRatioToTar = r.FirstMiBps / r.TarMiBps
	}
	r.SentAfterFirst = r.SentBytes - first.StreamBytes
}

func mibps(bytes int64, seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return float64(bytes) / (1 << 20) / seconds
}

func (r report) print() {
	fmt.Printf("\nCross-node clones: %d claims from one golden image on another node (simulated, its own hpp-csi), pods on the real node, pool %s; %s, Kubernetes %s\n",
		r.N, r.PoolFS, r.Machine, r.K8sVersion)
	fmt.Printf("golden image: 1 GiB sparse disk.img with %d MiB written, small files, links, an xattr: %.1f MiB allocated\n\n",
		r.DataMiB, float64(r.AllocatedBytes)/(1<<20))
	fmt.Printf("%-52s %s\n", "figure", "value")
	row := func(name, format string, args ...any) {
		fmt.Printf("%-52s "+format+"\n", append([]any{name}, args...)...)
	}
	row(fmt.Sprintf("half of the %d clones Bound (s)", r.N), "%.1f", r.BoundP50Seconds)
	row(fmt.Sprintf("all %d clones Bound (s)", r.N), "%.1f", r.BoundSeconds)
	row(fmt.Sprintf("all %d pods read their copy back (s)", r.N), "%.1f", r.ReadSeconds)
	row("pods that read the source's bytes", "%d of %d", r.ReadBack, r.N)
	row("transfers over the network (real node's log)", "%d", r.Transfers)
	row("clones filled from the clone cache", "%d", r.FilledFromCache)
	row("first transfer amid the N: MiB / s (MiB/s)", "%.1f / %.2f (%.0f)", float64(r.FirstDataBytes)/(1<<20), r.FirstSeconds, r.FirstMiBps)
	row("first transfer amid the N / tar", "%.2fx", r.FirstRatioToTar)
	row("one clone alone: MiB / s (MiB/s)", "%.1f / %.2f (%.0f; median of %s s)", float64(r.AloneDataBytes)/(1<<20), r.AloneSeconds, r.AloneMiBps, secs(r.AloneRuns))
	row("tar | tar, same tree and directories (MiB/s)", "%.0f (median %.2f s of %s s)", r.TarMiBps, r.TarSeconds, secs(r.TarRuns))
	row("one clone alone / tar", "%.2fx", r.RatioToTar)
	row("CreateVolume retries: source busy / waiting for fill / copying / other", "%d / %d / %d / %d",
		r.RetriesBusySource, r.RetriesWaitingFill, r.RetriesCopying, r.OtherRefusals)
	row("golden node sent, all clones (bytes)", "%d", r.SentBytes)
	row(fmt.Sprintf("golden node sent for clones 2 to %d (bytes)", r.N), "%d", r.SentAfterFirst)
	row("golden node requests served / not modified", "%d / %d", r.Served, r.NotModified)
	row("real node received (bytes)", "%d", r.ReceivedBytes)
	row("real node clone cache hits / misses", "%d / %d", r.CacheHits, r.CacheMisses)
	out, _ := json.MarshalIndent(r, "", "  ")
	fmt.Printf("\n%s\n", out)
}

// secs writes seconds to the hundredth.
func secs(v []float64) string {
	out := ""
	for i, s := range v {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%.2f", s)
	}
	return out
}
