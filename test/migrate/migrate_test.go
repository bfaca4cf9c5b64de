package migrate

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// steps are hpp-migrate's failure-injection points, in order.
var steps = []string{"backup", "hold", "delete", "park", "release", "create", "restore", "confirm"}

// TestMigrateKilledAtEveryStepAndRollback migrates legacy PVs bound to
// claims, killing hpp-migrate after each step (one PV per step) and
// running it again; then rolls them back the same way. The claims must
// stay Bound throughout — kube-controller-manager's periodic claim resync
// is set to an hour, so any Lost/Pending seen is caused by the order of
// hpp-migrate's writes, not by the resync falling into the gap (that case
// is TestLostClaimIsRebound).
func TestMigrateKilledAtEveryStepAndRollback(t *testing.T) {
	cp := startControlPlane(t, binaries(t), time.Hour)
	c := cp.client
	const ns = "vms"
	setupCluster(t, c, ns)
	backupDir := filepath.Join(t.TempDir(), "backup")
	type vol struct {
		pv, claim string
		prefixed  bool
		uid       string
	}
	var vols []vol
	for i := range steps {
		v := vol{pv: fmt.Sprintf("pvc-0000000%d-1111-2222-3333-444444444444", i), claim: fmt.Sprintf("disk-%d", i), prefixed: i%2 == 1}
		v.uid = string(legacyVolume(t, c, ns, v.claim, v.pv, v.prefixed).UID)
		vols = append(vols, v)
	}
	waitBound(t, c, ns, len(vols))
	phases := recordPhases(t, c, ns)
	defer func() {
		if t.Failed() {
			t.Logf("--- kube-controller-manager ---\n%s", cp.logTail("kube-controller-manager", 40))
		}
	}()

	// plan: every PV Ready, with the handle it gets.
	res := hppMigrate(t, cp, "", "plan", "-o", "json", "--backup-dir", backupDir)
	if res.code != 0 {
		t.Fatalf("plan: %s", res)
	}
	var plan struct {
		PVDir   string `json:"pvDir"`
		Volumes []struct {
			PV, State, VolumeHandle, Node, Claim string
		} `json:"volumes"`
		StorageClasses []struct{ Legacy, CSI, State string } `json:"storageClasses"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &plan); err != nil {
		t.Fatalf("plan -o json: %v\n%s", err, res)
	}
	if plan.PVDir != pvDir || len(plan.Volumes) != len(vols) || len(plan.StorageClasses) != 1 || plan.StorageClasses[0].CSI != "hostpath-csi" {
		t.Fatalf("plan: %+v", plan)
	}
	for i, p := range plan.Volumes {
		want := vols[i].pv
		if vols[i].prefixed {
			want = vols[i].claim + "-" + vols[i].pv
		}
		if p.PV != vols[i].pv || p.State != "Ready" || p.VolumeHandle != want || p.Node != testNode || p.Claim != ns+"/"+vols[i].claim {
			t.Errorf("plan item %d: %+v", i, p)
		}
	}

	// --dry-run prints the CSI PV and writes nothing (no backup either).
	res = hppMigrate(t, cp, "", "migrate", "--dry-run", "--backup-dir", backupDir, vols[1].pv)
	if res.code != 0 || !strings.Contains(res.stdout, "driver: "+contract.DriverName) || !strings.Contains(res.stdout, "volumeHandle: "+vols[1].claim+"-"+vols[1].pv) ||
		!strings.Contains(res.stdout, contract.VolumeContextLayout+": legacy") || !strings.Contains(res.stdout, "persistentVolumeReclaimPolicy: Retain") {
		t.Fatalf("dry run: %s", res)
	}
	if _, err := os.Stat(backupDir); !os.IsNotExist(err) {
		t.Fatalf("dry run made the backup dir: %v", err)
	}
	checkLegacy(t, c, ns, vols[1].pv, vols[1].claim, vols[1].uid)

	for i, step := range steps {
		v := vols[i]
		res := hppMigrate(t, cp, step, "migrate", "--backup-dir", backupDir, v.pv)
		if res.code != 3 || !strings.Contains(res.stderr, "exiting after step "+step+" of PV "+v.pv) {
			t.Fatalf("migrate killed after %s: %s", step, res)
		}
		res = hppMigrate(t, cp, "", "migrate", "--backup-dir", backupDir, v.pv)
		done := strings.Contains(res.stdout, "1 migrated") || strings.Contains(res.stdout, "1 already done")
		if res.code != 0 || !done {
			t.Fatalf("migrate rerun after a kill after %s: %s", step, res)
		}
		checkMigrated(t, c, ns, v.pv, v.claim, v.uid, v.prefixed)
	}
	// A run over everything now has nothing to do.
	res = hppMigrate(t, cp, "", "migrate", "--backup-dir", backupDir)
	if res.code != 0 || !strings.Contains(res.stdout, fmt.Sprintf("0 migrated, 0 rolled back, %d already done, 0 skipped, 0 failed", len(vols))) {
		t.Fatalf("migrate of migrated PVs: %s", res)
	}
	checkPVNames(t, c, vols[0].pv, len(vols))

	var done bool
	for i, step := range steps {
		v := vols[i]
		res := hppMigrate(t, cp, step, "rollback", "--backup-dir", backupDir, v.pv)
		if step == "backup" { // rollback takes no backup: it runs through
			if res.code != 0 {
				t.Fatalf("rollback: %s", res)
			}
		} else if res.code != 3 {
			t.Fatalf("rollback killed after %s: %s", step, res)
		}
		res = hppMigrate(t, cp, "", "rollback", "--backup-dir", backupDir, v.pv)
		done = strings.Contains(res.stdout, "1 rolled back") || strings.Contains(res.stdout, "1 already done")
		if res.code != 0 || !done {
			t.Fatalf("rollback rerun after a kill after %s: %s", step, res)
		}
		checkLegacy(t, c, ns, v.pv, v.claim, v.uid)
	}
	checkPVNames(t, c, vols[0].pv, len(vols))
	if seen := phases.notBound(); len(seen) > 0 {
		t.Errorf("claims left Bound during migration and rollback:\n%s", strings.Join(seen, "\n"))
	}
}

// TestLostClaimIsRebound: when the PV controller's periodic resync falls
// into the instant between the old PV's removal and the new PV's creation,
// it marks the claim Lost. hpp-migrate then makes it Bound again, with the
// same UID, through the real PV controller.
func TestLostClaimIsRebound(t *testing.T) {
	cp := startControlPlane(t, binaries(t), time.Hour)
	c := cp.client
	ctx := context.Background()
	const ns = "vms"
	setupCluster(t, c, ns)
	backupDir := filepath.Join(t.TempDir(), "backup")
	const pv = "pvc-99999999-1111-2222-3333-444444444444"
	uid := string(legacyVolume(t, c, ns, "disk", pv, false).UID)
	waitBound(t, c, ns, 1)

	res := hppMigrate(t, cp, "release", "migrate", "--backup-dir", backupDir, pv)
	if res.code != 3 {
		t.Fatalf("migrate killed after release: %s", res)
	}
	// The old PV is gone: what the resync does now, a status write does.
	claim, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "disk", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim.Status.Phase = corev1.ClaimLost
	if _, err := c.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	res = hppMigrate(t, cp, "", "plan", "--backup-dir", backupDir)
	if res.code != 0 || !strings.Contains(res.stdout, "Interrupted") {
		t.Fatalf("plan of an interrupted migration: %s", res)
	}
	res = hppMigrate(t, cp, "", "migrate", "--backup-dir", backupDir)
	if res.code != 0 || !strings.Contains(res.stdout, "1 migrated") {
		t.Fatalf("migrate rerun: %s", res)
	}
	checkMigrated(t, c, ns, pv, "disk", uid, false)
	claim, _ = c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "disk", metav1.GetOptions{})
	if !strings.HasPrefix(claim.Annotations[contract.AnnRebind], pv+"/") {
		t.Errorf("claim annotations %v: want the rebind nudge", claim.Annotations)
	}
}

// checkMigrated asserts the CSI PV and its claim in the API server.
func checkMigrated(t *testing.T, c kubernetes.Interface, ns, pvName, claimName, claimUID string, prefixed bool) {
	t.Helper()
	ctx := context.Background()
	pv, err := c.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	handle := pvName
	if prefixed {
		handle = claimName + "-" + pvName
	}
	var problems []string
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != contract.DriverName || pv.Spec.CSI.VolumeHandle != handle ||
		pv.Spec.CSI.VolumeAttributes[contract.ParamStoragePool] != "legacy" || pv.Spec.CSI.VolumeAttributes[contract.VolumeContextLayout] != "legacy" {
		problems = append(problems, fmt.Sprintf("source %+v", pv.Spec.PersistentVolumeSource))
	}
	if pv.Spec.ClaimRef == nil || string(pv.Spec.ClaimRef.UID) != claimUID || pv.Spec.ClaimRef.Name != claimName {
		problems = append(problems, fmt.Sprintf("claimRef %+v", pv.Spec.ClaimRef))
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || pv.Status.Phase != corev1.VolumeBound {
		problems = append(problems, fmt.Sprintf("policy %s phase %s", pv.Spec.PersistentVolumeReclaimPolicy, pv.Status.Phase))
	}
	na := pv.Spec.NodeAffinity
	if na == nil || na.Required == nil || len(na.Required.NodeSelectorTerms) != 1 ||
		fmt.Sprint(na.Required.NodeSelectorTerms[0].MatchExpressions) != fmt.Sprint([]corev1.NodeSelectorRequirement{{Key: contract.TopologyKey, Operator: "In", Values: []string{testNode}}}) {
		problems = append(problems, fmt.Sprintf("node affinity %+v", na))
	}
	if pv.Labels["tier"] != "gold" || pv.Annotations[contract.AnnProvisionedBy] != contract.DriverName || pv.Annotations[contract.AnnIdentity] != "" ||
		pv.Annotations[contract.AnnMigratedFromPath] != pvDir+"/"+handle || pv.Spec.StorageClassName != "hostpath" ||
		pv.Spec.Capacity.Storage().String() != "1Gi" || slices.Contains(pv.Finalizers, contract.FinalizerMigration) {
		problems = append(problems, fmt.Sprintf("metadata/spec %+v %+v", pv.ObjectMeta, pv.Spec))
	}
	problems = append(problems, checkClaim(t, c, ns, claimName, claimUID, pvName)...)
	if len(problems) > 0 {
		t.Errorf("PV %s after migration:\n%s", pvName, strings.Join(problems, "\n"))
	}
}

func checkLegacy(t *testing.T, c kubernetes.Interface, ns, pvName, claimName, claimUID string) {
	t.Helper()
	pv, err := c.CoreV1().PersistentVolumes().Get(context.Background(), pvName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	problems := checkClaim(t, c, ns, claimName, claimUID, pvName)
	if pv.Spec.HostPath == nil || !strings.HasPrefix(pv.Spec.HostPath.Path, pvDir+"/") || pv.Spec.CSI != nil {
		problems = append(problems, fmt.Sprintf("source %+v", pv.Spec.PersistentVolumeSource))
	}
	if pv.Spec.ClaimRef == nil || string(pv.Spec.ClaimRef.UID) != claimUID || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete ||
		pv.Status.Phase != corev1.VolumeBound || pv.Annotations[contract.AnnIdentity] != contract.LegacyProvisionerName ||
		pv.Annotations[contract.AnnProvisionedBy] != contract.LegacyProvisionerName || slices.Contains(pv.Finalizers, contract.FinalizerMigration) {
		problems = append(problems, fmt.Sprintf("PV %+v %+v %+v", pv.ObjectMeta, pv.Spec, pv.Status))
	}
	if len(problems) > 0 {
		t.Errorf("legacy PV %s:\n%s", pvName, strings.Join(problems, "\n"))
	}
}

// checkClaim: Bound to the PV, same UID, owner and labels intact.
func checkClaim(t *testing.T, c kubernetes.Interface, ns, name, uid, pv string) []string {
	t.Helper()
	claim, err := c.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return []string{err.Error()}
	}
	if string(claim.UID) != uid || claim.Spec.VolumeName != pv || claim.Status.Phase != corev1.ClaimBound ||
		len(claim.OwnerReferences) != 1 || claim.Labels["app"] != "vm" {
		return []string{fmt.Sprintf("claim %s/%s: uid %s (want %s), volume %q, phase %s, owners %v, labels %v",
			ns, name, claim.UID, uid, claim.Spec.VolumeName, claim.Status.Phase, claim.OwnerReferences, claim.Labels)}
	}
	return nil
}

// checkPVNames: exactly the test's PVs exist, none duplicated or lost.
func checkPVNames(t *testing.T, c kubernetes.Interface, sample string, n int) {
	t.Helper()
	list, err := c.CoreV1().PersistentVolumes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != n {
		var names []string
		for _, pv := range list.Items {
			names = append(names, pv.Name)
		}
		t.Errorf("%d PVs %v, want %d (like %s)", len(list.Items), names, n, sample)
	}
}
