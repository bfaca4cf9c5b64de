// Command legacy benchmarks hpp-legacy, the legacy hostPath provisioner,
// on a local cluster (test/cluster): the real node plus simulated ones,
// each running hpp-legacy with its own PV_DIR, and hpp-csi with
// csi-provisioner for the comparison. For N claims it measures the
// seconds from creating them to all Bound, and from deleting them to all
// PVs gone:
//
//   - legacy/pods: WaitForFirstConsumer claims, each with a pod that the
//     scheduler places (what a workload sees: scheduler + provisioner);
//   - legacy/pinned: Immediate claims with kubevirt.io/provisionOnNode,
//     round-robin over the nodes, no pods (the provisioners alone);
//   - csi/pods: the same claims and pods on hpp-csi, for the same N.
//
// Each legacy run is done with hpp-legacy's defaults and with a tuned API
// client. Results go to stdout as a table and as JSON.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/test/cluster"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

type config struct {
	n        int
	simNodes int
	legacy   string // hpp-legacy binary
	hppcsi   string // hpp-csi binary ("" builds it)
	skipCSI  bool
	cpQPS    int // kube-controller-manager and kube-scheduler API QPS; 0: their defaults
}

// legacyFlags are the hpp-legacy configurations compared.
func legacyFlags() map[string][]string {
	return map[string][]string{
		"default": nil,
		"tuned":   {"--kube-api-qps=100", "--kube-api-burst=200", "--worker-threads=16"},
	}
}

type result struct {
	Driver string `json:"driver"`
	Mode   string `json:"mode"`
	Flags  string `json:"flags"`
	N      int    `json:"n"`
	Nodes  int    `json:"nodes"`
	// PVsSeconds: until the provisioners created all N PVs; the rest of
	// BoundSeconds is the PV controller binding them.
	PVsSeconds    float64 `json:"pvs_created_seconds"`
	BoundSeconds  float64 `json:"bound_seconds"`
	PVCsPerSec    float64 `json:"pvcs_per_second"`
	DeleteSeconds float64 `json:"delete_seconds"`
	// PerNode is how many volumes each node provisioned.
	PerNode map[string]int `json:"per_node"`
}

type report struct {
	Machine         string    `json:"machine"`
	ControlPlaneQPS int       `json:"control_plane_qps"`
	K8sVersion      string    `json:"k8s_version"`
	StartedAt       time.Time `json:"started_at"`
	Results         []result  `json:"results"`
}

func main() {
	binDir := flag.String("bin-dir", "", "directory with hpp-legacy and hpp-csi (built from cmd/ when missing)")
	n := flag.Int("n", 200, "claims per run")
	simNodes := flag.Int("sim-nodes", 2, "simulated nodes besides the real one")
	skipCSI := flag.Bool("skip-csi", false, "do not measure hpp-csi for comparison")
	cpQPS := flag.Int("control-plane-qps", 0, "kube-controller-manager and kube-scheduler --kube-api-qps (burst twice that); 0 keeps their defaults, which cap binding near 4 claims/s")
	flag.Parse()
	if *n < 1 || *simNodes < 0 || *cpQPS < 0 {
		fmt.Fprintln(os.Stderr, "legacy bench: -n must be at least 1, -sim-nodes and -control-plane-qps at least 0")
		os.Exit(2)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "legacy bench: needs root (it runs kubelet and containerd on this machine)")
		os.Exit(1)
	}
	cfg := config{n: *n, simNodes: *simNodes, skipCSI: *skipCSI, cpQPS: *cpQPS}
	if *binDir != "" {
		if p := filepath.Join(*binDir, "hpp-legacy"); exists(p) {
			cfg.legacy = p
		}
		if p := filepath.Join(*binDir, "hpp-csi"); exists(p) {
			cfg.hppcsi = p
		}
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "legacy bench:", err)
		os.Exit(1)
	}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "legacy-bench %s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func run(cfg config) (err error) {
	ctx := context.Background()
	if cfg.legacy == "" {
		cfg.legacy = filepath.Join(os.TempDir(), fmt.Sprintf("hpp-legacy-bench-%d", os.Getpid()))
		if err := kit.BuildCommand(ctx, "hpp-legacy", cfg.legacy); err != nil {
			return err
		}
	}
	cache, _ := cluster.CacheDir()
	env, err := kit.Setup(ctx, kit.SetupOptions{Binaries: cluster.BinariesFromCache(cache), HPPCSI: cfg.hppcsi, Logf: logf, HandleSignals: true, MaxPods: 1000, ControlPlaneQPS: cfg.cpQPS})
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := env.Stop(context.Background()); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	c := env.C
	if err := env.AddSimulatedNodes(ctx, cfg.simNodes, 1000, !cfg.skipCSI); err != nil {
		return err
	}
	rep := report{Machine: kit.Machine(), ControlPlaneQPS: cfg.cpQPS, K8sVersion: cluster.K8sVersion, StartedAt: time.Now().UTC()}
	for _, name := range []string{"default", "tuned"} {
		if err := startLegacyEverywhere(ctx, c, cfg.legacy, legacyFlags()[name]); err != nil {
			return err
		}
		for _, mode := range []string{"pods", "pinned"} {
			res, err := measure(ctx, c, "legacy", mode, name, cfg.n)
			if err != nil {
				return fmt.Errorf("legacy/%s %s N=%d: %w", mode, name, cfg.n, err)
			}
			rep.Results = append(rep.Results, res)
		}
	}
	if !cfg.skipCSI {
		res, err := measure(ctx, c, "csi", "pods", "default", cfg.n)
		if err != nil {
			return fmt.Errorf("csi/pods N=%d: %w", cfg.n, err)
		}
		rep.Results = append(rep.Results, res)
	}
	printReport(rep)
	return nil
}

