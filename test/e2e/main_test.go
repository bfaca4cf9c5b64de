// Package e2e holds hpp-csi's end-to-end scenarios on a local cluster
// (test/cluster); what they share with `make demo`, the benchmarks and
// other test packages is in test/e2e/kit.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostpath-provisioner/hpp/internal/testutil"
	"github.com/hostpath-provisioner/hpp/test/cluster"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// suite is the one cluster every scenario shares (bring-up costs ~15 s);
// each scenario works in its own namespace and StorageClasses.
type suite struct {
	env *kit.Env
	// skipReason says why the scenarios cannot run here ("" when they
	// can); missing, that the reason is a missing prerequisite (root, the
	// cluster binaries), which fails every scenario under CI=true, and not
	// the tier gate.
	skipReason string
	missing    bool
	// noSnapshots says why the snapshot scenarios cannot run ("" when
	// they can).
	noSnapshots string
}

// theSuite is set once by TestMain before any test runs and only read
// after; tests reach it through needEnv.
var theSuite suite

func TestMain(m *testing.M) {
	code := func() int {
		theSuite.skipReason, theSuite.missing = skipReason()
		if theSuite.skipReason != "" {
			if theSuite.missing && os.Getenv("CI") == "true" {
				fmt.Println("e2e: CI=true and the environment does not validate, every scenario fails:", theSuite.skipReason)
			} else {
				fmt.Println("e2e: every scenario skips:", theSuite.skipReason)
			}
			return m.Run()
		}
		// No deadline: Setup first waits for the machine lock, as long as
		// other runs on this machine hold it; each bring-up step has its
		// own timeout and go test's -timeout bounds the whole.
		ctx := context.Background()
		cache, _ := cluster.CacheDir()
		hppcsi := ""
		binaries := cluster.BinariesFromCache(cache)
		if dir := os.Getenv("HPP_BIN_DIR"); dir != "" {
			if _, err := os.Stat(filepath.Join(dir, "hpp-csi")); err == nil {
				hppcsi = filepath.Join(dir, "hpp-csi")
			}
			// A prebuilt pause where there is no Go toolchain (the quota VM).
			if _, err := os.Stat(filepath.Join(dir, "pause")); err == nil {
				binaries.Pause = filepath.Join(dir, "pause")
			}
		}
		logf := func(format string, args ...any) {
			fmt.Printf("e2e %s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
		}
		var snapshotter *cluster.Snapshotter
		if sn, err := cluster.SnapshotterFromCache(cache); err == nil {
			snapshotter = &sn
		} else {
			theSuite.noSnapshots = err.Error()
		}
		env, err := kit.Setup(ctx, kit.SetupOptions{
			Binaries: binaries, HPPCSI: hppcsi, Logf: logf, HandleSignals: true,
			TmpfsPools: map[string]int64{PoolCapacity: realNodeCapacity}, Snapshotter: snapshotter,
			QuotaPools: quotaPools,
		})
		if err != nil {
			fmt.Println("e2e: cluster setup failed:", err)
			return 1
		}
		theSuite.env = env
		code := m.Run()
		stopCtx, stopCancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer stopCancel()
		if err := env.Stop(stopCtx); err != nil {
			fmt.Println("e2e: teardown:", err)
			return 1
		}
		return code
	}()
	os.Exit(code)
}

// skipReason says why this machine cannot run the scenarios, or "";
// missing is true when the reason is a missing prerequisite (in the e2e
// tier: not root, the cluster binaries not built or not valid) rather than
// another tier.
func skipReason() (reason string, missing bool) {
	if tier := os.Getenv("HPP_TEST_TIER"); tier != "e2e" {
		return fmt.Sprintf("the cluster tier runs with `make e2e` (HPP_TEST_TIER=e2e), this is tier %q", tier), false
	}
	if os.Geteuid() != 0 {
		return "needs root (kubelet, containerd, mounts)", true
	}
	cache, _ := cluster.CacheDir()
	if err := cluster.BinariesFromCache(cache).Validate(); err != nil {
		return err.Error(), true
	}
	return "", false
}

// needEnv skips the test if the suite could not run here (fails it under
// CI=true when a prerequisite is missing in the e2e tier), and on failure
// prints every component's log tail and saves the logs.
func needEnv(t *testing.T) *kit.Env {
	t.Helper()
	if theSuite.skipReason != "" {
		if theSuite.missing {
			testutil.MissingPrerequisite(t, "e2e: %s", theSuite.skipReason)
		}
		t.Skip(theSuite.skipReason)
	}
	env := theSuite.env
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		var buf bytes.Buffer
		env.C.DumpLogTails(&buf, 25)
		t.Log(buf.String())
		if dir := os.Getenv("HPP_E2E_LOGS"); dir != "" {
			dest := filepath.Join(dir, t.Name())
			if err := env.C.SaveLogs(dest); err != nil {
				t.Logf("saving logs: %v", err)
			} else {
				t.Logf("component logs saved in %s", dest)
			}
		}
	})
	return env
}

