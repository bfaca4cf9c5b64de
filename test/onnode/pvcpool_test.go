package onnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/grpctest"
	"github.com/hostpath-provisioner/hpp/internal/poolmarker"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
	"github.com/hostpath-provisioner/hpp/test/csitest"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// mounterImage is the overlay's name for hpp-mounter (MOUNTER_IMAGE).
const mounterImage = "localhost/hpp/hpp-mounter:latest"

// diskClass is the StorageClass of the local PVs the pool claims bind to:
// no provisioner, bound when the mounter pod is scheduled, as local
// storage is offered on real clusters.
const diskClass = "onnode-pool-disks"

// templatePool is one pvcTemplate pool of the test and the loop device
// behind its local PV.
type templatePool struct {
	name string
	// path is the pool's host path (the CR's storagePools[].path).
	path string
	mode corev1.PersistentVolumeMode
	// pv is the local PV offered for the pool's claim.
	pv string
	// dev is the loop device whose filesystem must hold the pool.
	dev string
	// root is the directory of dev's filesystem the pool shows (mountinfo's
	// root field): the whole filesystem for Block, the local PV's
	// directory for Filesystem.
	root string
}

// claim and mounter are the operator's object names, upstream's
// hpp-pool-<pool>-<node>.
func (p *templatePool) claim(node string) string   { return "hpp-pool-" + p.name + "-" + node }
func (p *templatePool) mounter(node string) string { return "hpp-pool-" + p.name + "-" + node }
func (p *templatePool) cleanupJob(node string) string {
	return "cleanup-pool-" + p.name + "-" + node
}

// testPVCPools is issue 13's end-to-end proof: the operator (installed by
// deploy/overlays/operator) gets a CR with a Block and a Filesystem
// pvcTemplate pool; each pool claim binds to a loop device offered as a
// local PV, the mounter Deployment's pod mounts it at the pool path, and a
// pod's file written through hpp-csi lands on the loop device. Then
// hpp-operator, the mounters and hpp-csi are killed under writers on both
// pools (operatorFaults, issue 31). Then the block pool's mounter goes away (see mounterDeleted) and hpp-csi refuses
// creates there; last the CR is deleted (see deleteTemplateCR).
func (e *env) testPVCPools(t *testing.T) {
	ctx := t.Context()
	blockDev, _ := testutil.LoopDevice(t, testutil.MinXFSBytes)
	fsDev, fsVol := e.nodeFilesystem(ctx, t, "fs")
	pools := []*templatePool{
		{name: "block", path: filepath.Join(e.pools, "pvc-block"), mode: corev1.PersistentVolumeBlock,
			pv: "onnode-pool-block", dev: blockDev, root: "/"},
		{name: "fs", path: filepath.Join(e.pools, "pvc-fs"), mode: corev1.PersistentVolumeFilesystem,
			pv: "onnode-pool-fs", dev: fsDev, root: "/" + filepath.Base(fsVol)},
	}
	e.createClass(ctx, t, &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: diskClass},
		Provisioner:       "kubernetes.io/no-provisioner",
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	})
	e.localPV(ctx, t, pools[0], blockDev)
	e.localPV(ctx, t, pools[1], fsVol)

	manifests := e.render(ctx, t, "operator", "")
	e.apply(ctx, t, "overlay operator", manifests)
	e.waitDeploymentAvailable(ctx, t, operatorName)
	var spec strings.Builder
	spec.WriteString("  storagePools:\n")
	for _, p := range pools {
		fmt.Fprintf(&spec, `  - name: %s
    path: %s
    pvcTemplate:
      volumeMode: %s
      accessModes: [ReadWriteOnce]
      storageClassName: %s
      resources:
        requests:
          storage: 300Mi
`, p.name, p.path, p.mode, diskClass)
	}
	// While the node's `/` is not a shared mount the runtime refuses the
	// mounters' host mount, and the CR says so.
	if !e.nodeRootShared(t) {
		e.apply(ctx, t, "HostPathProvisioner "+crName, crManifest(spec.String()))
		e.waitPoolReason(ctx, t, pools[0].name, `is not a shared mount`)
		e.shareNodeRoot(ctx, t)
	}
	// Available only once every pool is mounted on the node (the
	// operator's status), so what follows finds the pools ready.
	e.applyCR(ctx, t, spec.String())
	e.waitDaemonSetReady(ctx, t, csiDaemonSet)
	e.waitRegistered(ctx, t)
	for _, p := range pools {
		e.checkPoolMounted(ctx, t, p)
		e.createClass(ctx, t, kit.StorageClass("onnode-pool-"+p.name, p.name))
		e.writeThroughClaim(ctx, t, "onnode-pool-"+p.name, func(pv *corev1.PersistentVolume) string {
			dir := e.inNode(filepath.Join(p.path, "csi", pv.Spec.CSI.VolumeHandle))
			e.wantOnDevice(t, filepath.Join(dir, "file"), p.dev)
			return dir
		})
		// Data that must survive the CR's deletion (deleteTemplateCR).
		if err := os.WriteFile(e.inNode(filepath.Join(p.path, "csi", "kept")), []byte(p.name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.operatorFaults(ctx, t, pools)
	e.mounterDeleted(ctx, t, pools[0])
	e.deleteTemplateCR(ctx, t, pools)
	e.remove(ctx, t, "overlay operator", manifests)
}

// shareNodeRoot makes `/` a shared mount in the node's mount namespace, as
// on any node booted by systemd. The mounter pod mounts the host's `/`
// with Bidirectional propagation, which containerd refuses unless the
// source mount is shared ("path "/" is mounted on "/" but it is not a
// shared mount"); the harness makes `/` only a slave of this machine's (so
// nothing the node mounts leaks here), and shared on top of that still
// propagates nothing back.
func (e *env) shareNodeRoot(ctx context.Context, t *testing.T) {
	t.Helper()
	if out, err := e.inNodeRun(ctx, "mount", "--make-shared", "/"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !e.nodeRootShared(t) {
		t.Fatal("the node's / is still not a shared mount after mount --make-shared /")
	}
	t.Logf("the node's / is a shared mount now")
}

// nodeRootShared reports whether `/` is a shared mount in the node's mount
// namespace (a "shared:N" optional field on its mountinfo line; the last
// line for `/` is the one on top).
func (e *env) nodeRootShared(t *testing.T) bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(e.c.NodeInitPID()), "mountinfo"))
	if err != nil {
		t.Fatal(err)
	}
	shared := false
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 7 || fields[4] != "/" {
			continue
		}
		shared = false
		for _, opt := range fields[6:] {
			if opt == "-" {
				break
			}
			shared = shared || strings.HasPrefix(opt, "shared:")
		}
	}
	return shared
}

