package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

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
