// Command demo is `make demo`: it starts a local cluster, installs hpp-csi,
// provisions a volume for a pod that writes a file, and shows each step as
// it happens — on the cluster and on the host's disk — then deletes
// everything and stops the cluster. A failed step is named, with the log
// tail of the component responsible.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/test/cluster"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

func main() {
	binDir := flag.String("bin-dir", "", "directory with the hpp-csi binary (built from cmd/hpp-csi when empty)")
	flag.Parse()
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "demo: needs root (it runs kubelet and containerd on this machine)")
		os.Exit(1)
	}
	cache, err := cluster.CacheDir()
	if err != nil {
		fail("find the binary cache", err, nil)
	}
	hppcsi := ""
	if *binDir != "" {
		hppcsi = filepath.Join(*binDir, "hpp-csi")
	}
	os.Exit(run(cluster.BinariesFromCache(cache), hppcsi))
}

// demo carries the running environment so a failed step can show logs.
type demo struct {
	env   *kit.Env
	start time.Time
}

func run(bins cluster.Binaries, hppcsi string) int {
	d := &demo{start: time.Now()}
	ctx := context.Background()
	say("hpp demo: a local Kubernetes %s cluster on this machine, hpp-csi provisions a hostpath volume", cluster.K8sVersion)
	if err := bins.Validate(); err != nil {
		fail("check the cluster binaries", err, nil)
	}
	step("starting the cluster (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd, kubelet)")
	env, err := kit.Setup(ctx, kit.SetupOptions{
		Binaries: bins, HPPCSI: hppcsi, HandleSignals: true,
		Logf: func(format string, args ...any) { fmt.Printf("      "+format+"\n", args...) },
	})
	if err != nil {
		fail("start the cluster with hpp-csi", err, nil)
	}
	d.env = env
	code := d.walkthrough(ctx)
	step("stopping the cluster")
	if err := env.Stop(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "\n!! teardown: %v\n", err)
		return 1
	}
	if code == 0 {
		say("demo finished in %s: nothing left running", time.Since(d.start).Round(time.Second))
	}
	return code
}

const (
	ns        = "demo"
	scName    = "hpp-local"
	claimName = "demo-data"
	podName   = "demo-writer"
)

