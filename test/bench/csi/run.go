package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"

	"github.com/hostpath-provisioner/hpp/test/csitest"
)

const (
	nodeID    = "bench-node"
	diskPool  = "disk" // the work directory's own filesystem, as it is
	tmpfsPool = "tmpfs"
	xfsPool   = "xfs-loop" // XFS on a loop device over the work directory's disk
	warmup    = 20
	// Targets from the hpp-csi issues; reported, never asserted.
	targetIdleRSSMiB    = 22
	targetCachedStatsMs = 1
	targetDurableRatio  = 1.0 // hpp / baseline calls per second at 4 and 8 callers
	targetCapacityRatio = 1.2 // p50 with many volumes / p50 on an empty pool
)

type result struct {
	Command          string           `json:"command"`
	Host             hostInfo         `json:"host"`
	Durability       []durabilityPool `json:"durability"`
	Capacity         capacityResult   `json:"capacity"`
	PublishUnpublish []series         `json:"publishUnpublish"`
	VolumeStats      statsResult      `json:"volumeStats"`
	IdleRSS          rssResult        `json:"idleRSS"`
	Targets          []target         `json:"targets"`
}

type hostInfo struct {
	CPUs      int    `json:"cpus"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"goVersion"`
	DiskFS    string `json:"diskPoolFilesystem"`
	// The machine may be shared: its load average at the start and the
	// end says how much the figures were disturbed.
	LoadAvgStart string `json:"loadAverageStart"`
	LoadAvgEnd   string `json:"loadAverageEnd"`
	// Percent of CPU time the hypervisor took during the run (-1: unknown).
	StealPercent float64 `json:"cpuStealPercent"`
}

type statsResult struct {
	Files       int     `json:"files"`
	Directories int     `json:"directories"`
	InodesSeen  int64   `json:"inodesReported"`
	FirstCallMs float64 `json:"firstCallMs"`
	Cached      series  `json:"cached"`
}

type target struct {
	What     string  `json:"what"`
	Limit    float64 `json:"limit"`
	Unit     string  `json:"unit"`
	Measured float64 `json:"measured"`
	Met      bool    `json:"met"`
	AtLeast  bool    `json:"atLeast,omitempty"` // the limit is a floor, not a ceiling
}

// bench holds what the scenarios share.
type bench struct {
	o     options
	work  string
	pools map[string]string // name -> path
	// loopDev backs the XFS pool; "" when there is none.
	loopDev string
	// xfsSkipped says why there is no XFS pool ("" when there is one).
	xfsSkipped string
	d          *csitest.Driver
	c          *csitest.Client
	// base is the baseline build (see durability.go), serving a pool
	// beside each disk-backed pool of d.
	base  *csitest.Driver
	baseC *csitest.Client
}