// startLegacyEverywhere (re)starts hpp-legacy on every node with args.
func startLegacyEverywhere(ctx context.Context, c *cluster.Cluster, bin string, args []string) error {
	for _, n := range c.Nodes() {
		if n.Process("hpp-legacy") != nil {
			if err := n.StopProcess(ctx, "hpp-legacy"); err != nil {
				return err
			}
		}
		_, err := n.StartProcess(cluster.ProcessSpec{
			Name: "hpp-legacy", Path: bin,
			Args: append([]string{"--http-address="}, args...),
			Env:  []string{"PV_DIR=" + filepath.Join(n.Dir(), "legacy")},
		})
		if err != nil {
			return err
		}
	}
	logf("hpp-legacy (re)started on %d nodes with %v", len(c.Nodes()), args)
	return nil
}

// measure creates n claims at once (with a pod each in mode "pods"),
// times them to Bound, then deletes them and times the PVs' removal.
func measure(ctx context.Context, c *cluster.Cluster, driver, mode, flags string, n int) (result, error) {
	nodes := c.Nodes()
	res := result{Driver: driver, Mode: mode, Flags: flags, N: n, Nodes: len(nodes), PerNode: map[string]int{}}
	ns := fmt.Sprintf("bench-%s-%s-%s", driver, mode, flags)
	if err := c.CreateNamespace(ctx, ns); err != nil {
		return res, err
	}
	sc := storageClass(ns, driver, mode)
	if _, err := c.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		return res, err
	}
	defer func() {
		_ = c.Client.StorageV1().StorageClasses().Delete(context.Background(), sc.Name, metav1.DeleteOptions{})
	}()
	if driver == "csi" {
		if err := kit.WaitCapacity(ctx, c, sc.Name, len(nodes)); err != nil {
			return res, err
		}
	}
	start := time.Now()
	err := kit.Parallel(n, 16, func(i int) error {
		name := fmt.Sprintf("v-%04d", i)
		pvc := kit.PVC(ns, name, sc.Name, "1Mi")
		if mode == "pinned" {
			pvc.Annotations = map[string]string{contract.AnnProvisionOnNode: nodes[i%len(nodes)].Name}
		}
		if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
			return err
		}
		if mode != "pods" {
			return nil
		}
		_, err := c.Client.CoreV1().Pods(ns).Create(ctx, kit.Pod(ns, name, "sleep 3600", kit.PodVolume{Name: "v", Claim: name, Path: "/data"}), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return res, err
	}
	var pvsDone time.Duration
	err = kit.Poll(ctx, 20*time.Minute, fmt.Sprintf("%d claims Bound", n), func(ctx context.Context) (bool, string, error) {
		if pvsDone == 0 {
			pvs, err := c.Client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, "", kit.Retry(err)
			}
			made := 0
			for _, pv := range pvs.Items {
				if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == ns {
					made++
				}
			}
			if made == n {
				pvsDone = time.Since(start)
			}
		}
		pvcs, err := c.Client.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", kit.Retry(err)
		}
		bound := 0
		for _, p := range pvcs.Items {
			if p.Status.Phase == corev1.ClaimBound {
				bound++
			}
		}
		return bound == n && pvsDone > 0, fmt.Sprintf("%d/%d bound", bound, n), nil
	})
	if err != nil {
		return res, err
	}
	res.PVsSeconds = pvsDone.Seconds()
	res.BoundSeconds = time.Since(start).Seconds()
	res.PVCsPerSec = float64(n) / res.BoundSeconds
	if err := countPerNode(ctx, c, ns, res.PerNode); err != nil {
		return res, err
	}
	logf("%s/%s %s N=%d: all PVs created in %.1fs, all Bound in %.1fs (%.1f PVC/s), per node %v", driver, mode, flags, n, res.PVsSeconds, res.BoundSeconds, res.PVCsPerSec, res.PerNode)

	took, err := kit.DeleteClaimsAndWait(ctx, c.Client, ns, 20*time.Minute)
	res.DeleteSeconds = took.Seconds()
	if err != nil {
		return res, err
	}
	logf("%s/%s %s N=%d: all deleted in %.1fs", driver, mode, flags, n, res.DeleteSeconds)
	_ = c.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	return res, nil
}

