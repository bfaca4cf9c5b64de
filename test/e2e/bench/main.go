// Command bench is `make bench-e2e`: end-to-end provisioning on a local
// cluster (the real node plus simulated ones, hpp-csi and csi-provisioner
// on each). For each size N it creates N claims, each with a pod, and
// measures the seconds until all are Bound (and, for pods on the real node,
// Running), then until all volumes are deleted again, with csi-provisioner's
// default and with tuned --kube-api-qps/--kube-api-burst/--worker-threads.
// It also measures pod start latency on the real node with an hpp volume
// and with an emptyDir. Results go to stdout as a table and as JSON.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/hostpath-provisioner/hpp/test/cluster"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// flagSet is one csi-provisioner configuration under test.
type flagSet struct {
	Name string   `json:"name"`
	Args []string `json:"args"`
}

// flagSets are the csi-provisioner configurations compared: its defaults
// (--kube-api-qps=5 --kube-api-burst=10 --worker-threads=100) and a tuned
// one with room for bursts of API calls.
func flagSets() []flagSet {
	return []flagSet{
		{Name: "default", Args: nil},
		{Name: "tuned", Args: []string{"--kube-api-qps=100", "--kube-api-burst=200", "--worker-threads=200"}},
	}
}

type provisionResult struct {
	Flags        string  `json:"flags"`
	N            int     `json:"n"`
	BoundSeconds float64 `json:"bound_seconds"`
	PVCsPerSec   float64 `json:"pvcs_per_second"`
	RealNodePods int     `json:"real_node_pods"`
	// RunningSeconds: until every pod scheduled to the real node runs.
	RunningSeconds float64 `json:"running_seconds"`
	DeleteSeconds  float64 `json:"delete_seconds"`
}

type latencyResult struct {
	Volume        string    `json:"volume"`
	Samples       []float64 `json:"samples_seconds"`
	MedianSeconds float64   `json:"median_seconds"`
	MaxSeconds    float64   `json:"max_seconds"`
}

type report struct {
	Machine    string            `json:"machine"`
	Nodes      int               `json:"nodes"`
	Provision  []provisionResult `json:"provisioning"`
	PodStart   []latencyResult   `json:"pod_start_latency"`
	StartedAt  time.Time         `json:"started_at"`
	K8sVersion string            `json:"k8s_version"`
	// ControlPlaneQPS of controller-manager and scheduler; 0: their defaults.
	ControlPlaneQPS int `json:"control_plane_qps"`
}

func main() {
	binDir := flag.String("bin-dir", "", "directory with the hpp-csi binary (built from cmd/hpp-csi when empty)")
	sizesFlag := flag.String("sizes", "10,100,500", "claim counts to measure")
	simNodes := flag.Int("sim-nodes", 2, "simulated nodes besides the real one")
	samples := flag.Int("latency-samples", 10, "pods per pod-start latency measurement")
	cpQPS := flag.Int("control-plane-qps", 0, "kube-controller-manager and kube-scheduler --kube-api-qps (burst twice that); 0 keeps their defaults (20 and 50), which cap binding near 4 claims/s")
	flag.Parse()
	var sizes []int
	for _, s := range strings.Split(*sizesFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bench: --sizes %q: %q is not a positive count\n", *sizesFlag, s)
			os.Exit(2)
		}
		sizes = append(sizes, n)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "bench: needs root (it runs kubelet and containerd on this machine)")
		os.Exit(1)
	}
	bins, hppcsi := kit.BenchBinaries(*binDir)
	if *cpQPS < 0 {
		fmt.Fprintf(os.Stderr, "bench: --control-plane-qps %d: must not be negative\n", *cpQPS)
		os.Exit(2)
	}
	if err := run(bins, hppcsi, sizes, *simNodes, *samples, *cpQPS); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench %s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func run(bins cluster.Binaries, hppcsi string, sizes []int, simNodes, samples, cpQPS int) (err error) {
	ctx := context.Background()
	rep := report{Machine: kit.Machine(), StartedAt: time.Now().UTC(), K8sVersion: cluster.K8sVersion, Nodes: 1 + simNodes, ControlPlaneQPS: cpQPS}
	env, err := kit.Setup(ctx, kit.SetupOptions{Binaries: bins, HPPCSI: hppcsi, Logf: logf, HandleSignals: true, MaxPods: 1000, ControlPlaneQPS: cpQPS})
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := env.Stop(context.Background()); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	c := env.C
	if err := env.AddSimulatedNodes(ctx, simNodes, 1000, true); err != nil {
		return err
	}
	sc := kit.StorageClass("bench", kit.PoolLocal)
	if _, err := c.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		return err
	}
	// Capacity objects for every node before the first claim, or the
	// scheduler sees no room and the first run measures the poll interval.
	if err := kit.WaitCapacity(ctx, c, sc.Name, 1+simNodes); err != nil {
		return err
	}
	for _, set := range flagSets() {
		if err := restartProvisioners(ctx, c, set.Args); err != nil {
			return err
		}
		for _, n := range sizes {
			res, err := provision(ctx, env, set.Name, n)
			if err != nil {
				return fmt.Errorf("%s N=%d: %w", set.Name, n, err)
			}
			rep.Provision = append(rep.Provision, res)
			logf("%s N=%d: bound %.1fs (%.1f PVC/s), real-node pods running %.1fs, deleted %.1fs",
				set.Name, n, res.BoundSeconds, res.PVCsPerSec, res.RunningSeconds, res.DeleteSeconds)
		}
	}
	for _, kind := range []string{"hpp", "emptyDir"} {
		lat, err := podStartLatency(ctx, env, kind, samples)
		if err != nil {
			return fmt.Errorf("pod start latency %s: %w", kind, err)
		}
		rep.PodStart = append(rep.PodStart, lat)
	}
	printReport(rep)
	return nil
}