func run(ctx context.Context, o options) (*result, error) {
	bin, err := csitest.BuildBinary()
	if err != nil {
		return nil, err
	}
	baseBin, err := csitest.BuildBaselineBinary()
	if err != nil {
		return nil, err
	}
	b := &bench{o: o, pools: map[string]string{}}
	if b.work, err = os.MkdirTemp(o.workDir, "hpp-csi-bench-"); err != nil {
		return nil, err
	}
	defer b.cleanup()
	if err := b.setupPools(); err != nil {
		return nil, err
	}
	if b.xfsSkipped, err = b.setupXFSPool(ctx); err != nil {
		return nil, fmt.Errorf("set up the XFS pool: %w", err)
	}
	pools := []csitest.Pool{{Name: diskPool, Path: b.pools[diskPool]}, {Name: tmpfsPool, Path: b.pools[tmpfsPool]}}
	if b.xfsSkipped == "" {
		pools = append(pools, csitest.Pool{Name: xfsPool, Path: b.pools[xfsPool]})
	} else {
		fmt.Fprintln(os.Stderr, "bench-csi: no XFS pool:", b.xfsSkipped)
	}
	b.d, err = csitest.Launch(bin, csitest.Config{NodeID: nodeID, Dir: b.work, LogLevel: "info", Pools: pools})
	if err != nil {
		return nil, err
	}
	if b.c, err = csitest.Connect(b.d.Socket); err != nil {
		return nil, err
	}
	if err := b.launchBaseline(baseBin); err != nil {
		return nil, err
	}

	res := &result{Command: "cd test && go run ./bench/csi " + strings.Join(os.Args[1:], " "), Host: b.host()}
	startCPU, startOK := readCPUTimes()
	fmt.Fprintln(os.Stderr, "bench-csi: measuring idle RSS with no volumes")
	if res.IdleRSS.NoVolumes, err = b.idleRSS(ctx); err != nil {
		return nil, err
	}
	for _, pool := range []string{diskPool, xfsPool} {
		if _, ok := b.pools[pool]; !ok {
			continue
		}
		fmt.Fprintf(os.Stderr, "bench-csi: durable CreateVolume+DeleteVolume against the baseline on the %s pool\n", pool)
		r, err := b.compareDurability(ctx, pool,
			driverUnderTest{c: b.c, pool: pool, root: filepath.Join(b.pools[pool], csitest.VolumesSubdir), name: "hpp"},
			driverUnderTest{c: b.baseC, pool: pool, root: filepath.Join(b.pools[pool]+baseSuffix, csitest.VolumesSubdir), name: "baseline"})
		if err != nil {
			return nil, err
		}
		res.Durability = append(res.Durability, r)
	}
	if o.durableOnly {
		return b.finish(res, startCPU, startOK), nil
	}
	fmt.Fprintf(os.Stderr, "bench-csi: GetCapacity and CreateVolume with %d volumes against an empty pool\n", o.capacityVolumes)
	if res.Capacity, err = b.capacityWithManyVolumes(ctx, bin); err != nil {
		return nil, err
	}
	fmt.Fprintln(os.Stderr, "bench-csi: NodePublishVolume+NodeUnpublishVolume")
	if res.PublishUnpublish, err = b.publishUnpublish(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "bench-csi: NodeGetVolumeStats on %d files\n", o.files)
	if res.VolumeStats, err = b.volumeStats(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "bench-csi: idle RSS with %d volumes\n", o.volumes)
	if res.IdleRSS, err = b.rssWithVolumes(ctx, res.IdleRSS); err != nil {
		return nil, err
	}
	return b.finish(res, startCPU, startOK), nil
}

// finish fills what is measured at the end of a run: targets, load, steal.
func (b *bench) finish(res *result, startCPU cpuTimes, startOK bool) *result {
	res.Targets = targets(res)
	res.Host.LoadAvgEnd = loadAvg()
	end, endOK := readCPUTimes()
	res.Host.StealPercent = stealPercent(startCPU, end, startOK && endOK)
	return res
}

// baseSuffix names the baseline driver's pool directory beside hpp's, on
// the same filesystem.
const baseSuffix = "-baseline"

// launchBaseline starts the baseline build on a pool beside each
// disk-backed pool of hpp's, under the same names.
func (b *bench) launchBaseline(bin string) error {
	dir := filepath.Join(b.work, "baseline")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	var pools []csitest.Pool
	for _, pool := range []string{diskPool, xfsPool} {
		if p, ok := b.pools[pool]; ok {
			if err := os.Mkdir(p+baseSuffix, 0o755); err != nil && !os.IsExist(err) {
				return err
			}
			pools = append(pools, csitest.Pool{Name: pool, Path: p + baseSuffix})
		}
	}
	var err error
	if b.base, err = csitest.Launch(bin, csitest.Config{NodeID: nodeID, Dir: dir, LogLevel: "info", Pools: pools}); err != nil {
		return fmt.Errorf("baseline driver: %w", err)
	}
	b.baseC, err = csitest.Connect(b.base.Socket)
	return err
}

func (b *bench) setupPools() error {
	b.pools[diskPool] = filepath.Join(b.work, "disk-pool")
	b.pools[tmpfsPool] = filepath.Join(b.work, "tmpfs-pool")
	for _, p := range b.pools {
		if err := os.Mkdir(p, 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount("tmpfs", b.pools[tmpfsPool], "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=1g,mode=0755"); err != nil {
		return fmt.Errorf("mount tmpfs pool: %w", err)
	}
	return nil
}

// cleanup stops the driver and removes everything the run made, unmounting
// first so nothing is removed through a mount.
func (b *bench) cleanup() {
	if b.c != nil {
		_ = b.c.Close()
	}
	if b.baseC != nil {
		_ = b.baseC.Close()
	}
	if b.base != nil {
		if err := b.base.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "bench-csi: stopping the baseline:", err)
		}
	}
	if b.d != nil {
		if err := b.d.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "bench-csi: stopping hpp-csi:", err)
		}
	}
	mounts, err := csitest.Mounts()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-csi: cleanup:", err)
		return
	}
	// Deepest first: targets, then the tmpfs pool.
	for i := len(mounts) - 1; i >= 0; i-- {
		if strings.HasPrefix(mounts[i].MountPoint, b.work+"/") {
			if err := unix.Unmount(mounts[i].MountPoint, unix.MNT_DETACH); err != nil {
				fmt.Fprintln(os.Stderr, "bench-csi: cleanup: unmount", mounts[i].MountPoint, err)
				return
			}
		}
	}
	b.detachLoop()
	if err := os.RemoveAll(b.work); err != nil {
		fmt.Fprintln(os.Stderr, "bench-csi: cleanup:", err)
	}
}