func storageClass(name, driver, mode string) *storagev1.StorageClass {
	if driver == "csi" {
		return kit.StorageClass(name, kit.PoolLocal)
	}
	binding := storagev1.VolumeBindingWaitForFirstConsumer
	if mode == "pinned" {
		binding = storagev1.VolumeBindingImmediate
	}
	return &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       contract.LegacyProvisionerName,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: &binding,
	}
}

// countPerNode counts the namespace's PVs by the node their affinity names.
func countPerNode(ctx context.Context, c *cluster.Cluster, ns string, out map[string]int) error {
	pvs, err := c.Client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, pv := range pvs.Items {
		if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Namespace != ns || pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
			continue
		}
		for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
			for _, req := range term.MatchExpressions {
				for _, v := range req.Values {
					out[v]++
				}
			}
		}
	}
	return nil
}

// buildLegacy builds cmd/hpp-legacy (found from this source file) into dir.

func printReport(rep report) {
	cp := "controller-manager and scheduler at their default API QPS"
	if rep.ControlPlaneQPS > 0 {
		cp = fmt.Sprintf("controller-manager and scheduler at API QPS %d", rep.ControlPlaneQPS)
	}
	fmt.Printf("\nhpp-legacy provisioning, %s, Kubernetes %s, %s\n\n", rep.Machine, rep.K8sVersion, cp)
	fmt.Printf("%-8s %-7s %-8s %5s %6s %10s %12s %8s %10s  %s\n", "driver", "mode", "flags", "N", "nodes", "all PVs s", "all Bound s", "PVC/s", "deleted s", "per node")
	for _, r := range rep.Results {
		fmt.Printf("%-8s %-7s %-8s %5d %6d %10.1f %12.1f %8.1f %10.1f  %v\n", r.Driver, r.Mode, r.Flags, r.N, r.Nodes, r.PVsSeconds, r.BoundSeconds, r.PVCsPerSec, r.DeleteSeconds, r.PerNode)
	}
	fmt.Printf("\nmodes: pods = WaitForFirstConsumer claims each with a pod the scheduler places; pinned = Immediate claims with " + contract.AnnProvisionOnNode + " round-robin, no pods\n")
	fmt.Printf("all PVs s: until the provisioners created every PV; all Bound s adds kube-controller-manager's PV controller binding them\n")
	fmt.Printf("flags: legacy tuned = %s; csi = csi-provisioner defaults\n", strings.Join(legacyFlags()["tuned"], " "))
	out, _ := json.MarshalIndent(rep, "", "  ")
	fmt.Printf("\n%s\n", out)
}
