package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"golang.org/x/sys/unix"

	"github.com/hostpath-provisioner/hpp/internal/grpctest"
	"github.com/hostpath-provisioner/hpp/internal/poolmarker"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
	"github.com/hostpath-provisioner/hpp/test/cluster"
	"github.com/hostpath-provisioner/hpp/test/csitest"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

const mounterImage = "localhost/hpp/hpp-mounter:e2e"

var (
	mounterImageOnce sync.Once
	mounterImageErr  error
)

// importMounterImage builds hpp-mounter and imports its image (the binary
// with this machine's blkid and mkfs.xfs) once per run.
func importMounterImage(t *testing.T, env *kit.Env) {
	t.Helper()
	for _, tool := range append([]string{"ldd", "losetup"}, cluster.MounterTools...) {
		if _, err := exec.LookPath(tool); err != nil {
			testutil.MissingPrerequisite(t, "%s not found (%v): install xfsprogs and util-linux (make deps)", tool, err)
		}
	}
	mounterImageOnce.Do(func() {
		ctx := context.Background()
		bin := filepath.Join(env.C.Dir, "hpp-mounter")
		if mounterImageErr = kit.BuildCommand(ctx, "hpp-mounter", bin); mounterImageErr != nil {
			return
		}
		img, err := cluster.MounterImage(ctx, mounterImage, bin)
		if err != nil {
			mounterImageErr = err
			return
		}
		mounterImageErr = env.C.ImportImage(ctx, img)
	})
	if mounterImageErr != nil {
		t.Fatal(mounterImageErr)
	}
}

// mounterHost is the directory a mounter pod sees as the host at /host.
// It is the kubelet's directory: the one shared mount on this machine (`/`
// is private here, and Bidirectional propagation needs a shared source), and
// it holds the kubelet's own mounts of the pod's PVC that hpp-mounter must
// find. Host paths given to the mounter are relative to it.
func mounterHost(env *kit.Env) string { return env.C.KubeletDir() }

// The mounter's mounts live in the real node's mount namespace (its
// containerd and kubelet run in their own, test/cluster/nodens_linux.go):
// host mounts under the cluster directory reach the node, the node's never
// reach the host, as on a real node nothing else sees them either. So the
// test looks at the pool as the node sees it: files through
// /proc/<node-init>/root, mounts through its mountinfo, and the hpp-csi
// that uses the pool runs in that namespace, as the DaemonSet's would.

// inNode is path as the node sees it.
func inNode(env *kit.Env, path string) string {
	return filepath.Join("/proc", strconv.Itoa(env.C.NodeInitPID()), "root", path)
}

func nodeMountsAt(t *testing.T, env *kit.Env, target string) []csitest.MountEntry {
	t.Helper()
	m, err := csitest.MountsAtIn(env.C.NodeInitPID(), target)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// mounterPod is what the operator runs per pool and node: the pool PVC at
// /source (filesystem) or /dev/data (block), the host directory host at
// /host (the operator mounts the host's `/`).
//
// The pod uses the host's network and its readiness probe asks 127.0.0.1:
// on this machine HTTP from the host to a pod IP is answered by something
// else (a 404 from "server: keryx"), so a probe on the pod IP never passes.
func mounterPod(ns, name, node, claim, host, mountPath, healthAddr string, block bool) *corev1.Pod {
	_, port, _ := net.SplitHostPort(healthAddr)
	source := "/source"
	if block {
		source = "/dev/data"
	}
	c := corev1.Container{
		Name: "mounter", Image: mounterImage, ImagePullPolicy: corev1.PullNever,
		Args: []string{"--storagePoolPath", source, "--mountPath", mountPath, "--hostPath", "/host",
			"--pool-name", "mounted", "--node-name", node, "--check-interval", "1s", "--log-format", "text",
			"--health-address", healthAddr},
		SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
		VolumeMounts: []corev1.VolumeMount{{Name: "host", MountPath: "/host",
			MountPropagation: ptr.To(corev1.MountPropagationBidirectional)}},
		ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Host: "127.0.0.1", Path: "/readyz", Port: intstr.Parse(port)}}},
	}
	if block {
		c.VolumeDevices = []corev1.VolumeDevice{{Name: "pool", DevicePath: source}}
	} else {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "pool", MountPath: source})
	}
	return kit.OnNode(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			HostNetwork:                   true,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			Containers:                    []corev1.Container{c},
			Volumes: []corev1.Volume{
				{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: host}}},
				{Name: "pool", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}},
			},
		},
	}, node)
}

