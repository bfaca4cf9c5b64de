package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// machineLockPath serialises clusters on one machine: `go test ./...` runs
// test packages in parallel, and two clusters would fight over the CNI
// bridge, kubelet's iptables chains and the stale-state sweep.
const machineLockPath = "/run/lock/hpp-cluster.lock"

type machineLock struct{ f *os.File }

// acquireMachineLock waits for the machine-wide lock until ctx ends,
// telling logf every 30 s who it waits for.
func acquireMachineLock(ctx context.Context, logf func(string, ...any)) (*machineLock, error) {
	f, err := os.OpenFile(machineLockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("machine lock %s: %w", machineLockPath, err)
	}
	start := time.Now()
	lastNote := start
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			_ = f.Truncate(0)
			_, _ = f.WriteAt(fmt.Appendf(nil, "%d\n", os.Getpid()), 0)
			return &machineLock{f: f}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("machine lock %s: %w", machineLockPath, err)
		}
		if time.Since(lastNote) > 30*time.Second {
			holder, _ := os.ReadFile(machineLockPath)
			logf("waiting %s for another cluster on this machine (pid %s, lock %s) to stop",
				time.Since(start).Round(time.Second), strings.TrimSpace(string(holder)), machineLockPath)
			lastNote = time.Now()
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("machine lock %s: %w", machineLockPath, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (l *machineLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	_ = l.f.Close()
	l.f = nil
}
