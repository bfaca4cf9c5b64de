package cluster

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

// requireClusterTier skips unless the cluster tier was asked for (make e2e
// sets HPP_TEST_TIER=e2e), we are root, and the binaries are built; in the
// cluster tier under CI=true a missing root or binary fails instead.
func requireClusterTier(t *testing.T) Binaries {
	t.Helper()
	if tier := os.Getenv("HPP_TEST_TIER"); tier != "e2e" {
		t.Skipf("cluster tier: runs with `make e2e` (HPP_TEST_TIER=e2e), this is tier %q", tier)
	}
	if os.Geteuid() != 0 {
		testutil.MissingPrerequisite(t, "cluster tier: needs root (kubelet, containerd, mounts)")
	}
	cache, err := CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	bins := BinariesFromCache(cache)
	if err := bins.Validate(); err != nil {
		testutil.MissingPrerequisite(t, "cluster tier: %v", err)
	}
	return bins
}

// startForTest starts a cluster (no deadline: its wait for the machine
// lock depends on other runs on this machine, and each bring-up step has
// its own) and stops it when the test ends, after printing the log tails
// if it failed. Stop is idempotent: a test may call it to check its result.
func startForTest(t *testing.T, opts Options) *Cluster {
	t.Helper()
	c, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			var buf bytes.Buffer
			c.DumpLogTails(&buf, 40)
			t.Log(buf.String())
		}
		_ = c.Stop(context.Background())
	})
	return c
}

// A plain busybox pod runs on the real node and its output comes back
// through the apiserver from kubelet; Stop then leaves nothing behind.
func TestClusterRunsPodAndTearsDownClean(t *testing.T) {
	bins := requireClusterTier(t)
	c := startForTest(t, Options{Binaries: bins, Logf: t.Logf})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name: "c", Image: BusyboxImage, ImagePullPolicy: corev1.PullNever,
				Command:      []string{"sh", "-c", "echo hello from $(hostname) > /data/f && cat /data/f"},
				VolumeMounts: []corev1.VolumeMount{{Name: "d", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	if _, err := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := poll(ctx, 2*time.Minute, 500*time.Millisecond, "pod hello Succeeded", func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, "hello", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.Phase == corev1.PodFailed {
			t.Fatalf("pod failed: %+v", p.Status)
		}
		return p.Status.Phase == corev1.PodSucceeded, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	logs, err := c.Client.CoreV1().Pods("default").GetLogs("hello", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(logs)); got != "hello from hello" {
		t.Errorf("pod log %q, want %q", got, "hello from hello")
	}
	checkNodeNamespace(ctx, t, c)
	dir := c.Dir
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cluster directory %s still there after Stop: %v", dir, err)
	}
	if mps, _ := mountsUnder(dir); len(mps) > 0 {
		t.Errorf("mounts left: %v", mps)
	}
	if left := killProcessesMentioning(dir); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
	if _, err := os.Stat("/sys/class/net/hpp0"); !os.IsNotExist(err) {
		t.Errorf("bridge hpp0 left: %v", err)
	}
	for _, bin := range []string{"iptables", "ip6tables"} {
		for _, table := range iptablesTables() {
			for _, chain := range listChains(ctx, hostCommander{}, bin, table) {
				if strings.HasPrefix(chain, "KUBE-") || strings.HasPrefix(chain, "CNI-") {
					t.Errorf("%s %s chain %s left", bin, table, chain)
				}
			}
		}
	}
	for _, p := range fixedPaths() {
		if _, err := os.Stat(p); !c.before.fixedBefore[p] && !os.IsNotExist(err) {
			t.Errorf("%s created by the cluster and left behind (%v)", p, err)
		}
	}
	if cg := kubepodsCgroups(); len(cg) > 0 {
		t.Errorf("kubelet cgroups left: %v", cg[:min(len(cg), 5)])
	}
}

// checkNodeNamespace runs what the e2e suite's host-exec pods do: a
// privileged pod with / as a hostPath enters the mount namespace of the
// node's PID 1 and lists its own pod directory under /var/lib/kubelet,
// where kubelet's root shows inside the node. Its emptyDir must be there.
func checkNodeNamespace(ctx context.Context, t *testing.T, c *Cluster) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "node-view", Namespace: "default"},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name: "c", Image: BusyboxImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sh", "-c", "nsenter --mount=/rootfs/proc/1/ns/mnt -- ls /var/lib/kubelet/pods/$POD_UID/volumes/kubernetes.io~empty-dir"},
				Env: []corev1.EnvVar{{Name: "POD_UID", ValueFrom: &corev1.EnvVarSource{
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"},
				}}},
				SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "rootfs", MountPath: "/rootfs", ReadOnly: true},
					{Name: "scratch", MountPath: "/scratch"},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "rootfs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
	if _, err := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var phase corev1.PodPhase
	err := poll(ctx, 2*time.Minute, 500*time.Millisecond, "pod node-view finished", func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, "node-view", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	logs, err := c.Client.CoreV1().Pods("default").GetLogs("node-view", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(logs)); phase != corev1.PodSucceeded || got != "scratch" {
		t.Errorf("pod node-view %s, output %q; want Succeeded listing %q", phase, got, "scratch")
	}
}