func restartProvisioners(ctx context.Context, c *cluster.Cluster, args []string) error {
	for _, n := range c.Nodes() {
		if n.Process("csi-provisioner") != nil {
			if err := n.StopProcess(ctx, "csi-provisioner"); err != nil {
				return err
			}
		}
		if err := n.StartCSIProvisioner(args...); err != nil {
			return err
		}
	}
	logf("csi-provisioner restarted on %d nodes with %v", len(c.Nodes()), args)
	return nil
}

// provision creates n claims with a pod each, all at once, and times them.
func provision(ctx context.Context, env *kit.Env, set string, n int) (provisionResult, error) {
	c := env.C
	ns := fmt.Sprintf("bench-%s-%d", set, n)
	if err := c.CreateNamespace(ctx, ns); err != nil {
		return provisionResult{}, err
	}
	res := provisionResult{Flags: set, N: n}
	start := time.Now()
	if err := kit.Parallel(n, 16, func(i int) error {
		name := fmt.Sprintf("v-%04d", i)
		if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, kit.PVC(ns, name, "bench", "1Mi"), metav1.CreateOptions{}); err != nil {
			return err
		}
		_, err := c.Client.CoreV1().Pods(ns).Create(ctx, kit.Pod(ns, name, "sleep 3600", kit.PodVolume{Name: "v", Claim: name, Path: "/data"}), metav1.CreateOptions{})
		return err
	}); err != nil {
		return res, err
	}
	realNode := c.RealNode().Name
	var bound, running time.Duration
	err := kit.Poll(ctx, 15*time.Minute, fmt.Sprintf("%d claims Bound and real-node pods Running", n), func(ctx context.Context) (bool, string, error) {
		pvcs, err := c.Client.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", kit.Retry(err)
		}
		nb := 0
		for _, p := range pvcs.Items {
			if p.Status.Phase == corev1.ClaimBound {
				nb++
			}
		}
		if nb == n && bound == 0 {
			bound = time.Since(start)
		}
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", kit.Retry(err)
		}
		onReal, runningOnReal, unscheduled := 0, 0, 0
		for _, p := range pods.Items {
			switch p.Spec.NodeName {
			case "":
				unscheduled++
			case realNode:
				onReal++
				if p.Status.Phase == corev1.PodRunning {
					runningOnReal++
				}
			}
		}
		res.RealNodePods = onReal
		if bound > 0 && unscheduled == 0 && runningOnReal == onReal && running == 0 {
			running = time.Since(start)
		}
		return bound > 0 && running > 0, fmt.Sprintf("%d/%d bound, %d/%d real-node pods running, %d unscheduled", nb, n, runningOnReal, onReal, unscheduled), nil
	})
	if err != nil {
		return res, err
	}
	res.BoundSeconds = bound.Seconds()
	res.PVCsPerSec = float64(n) / bound.Seconds()
	res.RunningSeconds = running.Seconds()

	took, err := kit.DeleteClaimsAndWait(ctx, c.Client, ns, 15*time.Minute)
	res.DeleteSeconds = took.Seconds()
	if err != nil {
		return res, err
	}
	_ = c.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	return res, nil
}

