package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// CSIResizerVersion is external-resizer's release the harness runs
// (github.com/kubernetes-csi/external-resizer/v2; hack/cluster-binaries.sh
// caches it as the csi-resizer set).
const CSIResizerVersion = "v2.3.0"

// startCSIResizer runs the cluster's one expansion controller as hpp's
// operator deploys it (render/resizer.go): hpp-csi --controller-only
// ("hpp-csi-controller") and csi-resizer ("csi-resizer") on its socket,
// with leader election in CSINamespace. csi-resizer has no per-node mode:
// it answers every claim of the driver through this endpoint, and kubelet
// then calls NodeExpandVolume on the node that holds the volume. Started
// once, with the real node's hpp-csi; a second call does nothing.
func (c *Cluster) startCSIResizer(ctx context.Context, hppCSI string) error {
	if c.Process("csi-resizer") != nil {
		return nil
	}
	if err := checkExecutable("CSIResizer", c.opts.Binaries.CSIResizer, "run `make cluster-binaries`"); err != nil {
		return err
	}
	sock := filepath.Join(c.Dir, "csi-resizer", "csi.sock")
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		return err
	}
	health, err := c.ports.next()
	if err != nil {
		return err
	}
	ctl, err := c.run(ProcessSpec{Name: "hpp-csi-controller", Path: hppCSI, Args: []string{
		"--controller-only",
		"--endpoint=unix://" + sock,
		"--health-address=127.0.0.1:" + strconv.Itoa(health),
	}, RestartOnExit: true})
	if err != nil {
		return err
	}
	if err := waitHTTP(ctx, "hpp-csi --controller-only", fmt.Sprintf("http://127.0.0.1:%d/healthz", health), nil, ctl); err != nil {
		return c.stepError("wait for hpp-csi --controller-only", ctl.Name(), err)
	}
	if _, err := c.run(ProcessSpec{Name: "csi-resizer", Path: c.opts.Binaries.CSIResizer, Args: []string{
		"--csi-address=" + sock,
		"--kubeconfig=" + c.Kubeconfig,
		"--leader-election",
		"--leader-election-namespace=" + CSINamespace,
		// hpp expands online: no need to watch pods for volumes in use.
		"--handle-volume-inuse-error=false",
		"--v=3",
	}, RestartOnExit: true}); err != nil {
		return err
	}
	c.opts.Logf("csi-resizer %s and hpp-csi --controller-only running", CSIResizerVersion)
	return nil
}