// localPV offers path on the real node as a pre-bound local PV and claim.
func localPV(t *testing.T, env *kit.Env, ns, name, path string, mode corev1.PersistentVolumeMode) {
	t.Helper()
	ctx := context.Background()
	pv := kit.LocalPV(ns+"-"+name, ns+"-pool", path, env.C.RealNode().Name, "64Mi", mode)
	if _, err := env.C.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.C.Client.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	pvc := kit.PVC(ns, name, ns+"-pool", "64Mi")
	pvc.Spec.VolumeMode = &mode
	pvc.Spec.VolumeName = pv.Name
	createPVC(t, env, pvc)
	if _, err := kit.WaitPVCBound(ctx, env.C.Client, ns, name, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
}

// runMounter starts a mounter pod, waits until it is Ready (its /readyz:
// pool mounted and marked), and returns a function that deletes it the way
// a Deployment's pod is deleted (SIGTERM, grace period) and waits for it.
func runMounter(t *testing.T, env *kit.Env, pod *corev1.Pod) (stop func()) {
	t.Helper()
	ctx := context.Background()
	createPod(t, env, pod)
	err := kit.Poll(ctx, 3*time.Minute, "mounter pod Ready", func(ctx context.Context) (bool, string, error) {
		p, err := env.C.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", kit.Retry(err)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true, "", nil
			}
		}
		return false, kit.PodSummary(p), nil
	})
	if err != nil {
		logs, _ := kit.PodLogs(ctx, env.C.Client, pod.Namespace, pod.Name)
		t.Fatalf("%v\nevents: %s\nlog:\n%s", err, kit.Events(ctx, env.C.Client, pod.Namespace, "Pod", pod.Name), logs)
	}
	return func() {
		t.Helper()
		logs, _ := kit.PodLogs(ctx, env.C.Client, pod.Namespace, pod.Name)
		if err := env.C.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := kit.WaitGone(ctx, "mounter pod", 2*time.Minute, func(ctx context.Context) error {
			_, err := env.C.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t.Logf("mounter log before SIGTERM:\n%s", logs)
	}
}

// A loop device offered as a Block local PV: the mounter pod formats it with
// XFS and mounts it at the pool path on the host. An hpp-csi whose pool is
// that path ("mounted": true) refuses creates until then, creates its
// volume on the device once the pool is mounted, and refuses again, saying
// why, once the mounter pod is deleted (which unmounts the pool).
func TestMounterBlockPVC(t *testing.T) {
	env := needEnv(t)
	importMounterImage(t, env)
	ns := namespace(t, env)
	dev, _ := testutil.LoopDevice(t, testutil.MinXFSBytes)
	localPV(t, env, ns, "pool", dev, corev1.PersistentVolumeBlock)

	rel := "/hpp-e2e-pools/" + ns + "/csi"
	target := filepath.Join(mounterHost(env), rel)
	cleanupPool(t, env, ns, target)
	// The host pool directory and its bare mount point, as on a node
	// before the mounter runs.
	if err := os.MkdirAll(target, 0o755); err != nil {
		t.Fatal(err)
	}
	csi := startMountedPoolDriver(t, env, filepath.Dir(target))
	why := `storage pool "mounted" is not ready: it is not mounted: marker ` + filepath.Join(target, poolmarker.Name) + ` is missing`
	csi.create(t, "pvc-before", codes.Unavailable, why)

	stop := runMounter(t, env, mounterPod(ns, "mounter", env.C.RealNode().Name, "pool", mounterHost(env), rel, freeAddr(t), true))
	var st unix.Stat_t
	if err := unix.Stat(dev, &st); err != nil {
		t.Fatal(err)
	}
	m := nodeMountsAt(t, env, target)
	if len(m) != 1 || m[0].FSType != "xfs" || m[0].Major != int(unix.Major(st.Rdev)) || m[0].Minor != int(unix.Minor(st.Rdev)) {
		t.Fatalf("node mounts at %s = %+v; want one XFS mount of %s", target, m, dev)
	}
	if err := poolmarker.Check(inNode(env, target), "mounted"); err != nil {
		t.Error(err)
	}
	csi.waitReady(t)
	csi.create(t, "pvc-on-device", codes.OK, "")
	if err := os.WriteFile(filepath.Join(inNode(env, target), "pvc-on-device", "data"), []byte("on the device\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	stop()
	if m := nodeMountsAt(t, env, target); len(m) != 0 {
		t.Fatalf("after deleting the mounter pod: node mounts at %s = %+v; want none", target, m)
	}
	csi.create(t, "pvc-after", codes.Unavailable, why)
	if entries := csitest.Entries(t, inNode(env, target)); len(entries) != 0 {
		t.Errorf("the bare mount point on the OS disk was written to: %v", entries)
	}
	// The volume and its file are on the loop device's filesystem.
	check := t.TempDir()
	if err := unix.Mount(dev, check, "xfs", 0, ""); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Unmount(check, 0) }()
	if got := readFile(t, filepath.Join(check, "pvc-on-device", "data")); got != "on the device\n" {
		t.Errorf("file on the device = %q", got)
	}
}

// mountedPoolDriver is an hpp-csi process (not registered with the
// kubelet: the suite's own serves the node) whose one pool is a mounted one.
type mountedPoolDriver struct {
	c    *csitest.Client
	node string
}

func startMountedPoolDriver(t *testing.T, env *kit.Env, hostPool string) *mountedPoolDriver {
	t.Helper()
	// In the node's mount namespace, where the mounter's mount is.
	wrapper := filepath.Join(t.TempDir(), "hpp-csi-in-node")
	script := fmt.Sprintf("#!/bin/sh\nexec nsenter --target=%d --mount -- %s \"$@\"\n", env.C.NodeInitPID(), csitest.Binary(t))
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := csitest.Launch(wrapper, csitest.Config{NodeID: env.C.RealNode().Name, Dir: t.TempDir(),
		Pools: []csitest.Pool{{Name: "mounted", Path: hostPool, Mounted: true}}, Extra: []string{"--pool-retry-interval", "200ms"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Stop(); err != nil {
			t.Errorf("stopping hpp-csi: %v", err)
		}
	})
	return &mountedPoolDriver{c: d.Client(t), node: env.C.RealNode().Name}
}

// create asks for a volume and checks the answer's code and message.
func (m *mountedPoolDriver) create(t *testing.T, name string, code codes.Code, msg string) {
	t.Helper()
	_, err := m.c.CreateVolume(csitest.Ctx(t), csitest.CreateRequest(name, m.node, 1<<20, csitest.PoolParams("mounted")))
	if code == codes.OK {
		if err != nil {
			t.Fatalf("CreateVolume %s: %v", name, err)
		}
		return
	}
	grpctest.WantCode(t, err, code, msg)
}

func (m *mountedPoolDriver) waitReady(t *testing.T) {
	t.Helper()
	// Probe is ready all along (a mounted pool waiting for its mounter
	// does not hold the driver back); the pool offers capacity once it is
	// open.
	err := kit.Poll(context.Background(), time.Minute, "hpp-csi offers the mounted pool", func(ctx context.Context) (bool, string, error) {
		resp, err := m.c.GetCapacity(ctx, &csipb.GetCapacityRequest{Parameters: csitest.PoolParams("mounted"),
			AccessibleTopology: csitest.Segment(m.node)})
		if err != nil {
			return false, "", kit.Retry(err)
		}
		return resp.GetAvailableCapacity() > 0, "no capacity offered yet", nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A directory offered as a Filesystem local PV: the mounter finds the
// kubelet's mount of it from mountinfo and bind-mounts it at the pool path.
func TestMounterFilesystemPVC(t *testing.T) {
	env := needEnv(t)
	importMounterImage(t, env)
	ns := namespace(t, env)
	// Under the cluster directory: a host mount there reaches the node.
	disk := filepath.Join(env.C.Dir, "e2e-disks", ns)
	if err := os.MkdirAll(disk, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", disk, "tmpfs", 0, "size=64m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(disk, unix.MNT_DETACH); _ = os.RemoveAll(disk) })
	vol := filepath.Join(disk, "vol")
	if err := os.Mkdir(vol, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vol, "existing"), []byte("pvc data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	localPV(t, env, ns, "pool", vol, corev1.PersistentVolumeFilesystem)

	rel := "/hpp-e2e-pools/" + ns + "/csi"
	target := filepath.Join(mounterHost(env), rel)
	cleanupPool(t, env, ns, target)
	stop := runMounter(t, env, mounterPod(ns, "mounter", env.C.RealNode().Name, "pool", mounterHost(env), rel, freeAddr(t), false))

	m := nodeMountsAt(t, env, target)
	want, err := csitest.MountsAt(disk)
	if err != nil || len(want) == 0 {
		t.Fatal(want, err)
	}
	if len(m) != 1 || m[0].Major != want[0].Major || m[0].Minor != want[0].Minor || m[0].Root != "/vol" {
		t.Fatalf("node mounts at %s = %+v; want one bind of %s", target, m, vol)
	}
	if got := readFile(t, filepath.Join(inNode(env, target), "existing")); got != "pvc data\n" {
		t.Errorf("PVC file at the pool path = %q", got)
	}
	if _, err := os.Stat(filepath.Join(vol, poolmarker.Name)); err != nil {
		t.Errorf("marker not on the PVC: %v", err)
	}
	stop()
	if m := nodeMountsAt(t, env, target); len(m) != 0 {
		t.Fatalf("after deleting the mounter pod: node mounts at %s = %+v; want none", target, m)
	}
}

// cleanupPool removes the test's pool directory after the test; a pool a
// failed test left mounted is detached first, so the loop device can go.
func cleanupPool(t *testing.T, env *kit.Env, ns, target string) {
	t.Cleanup(func() {
		// The mounter pod first, or it mounts the pool again.
		ctx := context.Background()
		pods := env.C.Client.CoreV1().Pods(ns)
		_ = pods.DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{})
		_ = kit.WaitGone(ctx, "pods of "+ns, 2*time.Minute, func(ctx context.Context) error {
			l, err := pods.List(ctx, metav1.ListOptions{})
			if err != nil {
				return kit.Retry(err)
			}
			if len(l.Items) > 0 {
				return kit.Retry(fmt.Errorf("%d pods left", len(l.Items)))
			}
			return apierrors.NewNotFound(corev1.Resource("pods"), ns)
		})
		for i := 0; i < 8 && unix.Unmount(target, unix.MNT_DETACH) == nil; i++ {
			t.Logf("cleanup: detached a mount left at %s", target)
		}
		_ = os.RemoveAll(filepath.Join(mounterHost(env), "hpp-e2e-pools", ns))
	})
}

// freeAddr is a free 127.0.0.1 port for a host-network pod's probe.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}
