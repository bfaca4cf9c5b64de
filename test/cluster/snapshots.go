package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// SnapshotterVersion is external-snapshotter's release the harness runs
// (csi-snapshotter, snapshot-controller, the snapshot CRDs);
// hack/cluster-binaries.sh builds it into the cache.
const SnapshotterVersion = "v8.7.0"

// SnapshotClassName is the VolumeSnapshotClass InstallSnapshots creates
// for hpp-csi.
const SnapshotClassName = "hpp-snapshots"

// Snapshotter is external-snapshotter as hack/cluster-binaries.sh caches
// it: both binaries and the crd/ directory beside them.
type Snapshotter struct {
	CSISnapshotter, SnapshotController, CRDDir string
}

// SnapshotterFromCache returns the snapshotter set of cacheDir, or an error
// saying how to build it when it is not complete.
func SnapshotterFromCache(cacheDir string) (Snapshotter, error) {
	dir := filepath.Join(cacheDir, "external-snapshotter", SnapshotterVersion)
	s := Snapshotter{CSISnapshotter: filepath.Join(dir, "csi-snapshotter"), SnapshotController: filepath.Join(dir, "snapshot-controller"),
		CRDDir: filepath.Join(dir, "crd")}
	for _, p := range []string{s.CSISnapshotter, s.SnapshotController, filepath.Join(s.CRDDir, "groupsnapshot.storage.k8s.io_volumegroupsnapshots.yaml")} {
		if _, err := os.Stat(p); err != nil {
			return s, fmt.Errorf("external-snapshotter %s: %w (run `hack/cluster-binaries.sh snapshotter`)", SnapshotterVersion, err)
		}
	}
	return s, nil
}

// InstallSnapshots creates the snapshot CRDs, runs snapshot-controller
// ("snapshot-controller", stopped with the control plane) and creates the
// VolumeSnapshotClass of hpp-csi. Start csi-snapshotter on each node with
// Node.StartCSISnapshotter.
func (c *Cluster) InstallSnapshots(ctx context.Context, s Snapshotter) error {
	if _, err := (hostCommander{}).Run(ctx, c.opts.Binaries.Kubectl, "--kubeconfig="+c.Kubeconfig, "apply", "--server-side", "-f", s.CRDDir); err != nil {
		return c.stepError("create the snapshot CRDs", "kube-apiserver", err)
	}
	if err := poll(ctx, startTimeout, 250*time.Millisecond, "snapshot CRDs established", func(ctx context.Context) (bool, error) {
		_, err := c.Client.Discovery().ServerResourcesForGroupVersion("snapshot.storage.k8s.io/v1")
		return err == nil, nil
	}); err != nil {
		return err
	}
	if _, err := c.run(ProcessSpec{Name: "snapshot-controller", Path: s.SnapshotController,
		// Distributed snapshotting: the controller labels each content with
		// its volume's node, and each node's csi-snapshotter
		// (--node-deployment) takes only its own.
		Args: []string{"--kubeconfig=" + c.Kubeconfig, "--leader-election=false", "--enable-distributed-snapshotting", "--v=3"}, RestartOnExit: true}); err != nil {
		return err
	}
	class := fmt.Sprintf("apiVersion: snapshot.storage.k8s.io/v1\nkind: VolumeSnapshotClass\nmetadata:\n  name: %s\ndriver: %s\ndeletionPolicy: Delete\n",
		SnapshotClassName, contract.DriverName)
	if _, err := (hostCommander{}).RunInput(ctx, class, c.opts.Binaries.Kubectl, "--kubeconfig="+c.Kubeconfig, "apply", "-f", "-"); err != nil {
		return c.stepError("create the VolumeSnapshotClass", "kube-apiserver", err)
	}
	c.opts.Logf("snapshot CRDs, snapshot-controller and VolumeSnapshotClass %s installed", SnapshotClassName)
	return nil
}

// StartCSISnapshotter runs csi-snapshotter ("csi-snapshotter@<node>") for
// the node's hpp-csi in node-deployment mode, as hpp's operator deploys it:
// it takes snapshots only of volumes on its node.
func (n *Node) StartCSISnapshotter(s Snapshotter) error {
	_, err := n.StartProcess(ProcessSpec{
		Name: "csi-snapshotter", Path: s.CSISnapshotter,
		Args: []string{"--csi-address=" + n.csiSocket(), "--kubeconfig=" + n.c.Kubeconfig, "--node-deployment=true",
			"--leader-election=false", "--v=3"},
		Env:           []string{"NODE_NAME=" + n.Name},
		RestartOnExit: true,
	})
	return err
}
