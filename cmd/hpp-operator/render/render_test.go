package render

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/pool"
)

func TestDatadirAsUpstream(t *testing.T) {
	got, err := Datadir([]hppv1.StoragePool{
		{Name: "local", Path: "/var/hpvolumes"},
		{Name: "shared", Path: "/mnt/rwx", SnapshotProvider: "reflink",
			PVCTemplate: &corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}}},
		{Name: "block", Path: "/mnt/block",
			PVCTemplate: &corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"name":"local","path":"/local-data-dir/csi"},` +
		`{"name":"shared","path":"/shared-data-dir/csi","snapshotPath":"/shared-data-dir/csi/snapshots","snapshotProvider":"reflink","shared":true,"mounted":true},` +
		`{"name":"block","path":"/block-data-dir/csi","mounted":true}]`
	if got != want {
		t.Errorf("datadir\n got  %s\n want %s", got, want)
	}
}

// snapshotPath is a host path: hpp-csi reaches it through the pool's mount
// when it is inside the pool, through a mount of its own otherwise.
func TestDatadirSnapshotPaths(t *testing.T) {
	pools := []hppv1.StoragePool{
		{Name: "in", Path: "/var/hpp", SnapshotProvider: "reflink", SnapshotPath: "/var/hpp/snaps"},
		{Name: "out", Path: "/var/out", SnapshotProvider: "reflink", SnapshotPath: "/srv/snaps"},
		{Name: "off", Path: "/var/off", SnapshotPath: "/srv/off"},
	}
	got, err := Datadir(pools)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"name":"in","path":"/in-data-dir/csi","snapshotPath":"/in-data-dir/snaps","snapshotProvider":"reflink"},` +
		`{"name":"out","path":"/out-data-dir/csi","snapshotPath":"/out-snapshot-dir","snapshotProvider":"reflink"},` +
		`{"name":"off","path":"/off-data-dir/csi"}]`
	if got != want {
		t.Errorf("datadir\n got  %s\n want %s", got, want)
	}
	cfg := DefaultConfig()
	ds, err := cfg.CSIDaemonSet(&hppv1.HostPathProvisionerSpec{StoragePools: pools})
	if err != nil {
		t.Fatal(err)
	}
	var hostPaths []string
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if strings.HasSuffix(v.Name, "-snapshot-dir") {
			hostPaths = append(hostPaths, v.Name+"="+v.HostPath.Path)
		}
	}
	if strings.Join(hostPaths, ",") != "out-snapshot-dir=/srv/snaps" {
		t.Errorf("snapshot volumes %v, want only out-snapshot-dir=/srv/snaps", hostPaths)
	}
}

func TestSidecarImagesSwapSelfRegistration(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Images.NodeDriverRegistrar = "registrar"
	cfg.Images.LivenessProbe = "liveness"
	spec := &hppv1.HostPathProvisionerSpec{StoragePools: []hppv1.StoragePool{{Name: "a", Path: "/a"}},
		FeatureGates: []string{hppv1.FeatureSnapshotting}}
	ds, err := cfg.CSIDaemonSet(spec)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range ds.Spec.Template.Spec.Containers {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); got != "hostpath-provisioner,csi-provisioner,node-driver-registrar,liveness-probe,csi-snapshotter" {
		t.Errorf("containers %s", got)
	}
	for _, a := range ds.Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--kubelet-registration-path") || strings.HasPrefix(a, "--health-address") {
			t.Errorf("hpp-csi registers itself although the sidecars do: %s", a)
		}
	}
}

func TestConfigValidateNamesEveryProblem(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Namespace = ""
	cfg.KubeletDir = "var/lib/kubelet/"
	cfg.Images.CSI = ""
	cfg.Images.NodeDriverRegistrar = "only-one"
	err := cfg.Validate()
	want := "namespace: required\n" +
		`kubelet directory: "var/lib/kubelet/" must be a clean absolute path` + "\n" +
		"CSI_PROVISIONER_IMAGE: required\n" +
		"NODE_DRIVER_REG_IMAGE and LIVENESS_PROBE_IMAGE: set both (use the sidecars) or neither (hpp-csi registers itself and serves /healthz)"
	if err == nil || err.Error() != want {
		t.Errorf("got\n%v\nwant\n%s", err, want)
	}
}

// The --datadir the operator renders is what hpp-csi parses: a pvcTemplate
// pool arrives as "mounted" (hpp-csi then requires hpp-mounter's marker),
// a ReadWriteMany one as shared too, a directory pool as neither.
func TestDatadirIsWhatHppCSIParses(t *testing.T) {
	data, err := Datadir([]hppv1.StoragePool{
		{Name: "local", Path: "/var/hpvolumes"},
		{Name: "nfs", Path: "/mnt/rwx", PVCTemplate: &corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}}},
		{Name: "block", Path: "/mnt/block", PVCTemplate: &corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	set, err := pool.Parse([]byte(data))
	if err != nil {
		t.Fatalf("hpp-csi refuses the operator's --datadir %s: %v", data, err)
	}
	want := map[string][2]bool{"local": {false, false}, "nfs": {true, true}, "block": {true, false}}
	for name, w := range want {
		p, ok := set.Get(name)
		if !ok || p.Mounted != w[0] || p.Shared != w[1] || p.Path != "/"+name+"-data-dir/csi" {
			t.Errorf("pool %s as hpp-csi reads it: %+v (found %v); want mounted %v shared %v", name, p, ok, w[0], w[1])
		}
	}
}
