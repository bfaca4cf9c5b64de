package main

import (
	"context"
	"errors"
	"fmt"
	"net"
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

const (
	ns          = "crossnode"
	goldenClaim = "golden-image"
	// headBytes of disk.img each pod hashes: its first extent and holes,
	// cheap enough for N pods on 2 cores.
	headBytes = 16 << 20
)

// run sets the cluster up, measures, and tears it down.
func run(ctx context.Context, bins cluster.Binaries, hppcsi string, n, dataMiB, cpQPS int) (rep report, err error) {
	rep = report{Machine: kit.Machine(), K8sVersion: cluster.K8sVersion, N: n, DataMiB: dataMiB, StartedAt: time.Now().UTC()}
	env, err := kit.Setup(ctx, kit.SetupOptions{Binaries: bins, HPPCSI: hppcsi, Logf: logf, HandleSignals: true, ControlPlaneQPS: cpQPS})
	if err != nil {
		return rep, err
	}
	defer func() {
		if stopErr := env.Stop(context.Background()); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	c := env.C
	golden, err := env.AddPeerNode(ctx, "golden", net.IPv4(127, 0, 0, 2), nil)
	if err != nil {
		return rep, err
	}
	sc := kit.StorageClass("crossnode", kit.PoolLocal)
	if _, err := c.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		return rep, err
	}
	if err := kit.WaitCapacity(ctx, c, sc.Name, 2); err != nil {
		return rep, err
	}
	if err := c.CreateNamespace(ctx, ns); err != nil {
		return rep, err
	}
	src, err := goldenImage(ctx, env, golden, sc.Name, dataMiB)
	if err != nil {
		return rep, err
	}
	rep.AllocatedBytes = src.allocated
	logf("golden image on %s: %d bytes allocated in %s", golden.Name, src.allocated, src.dir)

	tarDst := filepath.Join(env.Pools[kit.PoolLocal], "tar-baseline")
	if rep.TarSeconds, err = tarPipe(ctx, src.dir, tarDst); err != nil {
		return rep, err
	}
	logf("tar baseline: %.2fs", rep.TarSeconds)

	before, err := readCounters(ctx, c.RealNode(), golden)
	if err != nil {
		return rep, err
	}
	hppLog := c.RealNode().Process("hpp-csi").LogPath()
	logStart, err := fileSize(hppLog)
	if err != nil {
		return rep, err
	}
	if err := cloneAll(ctx, env, sc.Name, src, &rep); err != nil {
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

// source is the golden image claim's tree on the golden node and what a
// pod that reads a clone of it must print.
type source struct {
	dir       string
	allocated int64
	want      string
}

func goldenImage(ctx context.Context, env *kit.Env, golden *cluster.Node, class string, dataMiB int) (source, error) {
	c := env.C
	pvc := kit.PVC(ns, goldenClaim, class, "2Gi")
	pvc.Annotations = map[string]string{contract.AnnSelectedNode: golden.Name}
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		return source{}, err
	}
	bound, err := kit.WaitPVCBound(ctx, c.Client, ns, goldenClaim, 2*time.Minute)
	if err != nil {
		return source{}, err
	}
	pv, err := c.Client.CoreV1().PersistentVolumes().Get(ctx, bound.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return source{}, err
	}
	s := source{dir: filepath.Join(golden.Dir(), "pools", kit.PoolLocal, "csi", pv.Spec.CSI.VolumeHandle)}
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

// cloneAll creates the N clones, each with a pod on the real node, all at
// once, and records when all are Bound and when every pod has read its
// copy back (and whether each read the source's bytes).
func cloneAll(ctx context.Context, env *kit.Env, class string, src source, rep *report) error {
	c := env.C
	real := c.RealNode().Name
	start := time.Now()
	if err := kit.Parallel(rep.N, 16, func(i int) error {
		name := fmt.Sprintf("vm-%03d", i)
		pvc := kit.PVC(ns, name, class, "2Gi")
		pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: goldenClaim}
		if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
			return err
		}
		pod := kit.OnNode(kit.Pod(ns, name, podScript, kit.PodVolume{Name: "v", Claim: name, Path: "/data"}), real)
		_, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	var bound, read time.Duration
	err := kit.PollEvery(ctx, 10*time.Minute, 100*time.Millisecond, fmt.Sprintf("%d clones Bound and read", rep.N), func(ctx context.Context) (bool, string, error) {
		pvcs, err := c.Client.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", kit.Retry(err)
		}
		nb := 0
		for _, p := range pvcs.Items {
			if p.Name != goldenClaim && p.Status.Phase == corev1.ClaimBound {
				nb++
			}
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
	rep.BoundSeconds, rep.ReadSeconds = bound.Seconds(), read.Seconds()
	var bad []string
	for i := range rep.N {
		name := fmt.Sprintf("vm-%03d", i)
		logs, err := kit.PodLogs(ctx, c.Client, ns, name)
		if err != nil {
			return err
		}
		if logs != src.want {
			bad = append(bad, fmt.Sprintf("%s read:\n%s", name, logs))
		}
	}
	rep.ReadBack = rep.N - len(bad)
	if len(bad) > 0 {
		return fmt.Errorf("%d of %d pods did not read the golden image's bytes (want:\n%s)\n%s", len(bad), rep.N, src.want, strings.Join(bad, "\n"))
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
