package render

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

// For a pathConfig CR, hpp-csi gets the pool "legacy" in <path>/csi with
// legacyPath <path> (the legacy DaemonSet's PV_DIR), mounted where the host
// has it.
func TestCSIDaemonSetForPathConfig(t *testing.T) {
	cfg := DefaultConfig()
	spec := &hppv1.HostPathProvisionerSpec{PathConfig: &hppv1.PathConfig{Path: "/var/hpvolumes"}}
	ds, err := cfg.CSIDaemonSet(spec)
	if err != nil {
		t.Fatal(err)
	}
	driver := ds.Spec.Template.Spec.Containers[0]
	var datadir string
	for _, e := range driver.Env {
		if e.Name == "PV_DIR" {
			datadir = e.Value
		}
	}
	if want := `[{"name":"legacy","path":"/var/hpvolumes/csi","legacyPath":"/var/hpvolumes"}]`; datadir != want {
		t.Errorf("PV_DIR\n got  %s\n want %s", datadir, want)
	}
	legacy := cfg.LegacyDaemonSet(spec).Spec.Template.Spec.Containers[0]
	if legacy.VolumeMounts[0].MountPath != "/var/hpvolumes" {
		t.Fatalf("legacy DaemonSet mounts PV_DIR at %s", legacy.VolumeMounts[0].MountPath)
	}
	var mount *corev1.VolumeMount
	for i, m := range driver.VolumeMounts {
		if m.MountPath == "/var/hpvolumes" {
			mount = &driver.VolumeMounts[i]
		}
	}
	if mount == nil || mount.MountPropagation == nil || *mount.MountPropagation != corev1.MountPropagationHostToContainer {
		t.Fatalf("hpp-csi mounts %+v, want /var/hpvolumes with HostToContainer propagation", driver.VolumeMounts)
	}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.Name == mount.Name {
			if v.HostPath == nil || v.HostPath.Path != "/var/hpvolumes" {
				t.Fatalf("volume %s = %+v, want host path /var/hpvolumes", v.Name, v.VolumeSource)
			}
			return
		}
	}
	t.Fatalf("no volume %s in %+v", mount.Name, ds.Spec.Template.Spec.Volumes)
}
