package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// Scenario: a shared pool (storage every node mounts) with the KubeVirt
// operator's kind of StorageClass: Immediate binding, overlayCSI "true", a
// ReadWriteMany claim. hpp-csi (with --check-binding-mode) provisions it,
// the PV has no node affinity, a pod writes through it, and reclaim Delete
// removes the directory.
func TestSharedPoolImmediateReadWriteMany(t *testing.T) {
	env := needEnv(t)
	ns := namespace(t, env)
	ctx := context.Background()
	storageClass(t, env, kit.StorageClass(ns, kit.PoolShared, kit.Immediate, func(sc *storagev1.StorageClass) {
		sc.Parameters[contract.ParamOverlayCSI] = "true"
	}))
	pvc := kit.PVC(ns, "rwx", ns, "16Mi")
	pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	createPVC(t, env, pvc)
	// csi-provisioner takes an Immediate claim after its node-deployment
	// base delay (about 20 s).
	pv := boundPV(t, env, ns, "rwx")
	if pv.Spec.NodeAffinity != nil {
		t.Errorf("pv %s of a shared pool has node affinity %+v; want none", pv.Name, pv.Spec.NodeAffinity)
	}
	createPod(t, env, kit.OnNode(kit.Pod(ns, "writer", "echo shared > /data/file", kit.PodVolume{Name: "v", Claim: "rwx", Path: "/data"}), env.C.RealNode().Name))
	if _, err := kit.WaitPodPhase(ctx, env.C.Client, ns, "writer", corev1.PodSucceeded, 2*time.Minute); err != nil {
		logs, _ := kit.PodLogs(ctx, env.C.Client, ns, "writer")
		t.Fatalf("%v (log %q)", err, logs)
	}
	dir := volumeDir(env.Pools[kit.PoolShared], pv)
	if got := readFile(t, dir+"/file"); got != "shared\n" {
		t.Errorf("%s/file on the host = %q, want %q", dir, got, "shared\n")
	}
	deletePodNow(t, env, ns, "writer")
	deletePVC(t, env, ns, "rwx")
	waitPVGone(t, env, pv.Name)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("reclaim Delete: %s still exists after the PV is gone (stat: %v)", dir, err)
	}
}
