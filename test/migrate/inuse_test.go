package migrate

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// TestInUseAndStorageClasses: a claim used by a pod is refused (and a
// refusal of a PV named on the command line fails the run), then migrated
// with --allow-in-use, saying what happens to the pod; --storage-classes
// creates the CSI counterpart of the legacy class and never edits one.
func TestInUseAndStorageClasses(t *testing.T) {
	cp := startControlPlane(t, binaries(t), time.Hour)
	c := cp.client
	ctx := context.Background()
	const ns = "vms"
	setupCluster(t, c, ns)
	backupDir := filepath.Join(t.TempDir(), "backup")
	const pv = "pvc-77777777-1111-2222-3333-444444444444"
	uid := string(legacyVolume(t, c, ns, "disk", pv, true).UID)
	waitBound(t, c, ns, 1)
	// A pod that is not finished (Pending: no node runs it here) uses the
	// claim. Only the PV controllers run, so the service account the
	// admission plugin wants is made by hand.
	if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "virt-launcher-vm"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			Volumes: []corev1.Volume{{Name: "disk", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "disk"}}}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	res := hppMigrate(t, cp, "", "migrate", "--backup-dir", backupDir, pv)
	wantReason := "in use by running pods vms/virt-launcher-vm: stop them, or pass --allow-in-use"
	if res.code != 1 || !strings.Contains(res.stdout, "Skipped") || !strings.Contains(res.stdout, wantReason) {
		t.Fatalf("migrate of an in-use PV named on the command line: %s", res)
	}
	checkLegacy(t, c, ns, pv, "disk", uid)

	res = hppMigrate(t, cp, "", "migrate", "--backup-dir", backupDir, "--allow-in-use", "--storage-classes")
	if res.code != 0 || !strings.Contains(res.stdout, "PV "+pv+" is in use by vms/virt-launcher-vm: they keep the directory through the hostPath mount") ||
		!strings.Contains(res.stdout, "StorageClass hostpath-csi") {
		t.Fatalf("migrate --allow-in-use --storage-classes: %s", res)
	}
	checkMigrated(t, c, ns, pv, "disk", uid, true)
	sc, err := c.StorageV1().StorageClasses().Get(ctx, "hostpath-csi", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sc.Provisioner != contract.DriverName || sc.Parameters[contract.ParamStoragePool] != "legacy" || *sc.VolumeBindingMode != "WaitForFirstConsumer" ||
		sc.Annotations[contract.AnnCounterpartOf] != "hostpath" {
		t.Errorf("StorageClass %+v", sc)
	}

	// A second run finds the class made; a class of that name that is not
	// the counterpart is reported, not edited.
	if err := c.StorageV1().StorageClasses().Delete(ctx, "hostpath-csi", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	sc.ResourceVersion, sc.UID = "", ""
	sc.Provisioner = "example.com/other"
	if _, err := c.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	res = hppMigrate(t, cp, "", "migrate", "--backup-dir", backupDir, "--storage-classes")
	if res.code != 1 || !strings.Contains(res.stdout, "StorageClass hostpath-csi exists with provisioner example.com/other: not edited (parameters are immutable); delete or rename it") {
		t.Fatalf("migrate --storage-classes with a conflicting class: %s", res)
	}
	got, _ := c.StorageV1().StorageClasses().Get(ctx, "hostpath-csi", metav1.GetOptions{})
	if got.Provisioner != "example.com/other" {
		t.Errorf("the conflicting class was edited: %+v", got)
	}
}