// waitPoolReason waits until the CR's status of the pool on the node
// gives a reason containing want.
func (e *env) waitPoolReason(ctx context.Context, t *testing.T, pool, want string) {
	t.Helper()
	node := e.c.RealNode().Name
	var reason string
	err := kit.Poll(ctx, 2*time.Minute, "status of pool "+pool+" on "+node+" saying "+want, func(ctx context.Context) (bool, string, error) {
		out, err := e.kubectl(ctx, "", "get", "hostpathprovisioner/"+crName, "-o",
			`jsonpath={.status.storagePoolStatuses[?(@.name=="`+pool+`")].nodes[?(@.name=="`+node+`")].reason}`)
		if err != nil {
			return false, "", kit.Retry(err)
		}
		reason = out
		return strings.Contains(out, want), out, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("status of pool %s on %s: %s", pool, node, reason)
}

// inNodeRun runs a command in the node's mount namespace.
func (e *env) inNodeRun(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"--target=" + strconv.Itoa(e.c.NodeInitPID()), "--mount", "--"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("in the node: %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// inNode is path as the node sees it, from this machine.
func (e *env) inNode(path string) string {
	return filepath.Join("/proc", strconv.Itoa(e.c.NodeInitPID()), "root", path)
}

// nodeFilesystem is the Filesystem local PV's disk: a loop device with
// XFS, mounted inside the node's mount namespace (where kubelet looks for
// the local PV's path) at <cluster>/disks/<name> and only there. It returns the device and the PV's
// directory on it.
func (e *env) nodeFilesystem(ctx context.Context, t *testing.T, name string) (dev, vol string) {
	t.Helper()
	dev, _ = testutil.LoopDevice(t, testutil.MinXFSBytes)
	if out, err := testutil.Run(ctx, "mkfs.xfs", "-q", dev); err != nil {
		t.Fatalf("mkfs.xfs %s: %v: %s", dev, err, out)
	}
	disk := filepath.Join(e.c.Dir, "disks", name)
	if err := os.MkdirAll(disk, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := e.inNodeRun(ctx, "mount", "-t", "xfs", dev, disk); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := e.inNodeRun(context.WithoutCancel(ctx), "umount", disk); err != nil {
			t.Errorf("%v: %s", err, out)
		}
	})
	vol = filepath.Join(disk, "vol")
	if err := os.Mkdir(e.inNode(vol), 0o755); err != nil {
		t.Fatal(err)
	}
	return dev, vol
}

// localPV offers path on the node as a local PV of diskClass for the
// pool's claim; deleted when the subtest ends (Retain: the disk keeps its
// data).
func (e *env) localPV(ctx context.Context, t *testing.T, p *templatePool, path string) {
	t.Helper()
	pv := kit.LocalPV(p.pv, diskClass, path, e.c.RealNode().Name, "300Mi", p.mode)
	if _, err := e.c.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.c.Client.CoreV1().PersistentVolumes().Delete(context.WithoutCancel(ctx), pv.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete PV %s: %v", pv.Name, err)
		}
	})
}

// checkPoolMounted: the pool's claim is bound to its local PV, the mounter
// pod is Ready, the node's mountinfo shows the device's filesystem at the
// pool path with the mounter's marker, and the CR reports the pool Ready
// on the node.
func (e *env) checkPoolMounted(ctx context.Context, t *testing.T, p *templatePool) {
	t.Helper()
	node := e.c.RealNode().Name
	pvc, err := e.c.Client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, p.claim(node), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName != p.pv {
		t.Fatalf("pool claim %s: %s, volume %q; want Bound to %s", pvc.Name, pvc.Status.Phase, pvc.Spec.VolumeName, p.pv)
	}
	pod := e.mounterPod(ctx, t, p)
	if !podReady(pod) {
		t.Fatalf("mounter pod %s not Ready: %s", pod.Name, kit.PodSummary(pod))
	}
	e.wantPoolMount(t, p)
	if err := poolmarker.Check(e.inNode(filepath.Join(p.path, "csi")), p.name); err != nil {
		t.Fatal(err)
	}
	st := e.poolStatus(ctx, t, p.name)
	if st.Phase != hppv1.StoragePoolReady || len(st.Nodes) != 1 || !st.Nodes[0].Ready || st.Nodes[0].Name != node ||
		st.Nodes[0].ClaimPhase != corev1.ClaimBound || !st.Nodes[0].MounterReady {
		t.Fatalf("storagePoolStatuses[%s] = %+v; want Ready on %s with its claim Bound and the mounter ready", p.name, st, node)
	}
	t.Logf("pool %s: claim %s Bound to %s, mounter pod %s Ready, %s mounted from %s, status %s on %s",
		p.name, pvc.Name, p.pv, pod.Name, filepath.Join(p.path, "csi"), p.dev, st.Phase, node)
}

// wantPoolMount: exactly one mount at <pool>/csi in the node, of dev's
// filesystem (XFS, its major:minor) at the pool's root directory.
func (e *env) wantPoolMount(t *testing.T, p *templatePool) {
	t.Helper()
	target := filepath.Join(p.path, "csi")
	m, err := csitest.MountsAtIn(e.c.NodeInitPID(), target)
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(p.dev, &st); err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || m[0].FSType != "xfs" || m[0].Root != p.root ||
		m[0].Major != int(unix.Major(st.Rdev)) || m[0].Minor != int(unix.Minor(st.Rdev)) {
		t.Fatalf("node mounts at %s = %+v; want one XFS mount of %s (%d:%d), root %s",
			target, m, p.dev, unix.Major(st.Rdev), unix.Minor(st.Rdev), p.root)
	}
}

// wantOnDevice: the file is on dev's filesystem (its st_dev is the
// device), not on the OS disk under the bare pool directory.
func (e *env) wantOnDevice(t *testing.T, file, dev string) {
	t.Helper()
	var fst, dst unix.Stat_t
	if err := unix.Stat(file, &fst); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(dev, &dst); err != nil {
		t.Fatal(err)
	}
	if fst.Dev != dst.Rdev {
		t.Fatalf("%s is on device %d:%d, want %s (%d:%d)", file, unix.Major(fst.Dev), unix.Minor(fst.Dev),
			dev, unix.Major(dst.Rdev), unix.Minor(dst.Rdev))
	}
	t.Logf("%s is on %s", file, dev)
}

// mounterPod is the one pod of the pool's mounter Deployment.
func (e *env) mounterPod(ctx context.Context, t *testing.T, p *templatePool) *corev1.Pod {
	t.Helper()
	pods := e.mounterPods(ctx, t, p)
	if len(pods) != 1 {
		t.Fatalf("%d pods of mounter Deployment %s, want 1", len(pods), p.mounter(e.c.RealNode().Name))
	}
	return &pods[0]
}

func (e *env) mounterPods(ctx context.Context, t *testing.T, p *templatePool) []corev1.Pod {
	t.Helper()
	l, err := e.c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{
		LabelSelector: "hostpathprovisioner.kubevirt.io/mounter=" + p.mounter(e.c.RealNode().Name)})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// poolStatus is the CR's storagePoolStatuses entry of the pool.
func (e *env) poolStatus(ctx context.Context, t *testing.T, pool string) hppv1.StoragePoolStatus {
	t.Helper()
	cr, err := e.getCR(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range cr.Status.StoragePoolStatuses {
		if s.Name == pool {
			return s
		}
	}
	t.Fatalf("no storagePoolStatuses entry for %s in %+v", pool, cr.Status)
	return hppv1.StoragePoolStatus{}
}

// mounterDeleted takes the pool's mounter away for good while the operator
// is stopped: the operator re-creates a deleted mounter pod at once (its
// Deployment) and the Deployment itself on the next reconcile, so the
// deterministic way to see a pool without its mounter is to scale the
// operator to zero and delete the mounter Deployment. Its pod leaves the
// pool mounted (--keep-mount: a mounter restart or roll never unmounts a
// pool; only the cleanup Job does), so the test then unmounts it by hand,
// as a pool disk that went away. Then hpp-csi offers no capacity in
// it and refuses creates saying why (a claim stays Pending with
// csi-provisioner's event carrying hpp-csi's message). Scaling the
// operator back re-creates the mounter, which mounts the pool again, and
// the Pending claim is provisioned on the device.
func (e *env) mounterDeleted(ctx context.Context, t *testing.T, p *templatePool) {
	t.Helper()
	node := e.c.RealNode().Name
	e.scaleOperator(ctx, t, 0)
	if _, err := e.kubectl(ctx, "", "delete", "-n", namespace, "deployment/"+p.mounter(node), "--wait", "--timeout=2m"); err != nil {
		t.Fatal(err)
	}
	e.waitPodsGone(ctx, t, "mounter pods of "+p.name, "hostpathprovisioner.kubevirt.io/mounter="+p.mounter(node))
	target := filepath.Join(p.path, "csi")
	if m, err := csitest.MountsAtIn(e.c.NodeInitPID(), target); err != nil || len(m) != 1 {
		t.Fatalf("after the mounter was deleted: node mounts at %s = %+v (%v); want the pool's, kept", target, m, err)
	}
	if out, err := e.inNodeRun(ctx, "umount", target); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if m, err := csitest.MountsAtIn(e.c.NodeInitPID(), target); err != nil || len(m) != 0 {
		t.Fatalf("after umount: node mounts at %s = %+v (%v); want none", target, m, err)
	}
	t.Logf("mounter Deployment %s deleted with the operator scaled to 0: %s stayed mounted; unmounted by hand", p.mounter(node), target)

	csi := e.nodeDriver(t)
	err := kit.Poll(ctx, time.Minute, "hpp-csi offers no capacity in "+p.name, func(ctx context.Context) (bool, string, error) {
		resp, err := csi.GetCapacity(ctx, &csipb.GetCapacityRequest{Parameters: csitest.PoolParams(p.name),
			AccessibleTopology: csitest.Segment(node)})
		if err != nil {
			return false, "", kit.Retry(err)
		}
		return resp.GetAvailableCapacity() == 0, fmt.Sprintf("capacity %d", resp.GetAvailableCapacity()), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	why := fmt.Sprintf(`storage pool %q is not ready: it is not mounted: marker`, p.name)
	_, err = csi.CreateVolume(csitest.Ctx(t), csitest.CreateRequest("onnode-unmounted", node, 1<<20, csitest.PoolParams(p.name)))
	grpctest.WantCode(t, err, codes.Unavailable, why, poolmarker.Name+" is missing")
	t.Logf("hpp-csi: capacity 0 in %s, CreateVolume refused: %v", p.name, err)

	class := "onnode-pool-" + p.name
	e.waitNoStorageCapacity(ctx, t, class)

	// The claim names the node itself, as the scheduler does for a pod's
	// WaitForFirstConsumer claim: with the pool's capacity at zero the
	// scheduler would never pick the node, and csi-provisioner would not
	// ask hpp-csi at all.
	ns := e.testNamespace(ctx, t)
	claim := kit.PVC(ns, "data", class, "10Mi")
	claim.Annotations = map[string]string{contract.AnnSelectedNode: node}
	if _, err := e.c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var event string
	err = kit.Poll(ctx, 2*time.Minute, "csi-provisioner's event on the claim", func(ctx context.Context) (bool, string, error) {
		event = kit.Events(ctx, e.c.Client, ns, "PersistentVolumeClaim", "data")
		return strings.Contains(event, why), event, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if pvc, err := e.c.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{}); err != nil || pvc.Status.Phase != corev1.ClaimPending {
		t.Fatalf("claim while the pool is unmounted: %v %v; want Pending", pvc.Status.Phase, err)
	}
	if entries := csitest.Entries(t, e.inNode(target)); len(entries) != 0 {
		t.Fatalf("the bare pool directory on the OS disk was written to: %v", entries)
	}
	t.Logf("claim Pending, events: %s", event)

	e.scaleOperator(ctx, t, 1)
	e.waitDeploymentAvailable(ctx, t, p.mounter(node))
	e.wantPoolMount(t, p)
	// csi-provisioner retries the claim with its backoff.
	if _, err := kit.WaitPVCBound(ctx, e.c.Client, ns, "data", 3*time.Minute); err != nil {
		t.Fatalf("%v\nclaim events: %s", err, kit.Events(ctx, e.c.Client, ns, "PersistentVolumeClaim", "data"))
	}
	const line = "written once the pool was back"
	pod := kit.Pod(ns, "writer", "echo '"+line+"' > /data/file && sync", kit.PodVolume{Name: "data", Claim: "data", Path: "/data"})
	if _, err := e.c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kit.WaitPodPhase(ctx, e.c.Client, ns, "writer", corev1.PodSucceeded, 3*time.Minute); err != nil {
		t.Fatalf("%v\nclaim events: %s", err, kit.Events(ctx, e.c.Client, ns, "PersistentVolumeClaim", "data"))
	}
	pvc, err := e.c.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv, err := e.c.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.wantOnDevice(t, e.inNode(filepath.Join(target, pv.Spec.CSI.VolumeHandle, "file")), p.dev)
	// Deleted while the driver still runs (the CR goes next).
	if err := e.c.Client.CoreV1().Pods(ns).Delete(ctx, "writer", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kit.WaitGone(ctx, "PV "+pv.Name, 2*time.Minute, func(ctx context.Context) error {
		_, err := e.c.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("operator back: %s mounted again, the Pending claim bound to %s and its file is on %s", target, pv.Name, p.dev)
}

// scaleOperator sets the operator Deployment's replicas and waits until
// that many of its pods run (0: none left at all).
func (e *env) scaleOperator(ctx context.Context, t *testing.T, replicas int) {
	t.Helper()
	if _, err := e.kubectl(ctx, "", "scale", "-n", namespace, "deployment/"+operatorName, "--replicas="+strconv.Itoa(replicas)); err != nil {
		t.Fatal(err)
	}
	if replicas > 0 {
		e.waitDeploymentAvailable(ctx, t, operatorName)
		return
	}
	d, err := e.c.Client.AppsV1().Deployments(namespace).Get(ctx, operatorName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.waitPodsGone(ctx, t, "operator pods", metav1.FormatLabelSelector(d.Spec.Selector))
	t.Logf("operator scaled to 0")
}

// waitNoStorageCapacity waits until csi-provisioner's CSIStorageCapacity
// for the class on the node is gone or zero (it polls hpp-csi once a
// minute by default).
func (e *env) waitNoStorageCapacity(ctx context.Context, t *testing.T, class string) {
	t.Helper()
	node := e.c.RealNode().Name
	err := kit.Poll(ctx, 2*time.Minute, "CSIStorageCapacity of "+class+" on "+node+" zero", func(ctx context.Context) (bool, string, error) {
		l, err := e.c.Client.StorageV1().CSIStorageCapacities(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", kit.Retry(err)
		}
		for _, c := range l.Items {
			if c.StorageClassName != class || c.NodeTopology == nil || c.NodeTopology.MatchLabels[contract.TopologyKey] != node {
				continue
			}
			if c.Capacity != nil && !c.Capacity.IsZero() {
				return false, c.Name + " offers " + c.Capacity.String(), nil
			}
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("CSIStorageCapacity of %s on %s: zero or absent", class, node)
}

// nodeDriver is a CSI client of the DaemonSet's hpp-csi, through its
// socket as the node's mount namespace shows it.
func (e *env) nodeDriver(t *testing.T) *csitest.Client {
	t.Helper()
	socket := e.inNode(filepath.Join("/var/lib/kubelet/plugins", contract.DriverName, "csi.sock"))
	c, err := csitest.Connect(socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// deleteTemplateCR deletes the CR (deleteCR: nothing of the operator left)
// and checks what the pools leave: the cleanup Jobs ran to completion
// (job-controller's events outlive the Jobs), the pool claims are kept
// (the documented default: they hold data) and still Bound, nothing is
// mounted at the pool paths, and each device still holds the file written
// into its pool.
func (e *env) deleteTemplateCR(ctx context.Context, t *testing.T, pools []*templatePool) {
	t.Helper()
	node := e.c.RealNode().Name
	var keep []string
	for _, p := range pools {
		keep = append(keep, p.path)
	}
	e.deleteCR(ctx, t, keep...)
	for _, p := range pools {
		job := p.cleanupJob(node)
		err := kit.Poll(ctx, time.Minute, "cleanup Job "+job+" completed", func(ctx context.Context) (bool, string, error) {
			ev := kit.Events(ctx, e.c.Client, namespace, "Job", job)
			return strings.Contains(ev, "Completed"), ev, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		pvc, err := e.c.Client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, p.claim(node), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("pool claim after the CR was deleted: %v (want it kept)", err)
		}
		if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName != p.pv {
			t.Fatalf("kept pool claim %s: %s, volume %q; want Bound to %s", pvc.Name, pvc.Status.Phase, pvc.Spec.VolumeName, p.pv)
		}
		target := filepath.Join(p.path, "csi")
		if m, err := csitest.MountsAtIn(e.c.NodeInitPID(), target); err != nil || len(m) != 0 {
			t.Fatalf("after the CR was deleted: node mounts at %s = %+v (%v); want none", target, m, err)
		}
		if got := e.readOnDevice(ctx, t, p, "kept"); got != p.name+"\n" {
			t.Fatalf("file kept on %s = %q, want %q", p.dev, got, p.name+"\n")
		}
		t.Logf("pool %s: cleanup Job %s completed, claim %s kept Bound, nothing mounted at %s, data on %s intact", p.name, job, pvc.Name, target, p.dev)
	}
}

// readOnDevice reads a file at the root of the pool's directory on its
// device, mounting the device anew for Block (nothing else has it
// mounted once the pool is gone).
func (e *env) readOnDevice(ctx context.Context, t *testing.T, p *templatePool, name string) string {
	t.Helper()
	if p.mode == corev1.PersistentVolumeFilesystem {
		// The Filesystem disk stays mounted in the node (nodeFilesystem).
		disk := filepath.Join(e.c.Dir, "disks", "fs")
		b, err := os.ReadFile(e.inNode(filepath.Join(disk, p.root, name)))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	dir := t.TempDir()
	if err := unix.Mount(p.dev, dir, "xfs", unix.MS_RDONLY, ""); err != nil {
		t.Fatalf("mount %s: %v", p.dev, err)
	}
	defer func() { _ = unix.Unmount(dir, 0) }()
	b, err := os.ReadFile(filepath.Join(dir, p.root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
