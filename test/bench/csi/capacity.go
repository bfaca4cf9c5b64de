package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"

	"github.com/hostpath-provisioner/hpp/test/csitest"
)

// Capacity with many volumes: hpp-csi with --reservation-aware-capacity
// serves two tmpfs pools, one empty and one holding -capacity-volumes
// volumes; GetCapacity and CreateVolume (+ an untimed DeleteVolume) take
// turns on both in blocks, and their p50s are compared.

const capacityBlocks = 10

type capacityResult struct {
	Volumes          int     `json:"volumes"`
	EmptyGetCapacity series  `json:"emptyGetCapacity"`
	FullGetCapacity  series  `json:"fullGetCapacity"`
	EmptyCreate      series  `json:"emptyCreate"`
	FullCreate       series  `json:"fullCreate"`
	GetCapacityRatio float64 `json:"getCapacityP50Ratio"`
	CreateRatio      float64 `json:"createP50Ratio"`
	FilledInSeconds  float64 `json:"filledInSeconds"`
	RSSMiB           float64 `json:"rssMiB"`
}

func (b *bench) capacityWithManyVolumes(ctx context.Context, bin string) (capacityResult, error) {
	r := capacityResult{Volumes: b.o.capacityVolumes}
	dir := filepath.Join(b.work, "capacity")
	var pools []csitest.Pool
	for _, name := range []string{"empty", "full"} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return r, err
		}
		// Large enough for every volume's 1 MiB request to fit (tmpfs
		// takes memory only for what is written).
		if err := unix.Mount("tmpfs", p, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=64g,mode=0755"); err != nil {
			return r, fmt.Errorf("mount tmpfs pool: %w", err)
		}
		pools = append(pools, csitest.Pool{Name: name, Path: p})
	}
	d, err := csitest.Launch(bin, csitest.Config{NodeID: nodeID, Dir: dir, LogLevel: "info", Pools: pools, Extra: []string{"--reservation-aware-capacity"}})
	if err != nil {
		return r, err
	}
	defer func() {
		if err := d.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "bench-csi: stopping the capacity driver:", err)
		}
	}()
	c, err := csitest.Connect(d.Socket)
	if err != nil {
		return r, err
	}
	defer c.Close() //nolint:errcheck // benchmark client

	start := time.Now()
	if err := createVolumes(ctx, c, "full", r.Volumes); err != nil {
		return r, err
	}
	r.FilledInSeconds = round(time.Since(start).Seconds())

	lat := map[string][]time.Duration{}
	perBlock := max(1, b.o.ops/capacityBlocks)
	for blk := range capacityBlocks {
		for _, pool := range []string{"empty", "full"} {
			for i := range perBlock {
				t0 := time.Now()
				if _, err := c.GetCapacity(ctx, &csi.GetCapacityRequest{Parameters: csitest.PoolParams(pool), AccessibleTopology: csitest.Segment(nodeID)}); err != nil {
					return r, fmt.Errorf("GetCapacity: %w", err)
				}
				lat["cap-"+pool] = append(lat["cap-"+pool], time.Since(t0))
				name := fmt.Sprintf("bench-cap-%d-%d", blk, i)
				t0 = time.Now()
				if _, err := c.CreateVolume(ctx, csitest.CreateRequest(name, nodeID, 1<<20, csitest.PoolParams(pool))); err != nil {
					return r, fmt.Errorf("CreateVolume: %w", err)
				}
				lat["create-"+pool] = append(lat["create-"+pool], time.Since(t0))
				if _, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: name}); err != nil {
					return r, fmt.Errorf("DeleteVolume: %w", err)
				}
			}
		}
	}
	r.EmptyGetCapacity = summarize("GetCapacity, empty pool", lat["cap-empty"])
	r.FullGetCapacity = summarize(fmt.Sprintf("GetCapacity, %d volumes", r.Volumes), lat["cap-full"])
	r.EmptyCreate = summarize("CreateVolume, empty pool", lat["create-empty"])
	r.FullCreate = summarize(fmt.Sprintf("CreateVolume, %d volumes", r.Volumes), lat["create-full"])
	r.GetCapacityRatio = round(r.FullGetCapacity.P50Ms / r.EmptyGetCapacity.P50Ms)
	r.CreateRatio = round(r.FullCreate.P50Ms / r.EmptyCreate.P50Ms)
	m, err := procMemory(d.Pid())
	r.RSSMiB = m.RSSMiB
	return r, err
}

// createVolumes creates n volumes on pool with 8 concurrent callers.
func createVolumes(ctx context.Context, c *csitest.Client, pool string, n int) error {
	const callers = 8
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for w := range callers {
		wg.Go(func() {
			for i := w; i < n; i += callers {
				name := fmt.Sprintf("bench-fill-%05d", i)
				if _, err := c.CreateVolume(ctx, csitest.CreateRequest(name, nodeID, 1<<20, csitest.PoolParams(pool))); err != nil {
					errs <- fmt.Errorf("CreateVolume %s: %w", name, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}
