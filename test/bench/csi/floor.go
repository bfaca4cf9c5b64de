package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
)

// The two reference series below split a create+delete figure into what no
// driver can avoid: the gRPC round trips over this machine's unix socket,
// and one durable metadata step on the pool's filesystem (a create or a
// delete each costs one on a journaling filesystem). rounds.go runs them
// interleaved with the create+delete pairs.

// noopStep times two GetPluginInfo calls back to back: the transport's share
// of a CreateVolume+DeleteVolume pair.
func (b *bench) noopStep(ctx context.Context) roundStep {
	return func(int) ([]time.Duration, error) {
		t0 := time.Now()
		for range 2 {
			if _, err := b.c.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{}); err != nil {
				return nil, fmt.Errorf("GetPluginInfo: %w", err)
			}
		}
		return []time.Duration{time.Since(t0)}, nil
	}
}

// durableRenameStep times, on pool's filesystem and outside hpp, the
// cheapest step that survives a power loss: rename a directory, fsync its
// parent. done removes what the steps made.
func (b *bench) durableRenameStep(pool string) (step roundStep, done func(), err error) {
	dir := filepath.Join(b.pools[pool], "bench-fsync")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, nil, err
	}
	done = func() {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintln(os.Stderr, "bench-csi: cleanup:", err)
		}
	}
	step = func(i int) ([]time.Duration, error) {
		from, to := filepath.Join(dir, fmt.Sprint("a", i)), filepath.Join(dir, fmt.Sprint("b", i))
		if err := os.Mkdir(from, 0o755); err != nil {
			return nil, err
		}
		t0 := time.Now()
		if err := unix.Rename(from, to); err != nil {
			return nil, fmt.Errorf("rename %s: %w", from, err)
		}
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", dir, err)
		}
		serr := unix.Fsync(fd)
		_ = unix.Close(fd)
		if serr != nil {
			return nil, fmt.Errorf("fsync %s: %w", dir, serr)
		}
		return []time.Duration{time.Since(t0)}, nil
	}
	return step, done, nil
}
