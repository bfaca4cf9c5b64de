package v1beta1

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func pools(p ...StoragePool) *HostPathProvisionerSpec {
	return &HostPathProvisionerSpec{StoragePools: p}
}

func errStrings(t *testing.T, spec *HostPathProvisionerSpec) []string {
	t.Helper()
	var out []string
	for _, e := range ValidateSpec(spec) {
		out = append(out, e.Error())
	}
	return out
}

func TestValidateSpecAcceptsGoodSpecs(t *testing.T) {
	for name, spec := range map[string]*HostPathProvisionerSpec{
		"legacy":  {PathConfig: &PathConfig{Path: "/var/hpvolumes", UseNamingPrefix: true}},
		"pools":   pools(StoragePool{Name: "local", Path: "/var/hpp"}, StoragePool{Name: "fast-1", Path: "/mnt/fast"}),
		"sibling": pools(StoragePool{Name: "a", Path: "/var/hpp"}, StoragePool{Name: "b", Path: "/var/hpp2"}),
		"gate":    {StoragePools: []StoragePool{{Name: "a", Path: "/a"}}, FeatureGates: []string{"Snapshotting"}},
	} {
		if errs := ValidateSpec(spec); len(errs) != 0 {
			t.Errorf("%s: unexpected errors: %v", name, errs)
		}
	}
}

func TestValidateSpecReportsEveryViolation(t *testing.T) {
	long := "p" + strings.Repeat("x", 50)
	spec := pools(
		StoragePool{Name: "Bad_Name", Path: "relative/dir"},
		StoragePool{Name: long, Path: "/var/hpp/../etc"},
		StoragePool{Name: "dup", Path: "/data"},
		StoragePool{Name: "dup", Path: "/data/inner"},
		StoragePool{Name: "same", Path: "/data"},
		StoragePool{Name: "", Path: "/"},
	)
	spec.FeatureGates = []string{"Snapshoting"}
	got := errStrings(t, spec)
	want := []string{
		`spec.storagePools[0].name: Invalid value: "Bad_Name": a lowercase RFC 1123 label`,
		`spec.storagePools[0].path: Invalid value: "relative/dir": must be an absolute path`,
		`spec.storagePools[1].name: Too long: may not be more than 50 bytes`,
		`spec.storagePools[1].path: Invalid value: "/var/hpp/../etc": must not contain a '..' element`,
		`spec.storagePools[3].name: Duplicate value: "dup (also storagePools[2])"`,
		`spec.storagePools[5].name: Required value: a pool needs a name`,
		`spec.storagePools[5].path: Invalid value: "/": must not be the root directory`,
		`spec.storagePools[3].path: Invalid value: "/data/inner": is inside storagePools[2].path /data: pool paths must not be nested`,
		`spec.storagePools[3].path: Invalid value: "/data/inner": is inside storagePools[4].path /data: pool paths must not be nested`,
		`spec.storagePools[4].path: Duplicate value: "/data (also storagePools[2].path)"`,
		`spec.featureGates[0]: Unsupported value: "Snapshoting": supported values: "Snapshotting"`,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("error %d:\n got  %s\n want %s...", i, got[i], want[i])
		}
	}
}

func TestValidateSpecExactlyOneForm(t *testing.T) {
	both := pools(StoragePool{Name: "a", Path: "/a"})
	both.PathConfig = &PathConfig{Path: "/b"}
	got := errStrings(t, both)
	if len(got) != 1 || got[0] != "spec.pathConfig: Forbidden: exactly one of spec.pathConfig and spec.storagePools must be set, not both" {
		t.Errorf("both: %q", got)
	}
	got = errStrings(t, &HostPathProvisionerSpec{})
	if len(got) != 1 || got[0] != "spec.storagePools: Required value: exactly one of spec.pathConfig and spec.storagePools must be set" {
		t.Errorf("neither: %q", got)
	}
	// Upstream accepts a trailing '/', and so does hpp (it cleans it).
	got = errStrings(t, &HostPathProvisionerSpec{PathConfig: &PathConfig{Path: "/var/hp/"}})
	if len(got) != 0 {
		t.Errorf("legacy path: %q", got)
	}
	got = errStrings(t, &HostPathProvisionerSpec{PathConfig: &PathConfig{Path: "/" + strings.Repeat("d", 255)}})
	if len(got) != 1 || !strings.HasPrefix(got[0], "spec.pathConfig.path: Too long: may not be more than 255 bytes") {
		t.Errorf("long path: %q", got)
	}
}

