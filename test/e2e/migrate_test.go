package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/test/cluster"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// runMigrate runs the real hpp-migrate against the cluster and fails the
// test unless it exits 0; it returns its stdout (the summary table).
func runMigrate(t *testing.T, env *kit.Env, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, migrateBin.get(t), append(args, "--kubeconfig="+env.C.Kubeconfig)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("hpp-migrate %v: %v\n--- stdout ---\n%s--- stderr ---\n%s", args, err, stdout.String(), stderr.String())
	}
	t.Logf("hpp-migrate %v:\n%s", args, stdout.String())
	return stdout.String()
}

// Migration scenario: on the real node hpp-legacy makes a hostPath PV in
// its PV_DIR (the "migrated" pool's legacyPath) and a pod writes a file
// through it; the pod stops; hpp-migrate replaces the PV with a CSI PV of
// the same name; the claim is Bound again, with the same UID, to the CSI
// PV; a new pod mounts it through hpp-csi and reads the file (and writes
// one, which lands in the same directory); deleting the claim makes
// csi-provisioner call hpp-csi's DeleteVolume, which removes the directory
// in place; hpp-legacy, still running on that PV_DIR, deletes nothing.
func TestMigrateLegacyPVOntoCSI(t *testing.T) {
	env := needEnv(t)
	ns := namespace(t, env)
	ctx := context.Background()
	c := env.C.Client
	real := startLegacy(t, env, env.C.RealNode(), legacyOptions{pvDir: env.LegacyDir})
	storageClass(t, env, legacyClass(ns))
	createPVC(t, env, kit.PVC(ns, "data", ns, "16Mi"))
	createPod(t, env, kit.OnNode(kit.Pod(ns, "writer", "echo written-by-legacy-pod > /data/file", kit.PodVolume{Name: "v", Claim: "data", Path: "/data"}), real.node.Name))
	if _, err := kit.WaitPodPhase(ctx, c, ns, "writer", corev1.PodSucceeded, 2*time.Minute); err != nil {
		t.Fatalf("%v; claim events: %s", err, kit.Events(ctx, c, ns, "PersistentVolumeClaim", "data"))
	}
	legacyPV := boundPV(t, env, ns, "data")
	dir := filepath.Join(env.LegacyDir, legacyPV.Name)
	if legacyPV.Spec.HostPath == nil || legacyPV.Spec.HostPath.Path != dir {
		t.Fatalf("legacy PV source = %+v, want hostPath %s", legacyPV.Spec.PersistentVolumeSource, dir)
	}
	claim, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deletePodNow(t, env, ns, "writer")

	runMigrate(t, env, "migrate", legacyPV.Name, "--backup-dir", t.TempDir(), "--pv-dir", env.LegacyDir, "--storage-pool", kit.PoolMigrated)

	after, err := kit.WaitPVCBound(ctx, c, ns, "data", 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if after.UID != claim.UID || after.Spec.VolumeName != legacyPV.Name {
		t.Fatalf("claim after migrate: uid %s volume %s; want the same claim (uid %s) bound to %s", after.UID, after.Spec.VolumeName, claim.UID, legacyPV.Name)
	}
	pv, err := c.CoreV1().PersistentVolumes().Get(ctx, legacyPV.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src := pv.Spec.CSI
	if src == nil || src.Driver != contract.DriverName || src.VolumeHandle != legacyPV.Name ||
		src.VolumeAttributes[contract.ParamStoragePool] != kit.PoolMigrated || src.VolumeAttributes[contract.VolumeContextLayout] != "legacy" {
		t.Fatalf("PV after migrate = %+v, want a CSI source of %s with handle %s, pool %s, layout legacy", pv.Spec.PersistentVolumeSource, contract.DriverName, legacyPV.Name, kit.PoolMigrated)
	}
	if pv.UID == legacyPV.UID || pv.Status.Phase != corev1.VolumeBound || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != claim.UID ||
		pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		t.Fatalf("CSI PV: uid %s (legacy %s), phase %s, claimRef %+v, reclaim %s; want a new object, Bound to claim %s, Delete",
			pv.UID, legacyPV.UID, pv.Status.Phase, pv.Spec.ClaimRef, pv.Spec.PersistentVolumeReclaimPolicy, claim.UID)
	}

	createPod(t, env, kit.OnNode(kit.Pod(ns, "reader",
		`test "$(cat /data/file)" = written-by-legacy-pod && echo read-through-hpp-csi > /data/file2`,
		kit.PodVolume{Name: "v", Claim: "data", Path: "/data"}), real.node.Name))
	if _, err := kit.WaitPodPhase(ctx, c, ns, "reader", corev1.PodSucceeded, 2*time.Minute); err != nil {
		t.Fatalf("%v; pod events: %s", err, kit.Events(ctx, c, ns, "Pod", "reader"))
	}
	if got := readFile(t, filepath.Join(dir, "file2")); got != "read-through-hpp-csi\n" {
		t.Fatalf("%s/file2 = %q, want what the pod wrote through hpp-csi", dir, got)
	}
	hppcsi := real.node.Process("hpp-csi")
	waitProcessLog(t, hppcsi, "the legacy directory published", "volume published", legacyPV.Name, dir)
	deletePodNow(t, env, ns, "reader")

	deletePVC(t, env, ns, "data")
	waitPVGone(t, env, pv.Name)
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stat %s after the claim was deleted: %v, want hpp-csi to have deleted it", dir, err)
	}
	waitProcessLog(t, hppcsi, "the legacy directory deleted", "volume deleted", legacyPV.Name, kit.PoolMigrated, dir)
	if v := real.metric(t, `hpp_legacy_delete_total{result="deleted"}`); v != "" && v != "0" {
		t.Errorf("hpp-legacy deleted %s volumes; the migrated one is hpp-csi's", v)
	}
}

