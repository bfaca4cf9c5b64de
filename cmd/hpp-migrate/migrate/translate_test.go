package migrate

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

func TestTranslateCarriesEveryField(t *testing.T) {
	for _, prefixed := range []bool{false, true} {
		orig := legacyPV("pvc-1234", "disk", prefixed)
		dir, gotPrefixed, err := LegacyDir(orig, testPVDir)
		if err != nil {
			t.Fatalf("prefixed=%v: LegacyDir: %v", prefixed, err)
		}
		wantDir := "pvc-1234"
		if prefixed {
			wantDir = "disk-pvc-1234"
		}
		if dir != wantDir || gotPrefixed != prefixed {
			t.Fatalf("LegacyDir = %q, %v; want %q, %v", dir, gotPrefixed, wantDir, prefixed)
		}
		got, err := Translate(orig, Target{Node: "node-a", Pool: "legacy", Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		fs := corev1.PersistentVolumeFilesystem
		want := &corev1.PersistentVolume{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
			ObjectMeta: metav1.ObjectMeta{
				Name:   "pvc-1234",
				Labels: map[string]string{"app": "vm"},
				Annotations: map[string]string{
					contract.AnnProvisionedBy:    contract.DriverName,
					"example.com/keep":           "yes",
					contract.AnnMigratedFrom:     contract.LegacyProvisionerName,
					contract.AnnMigratedFromPath: testPVDir + "/" + wantDir,
					contract.AnnMigratedFromUID:  "uid-pvc-1234",
				},
				Finalizers: []string{FinalizerPVProtection},
			},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
				StorageClassName:              "hostpath",
				MountOptions:                  []string{"noatime"},
				VolumeMode:                    &fs,
				ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "ns", Name: "disk", UID: "uid-disk"},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
					Driver: contract.DriverName, VolumeHandle: wantDir,
					VolumeAttributes: map[string]string{contract.ParamStoragePool: "legacy", contract.VolumeContextLayout: contract.LayoutLegacy},
				}},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: contract.TopologyKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"node-a"}}},
				}}}},
			},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("prefixed=%v: Translate (-want +got):\n%s", prefixed, diff)
		}
		// The original is not modified (it is the backup).
		if orig.Spec.HostPath == nil || orig.Annotations[contract.AnnIdentity] != contract.LegacyProvisionerName {
			t.Errorf("Translate modified its input")
		}
	}
}

func TestTranslateKeepsRetainAndBlockless(t *testing.T) {
	orig := legacyPV("pv", "c", false)
	orig.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	orig.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany, corev1.ReadOnlyMany}
	got, err := Translate(orig, Target{Node: "n", Pool: "p", Dir: "pv"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
		t.Errorf("reclaim policy %s, want Retain", got.Spec.PersistentVolumeReclaimPolicy)
	}
	if diff := cmp.Diff(orig.Spec.AccessModes, got.Spec.AccessModes); diff != "" {
		t.Errorf("access modes (-want +got):\n%s", diff)
	}
}

func TestTranslateRefuses(t *testing.T) {
	noRef := legacyPV("pv", "c", false)
	noRef.Spec.ClaimRef.UID = ""
	csi := legacyPV("pv", "c", false)
	csi.Spec.HostPath = nil
	for _, tc := range []struct {
		name string
		pv   *corev1.PersistentVolume
		t    Target
		want string
	}{
		{"no claim uid", noRef, Target{Node: "n", Pool: "p", Dir: "pv"}, "PV pv: spec.claimRef: must name the bound claim with its uid"},
		{"not hostPath", csi, Target{Node: "n", Pool: "p", Dir: "pv"}, "PV pv: spec.hostPath: not a hostPath volume"},
		{"bad target", legacyPV("pv", "c", false), Target{Dir: "../x"}, "target.node: empty\ntarget.pool: empty\ntarget.dir: \"../x\" has a path separator"},
		{"hidden dir", legacyPV("pv", "c", false), Target{Node: "n", Pool: "p", Dir: ".hpp-meta"}, "target.dir: \".hpp-meta\" is hidden (hpp keeps its own state in hidden entries)"},
	} {
		_, err := Translate(tc.pv, tc.t)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestLegacyDirRefuses(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"/other/pv", `spec.hostPath.path "/other/pv": outside PV_DIR /var/hpvolumes (not a direct child)`},
		{"/var/hpvolumes/a/pv", `spec.hostPath.path "/var/hpvolumes/a/pv": outside PV_DIR /var/hpvolumes (not a direct child)`},
		{"/var/hpvolumes/../pv", `spec.hostPath.path "/var/hpvolumes/../pv": not a clean absolute path`},
		{"/var/hpvolumes/other", `spec.hostPath.path "/var/hpvolumes/other": directory "other" is neither <pv name> nor <claim name>-<pv name>`},
		{"/var/hpvolumes/.pv", `spec.hostPath.path "/var/hpvolumes/.pv": ".pv" is hidden (hpp keeps its own state in hidden entries)`},
	} {
		pv := legacyPV("pv", "c", false)
		pv.Spec.HostPath.Path = tc.path
		_, _, err := LegacyDir(pv, testPVDir)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: error %v, want %q", tc.path, err, tc.want)
		}
	}
}

func TestRestoreDropsServerFields(t *testing.T) {
	orig := legacyPV("pv", "c", true)
	orig.CreationTimestamp = metav1.Now()
	got := Restore(orig)
	if got.UID != "" || got.ResourceVersion != "" || !got.CreationTimestamp.IsZero() || got.Status.Phase != "" {
		t.Errorf("server fields kept: %+v", got.ObjectMeta)
	}
	if got.Spec.ClaimRef.ResourceVersion != "" || got.Spec.ClaimRef.UID != "uid-c" {
		t.Errorf("claimRef %+v: want uid kept, resourceVersion dropped", got.Spec.ClaimRef)
	}
	if !strings.HasSuffix(got.Spec.HostPath.Path, "/c-pv") || got.Annotations[contract.AnnRestoredFrom] != "uid-pv" || got.Annotations[contract.AnnIdentity] != contract.LegacyProvisionerName {
		t.Errorf("restored object lost the original: %+v", got)
	}
}