func (b *bench) host() hostInfo {
	h := hostInfo{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), DiskFS: fsName(b.pools[diskPool]), LoadAvgStart: loadAvg()}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		h.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	return h
}

// loadAvg is the 1, 5 and 15 minute load average.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(data))[:3], " ")
}

func fsName(path string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return "unknown"
	}
	switch st.Type {
	case unix.EXT4_SUPER_MAGIC:
		return "ext4"
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlay"
	}
	return fmt.Sprintf("0x%x", st.Type)
}

// roundStep is one timed step of a benchmark round; it returns one or more
// latencies, always the same number.
type roundStep func(i int) ([]time.Duration, error)

// timed runs step, which returns width latencies, until n results or
// maxTime, after its warm-up.
func (b *bench) timed(ctx context.Context, n, width int, step roundStep) ([][]time.Duration, error) {
	r := &roundSeries{width: width, step: step}
	if err := r.warmUp(); err != nil {
		return nil, err
	}
	err := runPhase(ctx, []*roundSeries{r}, map[*roundSeries]int{r: n}, time.Now().Add(b.o.maxTime))
	return r.lat, err
}

// pairStep times first then second: as one round trip and each on its own.
func pairStep(first, second func(i int) error) roundStep {
	return func(i int) ([]time.Duration, error) {
		t0 := time.Now()
		if err := first(i); err != nil {
			return nil, err
		}
		t1 := time.Now()
		if err := second(i); err != nil {
			return nil, err
		}
		t2 := time.Now()
		return []time.Duration{t2.Sub(t0), t1.Sub(t0), t2.Sub(t1)}, nil
	}
}

// pairSeries labels the three series of a pairStep with pool and its
// filesystem.
func (b *bench) pairSeries(pool, firstName, secondName string, lat [][]time.Duration) []series {
	fs := fsName(b.pools[pool])
	out := []series{summarize(firstName+"+"+secondName, lat[0]), summarize(firstName, lat[1]), summarize(secondName, lat[2])}
	for i := range out {
		out[i].Pool, out[i].Filesystem = pool, fs
	}
	return out
}

func (b *bench) publishUnpublish(ctx context.Context) ([]series, error) {
	vol, err := b.c.CreateVolume(ctx, createReq("bench-publish", diskPool, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("CreateVolume: %w", err)
	}
	targets := filepath.Join(b.work, "targets")
	if err := os.Mkdir(targets, 0o750); err != nil {
		return nil, err
	}
	// A fresh target each time, as kubelet gives each pod its own.
	target := func(i int) string { return filepath.Join(targets, fmt.Sprintf("pod-%d", i)) }
	lat, err := b.timed(ctx, b.o.publishOps, 3, pairStep(
		func(i int) error {
			if _, err := b.c.NodePublishVolume(ctx, csitest.PublishRequest("bench-publish", target(i), vol.GetVolume().GetVolumeContext())); err != nil {
				return fmt.Errorf("NodePublishVolume: %w", err)
			}
			return nil
		},
		func(i int) error {
			if _, err := b.c.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "bench-publish", TargetPath: target(i)}); err != nil {
				return fmt.Errorf("NodeUnpublishVolume: %w", err)
			}
			return nil
		}))
	if err != nil {
		return nil, err
	}
	return b.pairSeries(diskPool, "publish", "unpublish", lat), nil
}

// filesPerDir spreads the stats volume's files over directories, as real
// volumes have them.
const filesPerDir = 1000

