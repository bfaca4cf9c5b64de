package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/hostpath-provisioner/hpp/test/csitest"
)

// Durable creates against upstream's: hpp-csi and a baseline build of it
// (tag hpp_baseline: mkdir and RemoveAll, no record, no fsync, as the
// KubeVirt driver does) serve the same kind of pool on the same filesystem
// at the same time; create+delete pairs run at 1, 4 and 8 concurrent
// callers, the two drivers taking turns block by block (and a block of the
// disk's own rename+fsync between), so that both see the same noisy minutes
// of a shared machine.

// callerCounts are the concurrencies compared.
var callerCounts = []int{1, 4, 8}

// durabilityBlocks is how many blocks each (driver, callers) setting gets;
// -ops pairs are spread over them.
const durabilityBlocks = 6

type durabilityPool struct {
	Pool       string `json:"pool"`
	Filesystem string `json:"filesystem"`
	// DirFsync is the disk's own cost of one durable metadata step: rename
	// a directory, fsync its parent.
	DirFsync series          `json:"dirFsync"`
	Rows     []durabilityRow `json:"rows"`
	// TargetPairMs is two directory fsyncs plus 0.3 ms: what a single
	// caller's create+delete pair may take.
	TargetPairMs float64 `json:"targetSinglePairP50Ms"`
}

type durabilityRow struct {
	Callers int `json:"callers"`
	// Calls per second (creates and deletes), over the wall time of the
	// blocks.
	HPPPerSecond      float64 `json:"hppCallsPerSecond"`
	BaselinePerSecond float64 `json:"baselineCallsPerSecond"`
	Ratio             float64 `json:"ratio"`
	HPPPair           series  `json:"hppPair"`
	BaselinePair      series  `json:"baselinePair"`
}

// driverUnderTest is one driver and the pool it serves on a filesystem.
type driverUnderTest struct {
	c    *csitest.Client
	pool string // pool name in the driver's --datadir
	root string // its volumes directory (for settling)
	name string
}

func (b *bench) compareDurability(ctx context.Context, pool string, hpp, base driverUnderTest) (durabilityPool, error) {
	res := durabilityPool{Pool: pool, Filesystem: fsName(b.pools[pool])}
	fsyncStep, done, err := b.durableRenameStep(pool)
	if err != nil {
		return res, err
	}
	defer done()
	var fsyncLat []time.Duration
	perBlock := max(1, b.o.ops/durabilityBlocks)
	type acc struct {
		wall time.Duration
		pair []time.Duration
	}
	totals := map[string]*acc{}
	for _, d := range []driverUnderTest{hpp, base} {
		for _, c := range callerCounts {
			totals[fmt.Sprint(d.name, c)] = &acc{}
		}
		// Warm up each driver's path (first calls open files, grow maps).
		if _, _, err := b.pairBlock(ctx, d, 1, warmup, "warm"); err != nil {
			return res, err
		}
	}
	deadline := time.Now().Add(b.o.maxTime)
	for blk := 0; blk < durabilityBlocks && time.Now().Before(deadline); blk++ {
		order := []driverUnderTest{hpp, base}
		if blk%2 == 1 {
			order[0], order[1] = base, hpp
		}
		for _, c := range callerCounts {
			for _, d := range order {
				wall, lat, err := b.pairBlock(ctx, d, c, perBlock, fmt.Sprint("b", blk))
				if err != nil {
					return res, err
				}
				a := totals[fmt.Sprint(d.name, c)]
				a.wall += wall
				a.pair = append(a.pair, lat...)
				if err := b.settleDir(ctx, d.root); err != nil {
					return res, err
				}
			}
		}
		for i := range 50 {
			lat, err := fsyncStep(blk*100 + i)
			if err != nil {
				return res, err
			}
			fsyncLat = append(fsyncLat, lat[0])
		}
	}
	res.DirFsync = summarize("dir rename+fsync", fsyncLat)
	res.DirFsync.Pool, res.DirFsync.Filesystem = pool, res.Filesystem
	res.TargetPairMs = round(2*res.DirFsync.P50Ms + 0.3)
	for _, c := range callerCounts {
		h, bl := totals[fmt.Sprint(hpp.name, c)], totals[fmt.Sprint(base.name, c)]
		row := durabilityRow{Callers: c,
			HPPPerSecond:      round(float64(2*len(h.pair)) / h.wall.Seconds()),
			BaselinePerSecond: round(float64(2*len(bl.pair)) / bl.wall.Seconds()),
			HPPPair:           summarize(fmt.Sprintf("hpp create+delete, %d callers", c), h.pair),
			BaselinePair:      summarize(fmt.Sprintf("baseline create+delete, %d callers", c), bl.pair),
		}
		if row.BaselinePerSecond > 0 {
			row.Ratio = round(row.HPPPerSecond / row.BaselinePerSecond)
		}
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

// pairBlock runs n create+delete pairs on d with callers concurrent
// callers, each on its own volume names, and returns the wall time of the
// block and each pair's latency.
func (b *bench) pairBlock(ctx context.Context, d driverUnderTest, callers, n int, tag string) (time.Duration, []time.Duration, error) {
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for w := range callers {
		wg.Go(func() {
			for i := w; i < n; i += callers {
				name := fmt.Sprintf("bench-%s-%s-%d-%d", d.name, tag, callers, i)
				t0 := time.Now()
				_, err := d.c.CreateVolume(ctx, csitest.CreateRequest(name, nodeID, 1<<20, csitest.PoolParams(d.pool)))
				if err == nil {
					_, err = d.c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: name})
				}
				took := time.Since(t0)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("%s: create+delete %s: %w", d.name, name, err)
				}
				lat = append(lat, took)
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start), lat, firstErr
}

// settleDir waits until root's trash is empty, so that a block does not pay
// for the previous block's background purge.
func (b *bench) settleDir(ctx context.Context, root string) error {
	trash := root + "/" + csitest.TrashDir
	for start := time.Now(); ; {
		entries, err := os.ReadDir(trash)
		if os.IsNotExist(err) {
			return nil // the baseline keeps no trash
		}
		if err != nil {
			return err
		}
		if len(entries) == 0 {
			return nil
		}
		if time.Since(start) > time.Minute {
			return fmt.Errorf("%d entries still in %s after a minute", len(entries), trash)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}
