package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/test/cluster"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

const (
	ns = "crossnode"
	// headBytes of disk.img each pod hashes: its first extent and holes,
	// cheap enough for N pods on 2 cores.
	headBytes = 16 << 20
)

// xfsPool is the real node's pool on XFS with reflink (-pool-fs xfs).
const xfsPool = "xfs"

// deployedProvisionerArgs are the csi-provisioner flags of
// deploy/base/csi-driver/generated.yaml (hpp-operator's render).
var deployedProvisionerArgs = []string{"--kube-api-qps=50", "--kube-api-burst=100", "--worker-threads=20"}

// run sets the cluster up, measures, and tears it down: first one clone
// alone into the fast pool (the machine quiet), timed against tar of the
// same tree into the same pool; then the N clones at once into the pool
// under test, from a golden claim of their own class (a clone's class is
// its source's), whose first fetch fills that pool's empty clone cache.
func run(ctx context.Context, bins cluster.Binaries, hppcsi string, n, dataMiB, cpQPS int, poolFS, keepLogs string) (rep report, err error) {
	rep = report{Machine: kit.Machine(), K8sVersion: cluster.K8sVersion, N: n, DataMiB: dataMiB, PoolFS: poolFS, StartedAt: time.Now().UTC()}
	opts := kit.SetupOptions{Binaries: bins, HPPCSI: hppcsi, Logf: logf, HandleSignals: true, ControlPlaneQPS: cpQPS}
	burstPool := kit.PoolLocal
	if poolFS == "xfs" {
		// Room for the volumes' requests (each checked alone), the
		// shared data and the cache: the image is sparse.
		opts.XFSPools = map[string]int64{xfsPool: 16 << 30}
		burstPool = xfsPool
	}
	env, err := kit.Setup(ctx, opts)
	if err != nil {
		return rep, err
	}
	defer func() {
		if keepLogs != "" {
			if out, cerr := exec.Command("cp", "-a", filepath.Join(env.C.Dir, "logs"), keepLogs).CombinedOutput(); cerr != nil {
				logf("logs not kept: %v: %s", cerr, out)
			}
		}
		if stopErr := env.Stop(context.Background()); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	c := env.C
	golden, err := env.AddPeerNode(ctx, "golden", net.IPv4(127, 0, 0, 2), nil, kit.PoolFast, xfsPool)
	if err != nil {
		return rep, err
	}
	// csi-provisioner as hpp deploys it (deploy/base/csi-driver, the
	// operator's defaults): the harness's runs with csi-provisioner's own
	// (5 API requests per second), which caps binding near 2 claims/s.
	real := c.RealNode()
	if err := real.StopProcess(ctx, "csi-provisioner"); err != nil {
		return rep, err
	}
	if err := real.StartCSIProvisioner(deployedProvisionerArgs...); err != nil {
		return rep, err
	}
	if err := c.CreateNamespace(ctx, ns); err != nil {
		return rep, err
	}
	first, err := newClass(ctx, env, "crossnode-first", kit.PoolFast, golden, dataMiB, 3)
	if err != nil {
		return rep, err
	}
	burst, err := newClass(ctx, env, "crossnode", burstPool, golden, dataMiB, 1)
	if err != nil {
		return rep, err
	}
	rep.AllocatedBytes = burst.src().allocated
	logf("golden images on %s: %d bytes allocated each", golden.Name, burst.src().allocated)

	hppLog := real.Process("hpp-csi").LogPath()
	if err := firstTransfer(ctx, env, first, hppLog, &rep); err != nil {
		return rep, err
	}
	before, err := readCounters(ctx, c.RealNode(), golden)
	if err != nil {
		return rep, err
	}
	logStart, err := fileSize(hppLog)
	if err != nil {
		return rep, err
	}
	if err := cloneAll(ctx, env, burst, &rep); err != nil {
		return rep, err
	}
	after, err := readCounters(ctx, c.RealNode(), golden)
	if err != nil {
		return rep, err
	}
	rep.counters(before, after)
	copies, err := readCopyLogs(hppLog, logStart)
	if err != nil {
		return rep, err
	}
	rep.transfers(copies)
	return rep, nil
}

// class is a StorageClass on one pool and its golden image claims.
type class struct {
	name, pool string
	srcs       []source
}

// src is the class's (first) golden image.
func (cl class) src() source { return cl.srcs[0] }

// newClass creates the class and images golden image claims of it on the
// golden node.
func newClass(ctx context.Context, env *kit.Env, name, pool string, golden *cluster.Node, dataMiB, images int) (class, error) {
	c := env.C
	cl := class{name: name, pool: pool}
	if _, err := c.Client.StorageV1().StorageClasses().Create(ctx, kit.StorageClass(name, pool), metav1.CreateOptions{}); err != nil {
		return cl, err
	}
	if err := kit.WaitCapacity(ctx, c, name, 2); err != nil {
		return cl, err
	}
	for i := range images {
		s, err := goldenImage(ctx, env, golden, fmt.Sprintf("golden-%s-%d", name, i), cl, dataMiB)
		if err != nil {
			return cl, err
		}
		cl.srcs = append(cl.srcs, s)
	}
	return cl, nil
}

// firstTransfer takes turns, once per golden image of cl: GNU tar piping
// the image's tree into the pool's directory, then one clone of it alone
// into that pool (a source of its own each time, so that the pool's clone
// cache never serves it), and records the medians. A clone's transfer
// time is hpp-csi's own (the fetch, the tree recreated and synced), from
// its log.
func firstTransfer(ctx context.Context, env *kit.Env, cl class, hppLog string, rep *report) error {
	var tars, alone []float64
	for i, src := range cl.srcs {
		s, err := tarPipe(ctx, src.dir, filepath.Join(env.Pools[cl.pool], "tar-baseline"))
		if err != nil {
			return err
		}
		tars = append(tars, s)
		logStart, err := fileSize(hppLog)
		if err != nil {
			return err
		}
		one := cl
		one.srcs = []source{src}
		prefix := fmt.Sprintf("alone%d", i)
		if err := createClones(ctx, env, one, prefix, 1); err != nil {
			return err
		}
		if _, err := kit.WaitPodPhase(ctx, env.C.Client, ns, prefix+"-000", corev1.PodSucceeded, 5*time.Minute); err != nil {
			return err
		}
		copies, err := readCopyLogs(hppLog, logStart)
		if err != nil {
			return err
		}
		if len(copies.transfers) != 1 {
			return fmt.Errorf("clone %s-000 alone: %d transfers logged, want 1", prefix, len(copies.transfers))
		}
		t := copies.transfers[0]
		alone = append(alone, t.Took)
		rep.AloneDataBytes = t.DataBytes
		logf("round %d: tar %.2fs, one clone alone %.2fs (%d bytes)", i+1, s, t.Took, t.DataBytes)
	}
	rep.TarRuns, rep.AloneRuns = tars, alone
	rep.TarSeconds, rep.AloneSeconds = median(tars), median(alone)
	return nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// source is the golden image claim's tree on the golden node and what a
// pod that reads a clone of it must print.
type source struct {
	claim     string
	dir       string
	allocated int64
	want      string
}

func goldenImage(ctx context.Context, env *kit.Env, golden *cluster.Node, claim string, cl class, dataMiB int) (source, error) {
	c := env.C
	s := source{claim: claim}
	pvc := kit.PVC(ns, s.claim, cl.name, "2Gi")
	pvc.Annotations = map[string]string{contract.AnnSelectedNode: golden.Name}
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		return s, err
	}
	bound, err := kit.WaitPVCBound(ctx, c.Client, ns, s.claim, 2*time.Minute)
	if err != nil {
		return s, err
	}
	pv, err := c.Client.CoreV1().PersistentVolumes().Get(ctx, bound.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return s, err
	}
	s.dir = filepath.Join(golden.Dir(), "pools", cl.pool, "csi", pv.Spec.CSI.VolumeHandle)
	if err := kit.WriteGoldenImage(s.dir, dataMiB); err != nil {
		return s, err
	}
	if s.allocated, err = kit.AllocatedBytes(s.dir); err != nil {
		return s, err
	}
	var want strings.Builder
	for i := range 10 {
		sum, err := kit.FileSum(filepath.Join(s.dir, "small", fmt.Sprintf("f%d", i)), -1)
		if err != nil {
			return s, err
		}
		fmt.Fprintf(&want, "%s  small/f%d\n", sum, i)
	}
	head, err := kit.FileSum(filepath.Join(s.dir, "disk.img"), headBytes)
	if err != nil {
		return s, err
	}
	fmt.Fprintf(&want, "%s  -\n", head)
	s.want = want.String()
	return s, nil
}

// podScript prints what source.want holds.
const podScript = "cd /data && sha256sum small/f0 small/f1 small/f2 small/f3 small/f4 small/f5 small/f6 small/f7 small/f8 small/f9 && head -c 16777216 disk.img | sha256sum"

// createClones creates n clones of cl's golden claim, prefix-000 on, each
// with a pod on the real node that reads its copy back.
func createClones(ctx context.Context, env *kit.Env, cl class, prefix string, n int) error {
	c := env.C
	real := c.RealNode().Name
	return kit.Parallel(n, 16, func(i int) error {
		name := fmt.Sprintf("%s-%03d", prefix, i)
		pvc := kit.PVC(ns, name, cl.name, "2Gi")
		pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: cl.src().claim}
		if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
			return err
		}
		pod := kit.OnNode(kit.Pod(ns, name, podScript, kit.PodVolume{Name: "v", Claim: name, Path: "/data"}), real)
		_, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
}

// cloneAll creates the N clones at once and records when all are Bound
// and when every pod has read its copy back (and whether each read the
// source's bytes).
func cloneAll(ctx context.Context, env *kit.Env, cl class, rep *report) error {
	c := env.C
	start := time.Now()
	if err := createClones(ctx, env, cl, "vm", rep.N); err != nil {
		return err
	}
	var half, bound, read time.Duration
	err := kit.PollEvery(ctx, 10*time.Minute, 100*time.Millisecond, fmt.Sprintf("%d clones Bound and read", rep.N), func(ctx context.Context) (bool, string, error) {
		pvcs, err := c.Client.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", kit.Retry(err)
		}
		nb := 0
		for _, p := range pvcs.Items {
			if strings.HasPrefix(p.Name, "vm-") && p.Status.Phase == corev1.ClaimBound {
				nb++
			}
		}
		if nb >= (rep.N+1)/2 && half == 0 {
			half = time.Since(start)
		}
		if nb == rep.N && bound == 0 {
			bound = time.Since(start)
		}
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", kit.Retry(err)
		}
		done, failed := 0, 0
		for _, p := range pods.Items {
			if !strings.HasPrefix(p.Name, "vm-") {
				continue
			}
			switch p.Status.Phase {
			case corev1.PodSucceeded:
				done++
			case corev1.PodFailed:
				failed++
			}
		}
		if failed > 0 {
			return false, "", fmt.Errorf("%d pods failed", failed)
		}
		if done == rep.N && read == 0 {
			read = time.Since(start)
		}
		return bound > 0 && read > 0, fmt.Sprintf("%d/%d bound, %d/%d pods done", nb, rep.N, done, rep.N), nil
	})
	if err != nil {
		return err
	}
	rep.BoundP50Seconds, rep.BoundSeconds, rep.ReadSeconds = half.Seconds(), bound.Seconds(), read.Seconds()
	var bad []string
	for i := range rep.N {
		name := fmt.Sprintf("vm-%03d", i)
		logs, err := kit.PodLogs(ctx, c.Client, ns, name)
		if err != nil {
			return err
		}
		if logs != cl.src().want {
			bad = append(bad, fmt.Sprintf("%s read:\n%s", name, logs))
		}
	}
	rep.ReadBack = rep.N - len(bad)
	if len(bad) > 0 {
		return fmt.Errorf("%d of %d pods did not read the golden image's bytes (want:\n%s)\n%s", len(bad), rep.N, cl.src().want, strings.Join(bad, "\n"))
	}
	return nil
}

func fileSize(path string) (int64, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
