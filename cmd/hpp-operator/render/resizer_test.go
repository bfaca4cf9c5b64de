package render

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/pool"
)

// enforceSize reaches hpp-csi's --datadir (as hpp-csi parses it) and the
// mounter of a pvcTemplate pool (--enforce-size: prjquota); a pool without
// it passes neither.
func TestEnforceSizeReachesDriverAndMounter(t *testing.T) {
	rwo := &corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}
	pools := []hppv1.StoragePool{
		{Name: "quota", Path: "/var/quota", EnforceSize: true},
		{Name: "block", Path: "/mnt/block", EnforceSize: true, PVCTemplate: rwo},
		{Name: "plain", Path: "/mnt/plain", PVCTemplate: rwo},
	}
	data, err := Datadir(pools)
	if err != nil {
		t.Fatal(err)
	}
	set, err := pool.Parse([]byte(data))
	if err != nil {
		t.Fatalf("hpp-csi refuses %s: %v", data, err)
	}
	for name, want := range map[string]bool{"quota": true, "block": true, "plain": false} {
		if p, ok := set.Get(name); !ok || p.EnforceSize != want {
			t.Errorf("pool %s as hpp-csi reads it: %+v; want enforceSize %v", name, p, want)
		}
	}
	cfg := DefaultConfig()
	spec := &hppv1.HostPathProvisionerSpec{StoragePools: pools}
	for i, want := range map[int]bool{1: true, 2: false} {
		args := cfg.MounterDeployment(spec, &pools[i], "node-1").Spec.Template.Spec.Containers[0].Args
		if slices.Contains(args, "--enforce-size") != want {
			t.Errorf("mounter of %s: args %q, want --enforce-size %v", pools[i].Name, args, want)
		}
	}
}

// csi-resizer runs once, beside hpp-csi --controller-only on a shared
// socket, with leader election, unprivileged, where the workload placement
// says, as its own ServiceAccount.
func TestResizerDeployment(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Images.Resizer = "r/csi-resizer:2"
	spec := &hppv1.HostPathProvisionerSpec{
		StoragePools: []hppv1.StoragePool{{Name: "local", Path: "/var/hpvolumes"}},
		Workload:     hppv1.NodePlacement{NodeSelector: map[string]string{"infra": "true"}},
	}
	objs, err := cfg.CSIObjects(spec)
	if err != nil {
		t.Fatal(err)
	}
	var d *appsv1.Deployment
	for _, o := range objs {
		if x, ok := o.(*appsv1.Deployment); ok && x.Name == ResizerName {
			d = x
		}
	}
	if d == nil {
		t.Fatal("CSIObjects has no csi-resizer Deployment")
	}
	pod := d.Spec.Template.Spec
	if *d.Spec.Replicas != 1 || pod.ServiceAccountName != ResizerName || pod.NodeSelector["infra"] != "true" || len(pod.Containers) != 2 {
		t.Fatalf("deployment %+v", d.Spec)
	}
	driver, resizer := pod.Containers[0], pod.Containers[1]
	for _, want := range []string{"--controller-only", "--endpoint=unix:///csi/csi.sock", "--drivername=" + contract.DriverName} {
		if !slices.Contains(driver.Args, want) {
			t.Errorf("hpp-csi args %q lack %s", driver.Args, want)
		}
	}
	for _, want := range []string{"--csi-address=/csi/csi.sock", "--leader-election", "--leader-election-namespace=$(NAMESPACE)", "--handle-volume-inuse-error=false"} {
		if !slices.Contains(resizer.Args, want) {
			t.Errorf("csi-resizer args %q lack %s", resizer.Args, want)
		}
	}
	if resizer.Image != "r/csi-resizer:2" || driver.Image != cfg.Images.CSI {
		t.Errorf("images %s, %s", driver.Image, resizer.Image)
	}
	for _, c := range pod.Containers {
		if c.SecurityContext.Privileged != nil || *c.SecurityContext.AllowPrivilegeEscalation || len(c.VolumeMounts) != 1 {
			t.Errorf("container %s: %+v, mounts %+v; want unprivileged with only the socket", c.Name, c.SecurityContext, c.VolumeMounts)
		}
	}
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			t.Errorf("volume %s is a host path", v.Name)
		}
	}
}