// namespace creates a namespace for one test and deletes it afterwards.
func namespace(t *testing.T, env *kit.Env) string {
	t.Helper()
	ns := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(ns) > 60 {
		ns = ns[:60]
	}
	ns = strings.Trim(ns, "-")
	ctx := context.Background()
	if err := env.C.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Pods first, at once, so their claims can go.
		_ = env.C.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{})
		_ = env.C.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	})
	return ns
}

// storageClass creates sc for the test and deletes it afterwards.
func storageClass(t *testing.T, env *kit.Env, sc *storagev1.StorageClass) *storagev1.StorageClass {
	t.Helper()
	ctx := context.Background()
	created, err := env.C.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.C.Client.StorageV1().StorageClasses().Delete(ctx, sc.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete storage class %s: %v", sc.Name, err)
		}
	})
	return created
}

func createPVC(t *testing.T, env *kit.Env, pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	t.Helper()
	created, err := env.C.Client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Create(context.Background(), pvc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

func createPod(t *testing.T, env *kit.Env, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	created, err := env.C.Client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// boundPV returns the PV bound to a claim, after waiting for the binding.
func boundPV(t *testing.T, env *kit.Env, ns, claim string) *corev1.PersistentVolume {
	t.Helper()
	return boundPVWithin(t, env, ns, claim, 2*time.Minute)
}

// boundPVWithin waits up to within for claim to be Bound and returns its
// PV; a timeout fails the test with the claim's events.
func boundPVWithin(t *testing.T, env *kit.Env, ns, claim string, within time.Duration) *corev1.PersistentVolume {
	t.Helper()
	ctx := context.Background()
	pvc, err := kit.WaitPVCBound(ctx, env.C.Client, ns, claim, within)
	if err != nil {
		t.Fatalf("%v\n%s", err, kit.Events(ctx, env.C.Client, ns, "PersistentVolumeClaim", claim))
	}
	pv, err := env.C.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pv
}

// deletePodNow deletes a pod without grace and waits until it is gone
// (kubelet has unmounted its volumes).
func deletePodNow(t *testing.T, env *kit.Env, ns, name string) {
	t.Helper()
	ctx := context.Background()
	if err := env.C.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if err := kit.WaitGone(ctx, "pod "+ns+"/"+name, 2*time.Minute, func(ctx context.Context) error {
		_, err := env.C.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

func deletePVC(t *testing.T, env *kit.Env, ns, name string) {
	t.Helper()
	if err := env.C.Client.CoreV1().PersistentVolumeClaims(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func waitPVGone(t *testing.T, env *kit.Env, name string) {
	t.Helper()
	if err := kit.WaitGone(context.Background(), "pv "+name, 2*time.Minute, func(ctx context.Context) error {
		_, err := env.C.Client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// volumeDir is where hpp-csi keeps a volume: <pool>/csi/<volume id>.
func volumeDir(poolPath string, pv *corev1.PersistentVolume) string {
	return filepath.Join(poolPath, "csi", pv.Spec.CSI.VolumeHandle)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