func TestValidateUpdateRefusesOrphaningChanges(t *testing.T) {
	old := pools(StoragePool{Name: "keep", Path: "/k"}, StoragePool{Name: "move", Path: "/m"},
		StoragePool{Name: "gone", Path: "/g"}, StoragePool{Name: "empty", Path: "/e"})
	updated := pools(StoragePool{Name: "keep", Path: "/k"}, StoragePool{Name: "move", Path: "/m2"},
		StoragePool{Name: "renamed", Path: "/e2"})
	use := Usage{PoolVolumes: map[string]int{"keep": 1, "move": 2, "gone": 3}}
	errs := ValidateUpdate(old, updated, use)
	if len(errs) != 2 {
		t.Fatalf("want 2 errors, got %v", errs)
	}
	if got := errs[0].Error(); !strings.HasPrefix(got, `spec.storagePools[1].path: Forbidden: pool "move" holds 2 volume(s) in /m; moving it to /m2 would orphan them. To move a pool safely: add a new pool at the new path`) {
		t.Errorf("re-path: %s", got)
	}
	if got := errs[1].Error(); !strings.HasPrefix(got, `spec.storagePools: Forbidden: pool "gone" (path /g) holds 3 volume(s) and is missing from the new spec`) ||
		!strings.Contains(got, "Keep the pool") {
		t.Errorf("removed: %s", got)
	}
	// The same changes with no volumes are fine.
	if errs := ValidateUpdate(old, updated, Usage{}); len(errs) != 0 {
		t.Errorf("no volumes: %v", errs)
	}
}

func TestValidateUpdateLegacyPath(t *testing.T) {
	old := &HostPathProvisionerSpec{PathConfig: &PathConfig{Path: "/var/hpvolumes"}}
	updated := &HostPathProvisionerSpec{PathConfig: &PathConfig{Path: "/var/other"}}
	errs := ValidateUpdate(old, updated, Usage{LegacyVolumes: 4})
	if len(errs) != 1 || errs[0].Error() != "spec.pathConfig.path: Forbidden: 4 legacy PersistentVolume(s) live in /var/hpvolumes; changing the path would orphan them. Delete those PersistentVolumes first, or keep the path" {
		t.Errorf("got %v", errs)
	}
	// Switching to pools is allowed: hostPath PVs keep working without a driver.
	switched := pools(StoragePool{Name: "legacy", Path: "/var/hpvolumes"})
	if errs := ValidateUpdate(old, switched, Usage{LegacyVolumes: 4}); len(errs) != 0 {
		t.Errorf("switch: %v", errs)
	}
}

func TestValidateSpecPVCTemplate(t *testing.T) {
	block, fs := corev1.PersistentVolumeBlock, corev1.PersistentVolumeFilesystem
	size := corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}
	ok := pools(
		StoragePool{Name: "rwo-block", Path: "/a", PVCTemplate: &corev1.PersistentVolumeClaimSpec{VolumeMode: &block,
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, Resources: size}},
		StoragePool{Name: "rwx-fs", Path: "/b", PVCTemplate: &corev1.PersistentVolumeClaimSpec{VolumeMode: &fs,
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, Resources: size}},
	)
	if got := errStrings(t, ok); len(got) != 0 {
		t.Errorf("good templates refused: %q", got)
	}
	got := errStrings(t, pools(
		StoragePool{Name: "rwx-block", Path: "/a", PVCTemplate: &corev1.PersistentVolumeClaimSpec{VolumeMode: &block,
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, Resources: size}},
		StoragePool{Name: "empty", Path: "/b", PVCTemplate: &corev1.PersistentVolumeClaimSpec{}},
	))
	want := []string{
		`spec.storagePools[0].pvcTemplate.volumeMode: Invalid value: "Block": a ReadWriteMany Block PVC would get one XFS filesystem mounted on every node at once, which corrupts it: use ReadWriteOnce (a PVC per node) or a Filesystem ReadWriteMany PVC (NFS, CephFS)`,
		`spec.storagePools[1].pvcTemplate.accessModes: Required value: ReadWriteOnce (a PVC per node) or ReadWriteMany (one PVC shared by the nodes)`,
		`spec.storagePools[1].pvcTemplate.resources.requests.storage: Required value: the size of each pool PVC`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// enforceSize is accepted on node-local pools (directory or ReadWriteOnce
// pvcTemplate) and refused on a shared one, naming the field.
func TestValidateSpecEnforceSize(t *testing.T) {
	size := corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}
	ok := pools(
		StoragePool{Name: "dir", Path: "/a", EnforceSize: true},
		StoragePool{Name: "rwo", Path: "/b", EnforceSize: true, PVCTemplate: &corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, Resources: size}},
	)
	if got := errStrings(t, ok); len(got) != 0 {
		t.Errorf("enforcing node-local pools refused: %q", got)
	}
	got := errStrings(t, pools(StoragePool{Name: "rwx", Path: "/a", EnforceSize: true, PVCTemplate: &corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, Resources: size}}))
	want := `spec.storagePools[0].enforceSize: Invalid value: true: a shared (ReadWriteMany) pool cannot enforce sizes: project quotas belong to a node's local XFS or ext4 filesystem, and every node would hand out its own project IDs`
	if len(got) != 1 || got[0] != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