func (d *demo) walkthrough(ctx context.Context) int {
	c := d.env.C
	node := c.RealNode()
	pool := d.env.Pools[kit.PoolLocal]
	if err := c.CreateNamespace(ctx, ns); err != nil {
		return d.failed("create namespace "+ns, err, "kube-apiserver")
	}
	sc := kit.StorageClass(scName, kit.PoolLocal)
	step("StorageClass %s: provisioner %s, "+contract.ParamStoragePool+"=%s (%s on the host), volumeBindingMode %s",
		scName, sc.Provisioner, kit.PoolLocal, pool, *sc.VolumeBindingMode)
	if _, err := c.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		return d.failed("create the StorageClass", err, "kube-apiserver")
	}
	step("PersistentVolumeClaim %s/%s: 100Mi, ReadWriteOnce", ns, claimName)
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, kit.PVC(ns, claimName, scName, "100Mi"), metav1.CreateOptions{}); err != nil {
		return d.failed("create the claim", err, "kube-apiserver")
	}
	script := `echo "hello from pod $(hostname), written at $(date -u +%H:%M:%S) UTC" > /data/hello.txt && sleep 3600`
	step("Pod %s/%s: writes /data/hello.txt into the claim", ns, podName)
	pod := kit.Pod(ns, podName, script, kit.PodVolume{Name: "data", Claim: claimName, Path: "/data"})
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return d.failed("create the pod", err, "kube-apiserver")
	}

	var scheduled string
	if err := kit.Poll(ctx, time.Minute, "pod scheduled", func(ctx context.Context) (bool, string, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
		if err != nil {
			return false, "", kit.Retry(err)
		}
		scheduled = p.Spec.NodeName
		return scheduled != "", kit.PodSummary(p), nil
	}); err != nil {
		return d.failed("schedule the pod", err, "kube-scheduler")
	}
	say("pod scheduled to node %s (the scheduler chose it; the claim waited for it: WaitForFirstConsumer)", scheduled)

	pvc, err := kit.WaitPVCBound(ctx, c.Client, ns, claimName, 2*time.Minute)
	if err != nil {
		return d.failed("provision the volume", err, "csi-provisioner@"+node.Name, "hpp-csi@"+node.Name)
	}
	pv, err := c.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return d.failed("read the PersistentVolume", err, "kube-apiserver")
	}
	dir := filepath.Join(pool, "csi", pv.Spec.CSI.VolumeHandle)
	say("PersistentVolume %s created by hpp-csi (volume id %s, node affinity %s=%s)", pv.Name, pv.Spec.CSI.VolumeHandle, contract.TopologyKey, scheduled)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return d.failed("find the volume directory on the host", fmt.Errorf("%s: %w", dir, err), "hpp-csi@"+node.Name)
	}
	say("directory %s created on the host", dir)
	say("PersistentVolumeClaim %s/%s is %s", ns, claimName, pvc.Status.Phase)

	if _, err := kit.WaitPodPhase(ctx, c.Client, ns, podName, corev1.PodRunning, 2*time.Minute); err != nil {
		return d.failed("start the pod", err, "kubelet", "hpp-csi@"+node.Name)
	}
	say("pod %s is Running with the volume mounted at /data", podName)
	file := filepath.Join(dir, "hello.txt")
	var content []byte
	if err := kit.Poll(ctx, 30*time.Second, "the pod's file on the host", func(context.Context) (bool, string, error) {
		content, err = os.ReadFile(file)
		return err == nil && len(content) > 0, fmt.Sprint(err), nil
	}); err != nil {
		return d.failed("see the pod's file on the host", err, "kubelet")
	}
	say("the pod's file on the host, %s:", file)
	fmt.Printf("        %s\n", strings.TrimSpace(string(content)))

	step("deleting the pod and the claim (reclaim policy Delete)")
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, podName, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		return d.failed("delete the pod", err, "kube-apiserver")
	}
	if err := kit.WaitGone(ctx, "pod", 2*time.Minute, func(ctx context.Context) error {
		_, err := c.Client.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
		return err
	}); err != nil {
		return d.failed("delete the pod", err, "kubelet")
	}
	say("pod deleted; kubelet unmounted the volume")
	if err := c.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, claimName, metav1.DeleteOptions{}); err != nil {
		return d.failed("delete the claim", err, "kube-apiserver")
	}
	if err := kit.WaitGone(ctx, "PersistentVolume "+pv.Name, 2*time.Minute, func(ctx context.Context) error {
		_, err := c.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		return err
	}); err != nil {
		return d.failed("delete the volume", err, "csi-provisioner@"+node.Name, "hpp-csi@"+node.Name)
	}
	say("claim and PersistentVolume %s deleted", pv.Name)
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		return d.failed("remove the volume directory", fmt.Errorf("%s still exists (%w)", dir, err), "hpp-csi@"+node.Name)
	}
	say("directory %s is gone from the host", dir)
	return 0
}

// failed reports a failed step with the named components' log tails.
func (d *demo) failed(what string, err error, components ...string) int {
	fmt.Fprintf(os.Stderr, "\n!! step failed: %s\n   %v\n", what, err)
	for _, name := range components {
		if p := d.env.C.Process(name); p != nil {
			fmt.Fprintf(os.Stderr, "\n--- last 30 lines of %s (%s) ---\n%s\n", name, p.LogPath(), p.Tail(30))
		}
	}
	return 1
}

// fail reports a failure before or during cluster start-up and exits.
func fail(what string, err error, _ *demo) {
	fmt.Fprintf(os.Stderr, "\n!! step failed: %s\n   %v\n", what, err)
	os.Exit(1)
}

func step(format string, args ...any) {
	fmt.Printf("\n==> "+format+"\n", args...)
}

func say(format string, args ...any) {
	fmt.Printf("    "+format+"\n", args...)
}