// podStartLatency starts pods one after another on the real node and
// measures creation to the Running status update (seen through a watch).
func podStartLatency(ctx context.Context, env *kit.Env, kind string, samples int) (latencyResult, error) {
	c := env.C
	ns := "latency-" + strings.ToLower(kind)
	if err := c.CreateNamespace(ctx, ns); err != nil {
		return latencyResult{}, err
	}
	res := latencyResult{Volume: kind}
	node := c.RealNode().Name
	for i := range samples {
		name := fmt.Sprintf("p-%02d", i)
		vol := kit.PodVolume{Name: "v", Path: "/data", Claim: name}
		if kind == "emptyDir" {
			vol.Source = &corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
		} else if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, kit.PVC(ns, name, "bench", "1Mi"), metav1.CreateOptions{}); err != nil {
			return res, err
		}
		// A watch opened before the create sees the Running update as it
		// happens, without polling granularity.
		w, err := c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		if err != nil {
			return res, err
		}
		start := time.Now()
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, kit.OnNode(kit.Pod(ns, name, "sleep 3600", vol), node), metav1.CreateOptions{}); err != nil {
			w.Stop()
			return res, err
		}
		err = waitRunning(w, 2*time.Minute)
		elapsed := time.Since(start)
		w.Stop()
		if err != nil {
			return res, fmt.Errorf("pod %s: %w", name, err)
		}
		res.Samples = append(res.Samples, elapsed.Seconds())
	}
	sorted := slices.Clone(res.Samples)
	slices.Sort(sorted)
	res.MedianSeconds = sorted[len(sorted)/2]
	res.MaxSeconds = sorted[len(sorted)-1]
	zero := int64(0)
	_ = c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	_ = c.Client.CoreV1().PersistentVolumeClaims(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	return res, nil
}

// waitRunning reads pod events from w until the pod is Running.
func waitRunning(w watch.Interface, timeout time.Duration) error {
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return errors.New("watch closed before the pod ran")
			}
			if p, isPod := ev.Object.(*corev1.Pod); isPod && p.Status.Phase == corev1.PodRunning {
				return nil
			}
		case <-deadline:
			return fmt.Errorf("not Running within %v", timeout)
		}
	}
}

func printReport(rep report) {
	cp := "controller-manager and scheduler at their default API QPS (20, 50)"
	if rep.ControlPlaneQPS > 0 {
		cp = fmt.Sprintf("controller-manager and scheduler at API QPS %d", rep.ControlPlaneQPS)
	}
	fmt.Printf("\nEnd-to-end provisioning, %d nodes (1 real, %d simulated), %s, Kubernetes %s, %s\n\n", rep.Nodes, rep.Nodes-1, rep.Machine, rep.K8sVersion, cp)
	fmt.Printf("%-8s %6s %12s %10s %14s %16s %12s\n", "flags", "N", "all Bound s", "PVC/s", "real-node pods", "all Running s", "deleted s")
	for _, r := range rep.Provision {
		fmt.Printf("%-8s %6d %12.1f %10.1f %14d %16.1f %12.1f\n", r.Flags, r.N, r.BoundSeconds, r.PVCsPerSec, r.RealNodePods, r.RunningSeconds, r.DeleteSeconds)
	}
	fmt.Printf("\nflags: default = csi-provisioner defaults; tuned = %s\n", strings.Join(flagSets()[1].Args, " "))
	fmt.Printf("\nPod start latency on the real node (creation to Running):\n")
	for _, l := range rep.PodStart {
		fmt.Printf("  %-9s median %.2fs  max %.2fs  (%d pods)\n", l.Volume, l.MedianSeconds, l.MaxSeconds, len(l.Samples))
	}
	out, _ := json.MarshalIndent(rep, "", "  ")
	fmt.Printf("\n%s\n", out)
}
