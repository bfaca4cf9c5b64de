package render

import (
	"slices"
	"testing"

	secv1 "github.com/openshift/api/security/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

// Every pod the operator makes names its SCC on OpenShift, and none
// elsewhere; the SCCs follow the CR's mode.
func TestPodsRequireTheirSCCOnOpenShift(t *testing.T) {
	pool := hppv1.StoragePool{Name: "p", Path: "/var/p", PVCTemplate: &corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
	pools := &hppv1.HostPathProvisionerSpec{StoragePools: []hppv1.StoragePool{pool}}
	legacy := &hppv1.HostPathProvisionerSpec{PathConfig: &hppv1.PathConfig{Path: "/var/hpvolumes"}}
	for _, openShift := range []bool{false, true} {
		c := DefaultConfig()
		c.OpenShift = openShift
		ds, err := c.CSIDaemonSet(pools)
		if err != nil {
			t.Fatal(err)
		}
		templates := map[string]struct {
			got  map[string]string
			want string
		}{
			"CSI DaemonSet":    {ds.Spec.Template.Annotations, CSISCCName},
			"legacy DaemonSet": {c.LegacyDaemonSet(legacy).Spec.Template.Annotations, LegacySCCName},
			"mounter":          {c.MounterDeployment(pools, &pool, "n1").Spec.Template.Annotations, CSISCCName},
			"cleanup Job":      {c.CleanupJob(pools, "p", "/var/p", "n1").Spec.Template.Annotations, CSISCCName},
		}
		for name, tpl := range templates {
			got, ok := tpl.got[RequiredSCCAnnotation]
			if openShift && got != tpl.want || !openShift && ok {
				t.Errorf("OpenShift %v: %s pods require SCC %q (set %v)", openShift, name, got, ok)
			}
		}
		wantSCCs := map[bool][2]int{false: {0, 0}, true: {1, 2}}[openShift]
		if n, m := len(c.SCCs(pools)), len(c.SCCs(legacy)); n != wantSCCs[0] || m != wantSCCs[1] {
			t.Errorf("OpenShift %v: %d SCCs for a pools CR, %d for a pathConfig CR; want %v", openShift, n, m, wantSCCs)
		}
	}
}

// The CSI SCC admits the CSI pod as rendered, with the peer transport or
// without: every volume type it mounts, and a host port only when it
// publishes one.
func TestCSISCCAdmitsTheCSIPod(t *testing.T) {
	for _, peer := range []bool{false, true} {
		c := DefaultConfig()
		c.OpenShift, c.PeerTransport = true, peer
		ds, err := c.CSIDaemonSet(&hppv1.HostPathProvisionerSpec{StoragePools: []hppv1.StoragePool{{Name: "p", Path: "/var/p"}}})
		if err != nil {
			t.Fatal(err)
		}
		scc := c.CSISCC()
		for _, v := range ds.Spec.Template.Spec.Volumes {
			var fs secv1.FSType
			switch {
			case v.HostPath != nil:
				fs = secv1.FSTypeHostPath
			case v.EmptyDir != nil:
				fs = secv1.FSTypeEmptyDir
			case v.ConfigMap != nil:
				fs = secv1.FSTypeConfigMap
			default:
				t.Fatalf("volume %s: a type this test does not know", v.Name)
			}
			if !slices.Contains(scc.Volumes, fs) {
				t.Errorf("peer transport %v: volume %s (%s) is not allowed by the SCC (%v)", peer, v.Name, fs, scc.Volumes)
			}
		}
		hostPorts := false
		for _, ctr := range ds.Spec.Template.Spec.Containers {
			for _, p := range ctr.Ports {
				hostPorts = hostPorts || p.HostPort != 0
			}
		}
		if hostPorts != peer || scc.AllowHostPorts != peer {
			t.Errorf("peer transport %v: host ports in the pod %v, allowed by the SCC %v; want both %v", peer, hostPorts, scc.AllowHostPorts, peer)
		}
	}
}