// migrateSimNode is a simulated node with hpp-csi (pool "migrated" whose
// legacyPath is the node's PV_DIR) and hpp-legacy on that PV_DIR.
func migrateSimNode(t *testing.T, env *kit.Env, name string) *legacyNode {
	t.Helper()
	ctx := context.Background()
	n := addSimulatedCSINode(t, env, name)
	pvDir := filepath.Join(n.Dir(), "legacy-pv-dir")
	pool := cluster.Pool{Name: kit.PoolMigrated, Path: filepath.Join(n.Dir(), "pools", kit.PoolMigrated), LegacyPath: pvDir}
	if err := n.StartHPPCSI(ctx, cluster.HPPCSIConfig{Binary: env.HPPCSI, Pools: []cluster.Pool{pool}}); err != nil {
		t.Fatal(err)
	}
	return startLegacy(t, env, n, legacyOptions{pvDir: pvDir})
}

// Migration at scale on simulated nodes (each with its own hpp-legacy and
// hpp-csi, no kubelet: no pods): every legacy PV of each node is migrated
// by one hpp-migrate run per node (each node has its own PV_DIR), every
// claim is Bound again with its UID to a CSI PV naming its directory, and
// deleting the claims makes each node's hpp-csi delete its directories in
// place.
func TestMigrateLegacyPVsOnSimulatedNodes(t *testing.T) {
	const perNode = 10
	env := needEnv(t)
	ns := namespace(t, env)
	ctx := context.Background()
	c := env.C.Client
	nodes := []*legacyNode{migrateSimNode(t, env, "migrate-sim-a"), migrateSimNode(t, env, "migrate-sim-b")}
	storageClass(t, env, legacyClass(ns, kit.Immediate))
	uids := map[string]string{}
	dirs := map[string]string{}
	for _, l := range nodes {
		for i := range perNode {
			name := l.node.Name + "-" + string(rune('a'+i))
			pvc := createPVC(t, env, pinnedPVC(ns, name, ns, "16Mi", l.node.Name))
			uids[name] = string(pvc.UID)
		}
	}
	for _, l := range nodes {
		for i := range perNode {
			name := l.node.Name + "-" + string(rune('a'+i))
			pv := boundPV(t, env, ns, name)
			dirs[name] = filepath.Join(l.pvDir, pv.Name)
			if err := os.WriteFile(filepath.Join(dirs[name], "data"), []byte(name), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	backups := t.TempDir()
	for _, l := range nodes {
		runMigrate(t, env, "migrate", "-n", ns, "--node", l.node.Name, "--pv-dir", l.pvDir, "--backup-dir", backups, "--storage-pool", kit.PoolMigrated)
	}
	for name, uid := range uids {
		claim, err := kit.WaitPVCBound(ctx, c, ns, name, 2*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		pv, err := c.CoreV1().PersistentVolumes().Get(ctx, claim.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if string(claim.UID) != uid || pv.Spec.CSI == nil || pv.Spec.CSI.VolumeHandle != filepath.Base(dirs[name]) ||
			pv.Spec.CSI.VolumeAttributes[contract.VolumeContextLayout] != "legacy" {
			t.Fatalf("claim %s after migrate: uid %s (was %s), PV source %+v; want the same claim on a CSI PV with handle %s",
				name, claim.UID, uid, pv.Spec.PersistentVolumeSource, filepath.Base(dirs[name]))
		}
		if got := readFile(t, filepath.Join(dirs[name], "data")); got != name {
			t.Fatalf("%s/data = %q after migrate, want %q", dirs[name], got, name)
		}
	}

	for name := range uids {
		deletePVC(t, env, ns, name)
	}
	for name, dir := range dirs {
		if err := kit.Poll(ctx, 2*time.Minute, "directory "+dir+" of claim "+name+" deleted", func(context.Context) (bool, string, error) {
			_, err := os.Stat(dir)
			return errors.Is(err, os.ErrNotExist), "still there", nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range nodes {
		if v := l.metric(t, `hpp_legacy_delete_total{result="deleted"}`); v != "" && v != "0" {
			t.Errorf("hpp-legacy on %s deleted %s volumes; migrated ones are hpp-csi's", l.node.Name, v)
		}
	}
}
