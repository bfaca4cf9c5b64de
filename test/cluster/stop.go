package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// Stop tears the cluster down and removes its directory: node processes,
// kubelet, every pod sandbox, the control plane (apiserver before etcd:
// it hangs on SIGTERM when etcd is gone), containerd, node-init (whose
// exit ends the node's namespaces with whatever still runs or is mounted
// in them: shims, containers), then every mount, loop device, cgroup,
// iptables chain (kube-proxy's with `kube-proxy --cleanup` first) and the
// bridge the cluster made. It is idempotent and safe after a failed Start; the
// directory is kept (and named in the error) if something could not be
// removed. Save logs with SaveLogs before calling it.
func (c *Cluster) Stop(ctx context.Context) error {
	c.stopOnce.Do(func() { c.stopErr = c.stop(ctx) })
	return c.stopErr
}

func (c *Cluster) stop(ctx context.Context) error {
	if c.sigCancel != nil {
		c.sigCancel()
	}
	defer c.lock.release()
	if c.Dir == "" {
		return nil
	}
	started := time.Now()
	var errs []error
	note := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	c.mu.Lock()
	nodes := make([]*Node, 0, len(c.nodes))
	for _, name := range c.nodeOrder {
		nodes = append(nodes, c.nodes[name])
	}
	procs := append([]*Process(nil), c.procs...)
	c.mu.Unlock()

	// Heartbeats first, so nothing writes to the API while it goes away.
	for _, n := range nodes {
		n.stopHeartbeat()
	}
	if p := c.Process("kubelet"); p != nil {
		note(p.Stop(ctx))
	}
	if p := c.Process("containerd"); p != nil && p.Running() {
		n, err := removeAllPodSandboxes(ctx, c.containerdSock())
		note(err)
		if n > 0 {
			c.opts.Logf("removed %d pod sandboxes", n)
		}
	}
	// Node processes (CSI drivers, sidecars) after the pods that used them.
	for i := len(nodes) - 1; i >= 0; i-- {
		note(nodes[i].stopProcesses(ctx))
	}
	for i := len(procs) - 1; i >= 0; i-- {
		note(procs[i].Stop(ctx))
	}
	// Its rules outlive it; --cleanup needs no API server.
	if c.Process("kube-proxy") != nil {
		note(c.cleanupKubeProxy(ctx))
	}
	for _, k := range killProcessesMentioning(c.Dir) {
		c.opts.Logf("killed leftover process %s", k)
	}
	removeKubepodsCgroups(c.before)
	note(unmountAll(c.Dir))
	note(detachLoops(ctx, c.cmd, c.Dir))
	note(removeChains(ctx, c.cmd, c.before))
	note(deleteLink(ctx, c.cmd, c.opts.Bridge))
	note(removeFixedPaths(c.before))
	if len(errs) > 0 {
		return fmt.Errorf("teardown left things behind (directory %s kept): %w", c.Dir, errors.Join(errs...))
	}
	if mps, err := mountsUnder(c.Dir); err != nil || len(mps) > 0 {
		return fmt.Errorf("teardown: mounts remain under %s (kept): %v %w", c.Dir, mps, err)
	}
	if err := os.RemoveAll(c.Dir); err != nil {
		return fmt.Errorf("teardown: remove %s: %w", c.Dir, err)
	}
	c.opts.Logf("cluster stopped and removed in %s", time.Since(started).Round(100*time.Millisecond))
	return nil
}