func (b *bench) volumeStats(ctx context.Context) (statsResult, error) {
	r := statsResult{Files: b.o.files}
	vol, err := b.c.CreateVolume(ctx, createReq("bench-stats", diskPool, 1<<30))
	if err != nil {
		return r, fmt.Errorf("CreateVolume: %w", err)
	}
	dir := filepath.Join(b.pools[diskPool], "csi", "bench-stats")
	for i := 0; i < b.o.files; i++ {
		sub := filepath.Join(dir, fmt.Sprintf("d%03d", i/filesPerDir))
		if i%filesPerDir == 0 {
			if err := os.Mkdir(sub, 0o755); err != nil {
				return r, err
			}
			r.Directories++
		}
		fd, err := unix.Open(filepath.Join(sub, fmt.Sprintf("f%d", i)), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return r, err
		}
		_ = unix.Close(fd)
	}
	target := filepath.Join(b.work, "stats-target")
	if _, err := b.c.NodePublishVolume(ctx, csitest.PublishRequest("bench-stats", target, vol.GetVolume().GetVolumeContext())); err != nil {
		return r, fmt.Errorf("NodePublishVolume: %w", err)
	}
	defer func() {
		_, _ = b.c.NodeUnpublishVolume(context.WithoutCancel(ctx), &csi.NodeUnpublishVolumeRequest{VolumeId: "bench-stats", TargetPath: target})
	}()
	req := &csi.NodeGetVolumeStatsRequest{VolumeId: "bench-stats", VolumePath: target}
	t0 := time.Now()
	resp, err := b.c.NodeGetVolumeStats(ctx, req)
	if err != nil {
		return r, fmt.Errorf("NodeGetVolumeStats: %w", err)
	}
	r.FirstCallMs = ms(time.Since(t0))
	for _, u := range resp.GetUsage() {
		if u.GetUnit() == csi.VolumeUsage_INODES {
			r.InodesSeen = u.GetUsed()
		}
	}
	if want := int64(b.o.files + r.Directories + 1); r.InodesSeen != want {
		return r, fmt.Errorf("NodeGetVolumeStats reported %d inodes; the volume has %d", r.InodesSeen, want)
	}
	var lat []time.Duration
	for range b.o.statsCalls {
		t0 := time.Now()
		if _, err := b.c.NodeGetVolumeStats(ctx, req); err != nil {
			return r, fmt.Errorf("NodeGetVolumeStats: %w", err)
		}
		lat = append(lat, time.Since(t0))
	}
	r.Cached = summarize("NodeGetVolumeStats (cached)", lat)
	return r, nil
}

func targets(r *result) []target {
	var out []target
	for _, p := range r.Durability {
		for _, row := range p.Rows {
			if row.Callers == 1 {
				out = append(out, target{What: fmt.Sprintf("1 caller: create+delete p50, %s pool (%s), <= 2 dir fsyncs + 0.3 ms", p.Pool, p.Filesystem),
					Limit: p.TargetPairMs, Unit: "ms", Measured: row.HPPPair.P50Ms, Met: row.HPPPair.P50Ms <= p.TargetPairMs})
				continue
			}
			out = append(out, target{What: fmt.Sprintf("%d callers: hpp / baseline calls per second, %s pool (%s)", row.Callers, p.Pool, p.Filesystem),
				Limit: targetDurableRatio, Unit: "x", Measured: row.Ratio, Met: row.Ratio >= targetDurableRatio, AtLeast: true})
		}
	}
	if r.Capacity.Volumes == 0 {
		return out // -durable-only: nothing else was measured
	}
	c := r.Capacity
	out = append(out,
		target{What: fmt.Sprintf("GetCapacity p50, %d volumes / empty pool", c.Volumes), Limit: targetCapacityRatio, Unit: "x", Measured: c.GetCapacityRatio, Met: c.GetCapacityRatio <= targetCapacityRatio},
		target{What: fmt.Sprintf("CreateVolume p50, %d volumes / empty pool", c.Volumes), Limit: targetCapacityRatio, Unit: "x", Measured: c.CreateRatio, Met: c.CreateRatio <= targetCapacityRatio},
		target{What: fmt.Sprintf("idle RSS with %d volumes", r.IdleRSS.Volumes), Limit: targetIdleRSSMiB, Unit: "MiB", Measured: r.IdleRSS.worst(), Met: r.IdleRSS.worst() <= targetIdleRSSMiB},
		target{What: fmt.Sprintf("cached NodeGetVolumeStats p99, %d files", r.VolumeStats.Files), Limit: targetCachedStatsMs, Unit: "ms", Measured: r.VolumeStats.Cached.P99Ms, Met: r.VolumeStats.Cached.P99Ms < targetCachedStatsMs},
	)
	return out
}

func createReq(name, pool string, size int64) *csi.CreateVolumeRequest {
	return csitest.CreateRequest(name, nodeID, size, csitest.PoolParams(pool))
}
