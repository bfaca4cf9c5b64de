package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hostpath-provisioner/hpp/test/chaos/plan"
	"github.com/hostpath-provisioner/hpp/test/cluster"
)

const (
	killHPPCSI             plan.Kind = "kill hpp-csi"
	killProvisioner        plan.Kind = "kill csi-provisioner"
	killResizer            plan.Kind = "kill csi-resizer"
	killController         plan.Kind = "kill hpp-csi --controller-only"
	killSnapshotter        plan.Kind = "kill csi-snapshotter"
	killSnapshotController plan.Kind = "kill snapshot-controller"
	restartKubelet         plan.Kind = "restart kubelet"
	restartContainerd      plan.Kind = "restart containerd"
	restartAPIServer       plan.Kind = "restart kube-apiserver"
	fillPool               plan.Kind = "fill pool to ENOSPC"
	cutNode                plan.Kind = "cut the node off from the API server"
)

// lastFaultEnd is when the schedule's last fault is over.
func (r *run) lastFaultEnd() time.Time {
	var end time.Duration
	for _, f := range r.schedule.Faults {
		end = max(end, f.At+f.For)
	}
	return r.faultsStart.Add(end)
}

// inject runs the schedule from start; the channel closes when every
// fault is over. Faults overlap as the schedule says.
func (r *run) inject(ctx context.Context, start time.Time) <-chan struct{} {
	r.faultsStart = start
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, f := range r.schedule.Faults {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(start.Add(f.At)))
			r.note("fault: %s (%v)", f.Kind, f.For)
			if err := r.fault(ctx, f); err != nil {
				// A fault the harness could not inject is the harness's
				// failure, not the product's: say so plainly.
				r.t.Errorf("injecting %q at %v: %v", f.Kind, f.At, err)
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	return done
}

func (r *run) fault(ctx context.Context, f plan.Fault) error {
	node := r.env.C.RealNode()
	switch f.Kind {
	case killHPPCSI:
		return kill(ctx, node.Process("hpp-csi"))
	case killProvisioner:
		return kill(ctx, node.Process("csi-provisioner"))
	case killSnapshotter:
		return kill(ctx, node.Process("csi-snapshotter"))
	case killResizer:
		return kill(ctx, r.env.C.Process("csi-resizer"))
	case killController:
		return kill(ctx, r.env.C.Process("hpp-csi-controller"))
	case killSnapshotController:
		return kill(ctx, r.env.C.Process("snapshot-controller"))
	case restartKubelet:
		return kill(ctx, r.env.C.Process("kubelet"))
	case restartContainerd:
		return kill(ctx, r.env.C.Process("containerd"))
	case restartAPIServer:
		return kill(ctx, r.env.C.Process("kube-apiserver"))
	case fillPool:
		return r.fill(ctx, f.For)
	case cutNode:
		return r.cutNode(ctx, f.For)
	}
	return fmt.Errorf("no injector for fault kind %q", f.Kind)
}

// kill SIGKILLs a process as a crash would. The harness brings most
// back by itself (RestartOnExit, as kubelet would a container); one that
// is still down a few seconds later is started again, as its supervisor
// (systemd) would.
func kill(ctx context.Context, p *cluster.Process) error {
	if p == nil {
		return fmt.Errorf("no such process in the cluster")
	}
	if err := p.Kill(ctx); err != nil {
		return err
	}
	time.Sleep(3 * time.Second)
	if !p.Running() {
		if err := p.Restart(); err != nil && !p.Running() {
			return err
		}
	}
	return p.WaitRunning(ctx)
}

// fill takes every free byte of the small pool for d, as a runaway writer
// outside Kubernetes would, then frees it. The file is in the pool's own
// directory, beside the volumes, never inside one.
func (r *run) fill(ctx context.Context, d time.Duration) error {
	path := filepath.Join(r.poolPaths[poolFull], fmt.Sprintf("chaos-fill-%d", time.Now().UnixNano()))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close(); _ = os.Remove(path) }()
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return err
	}
	free := int64(st.Bavail) * st.Bsize
	if free > 0 {
		if err := unix.Fallocate(int(f.Fd()), 0, 0, free); err != nil {
			return fmt.Errorf("fallocate %d bytes in %s: %w", free, path, err)
		}
	}
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	return nil
}
