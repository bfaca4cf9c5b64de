package render

import (
	"path"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

func peerSpec(features ...string) *hppv1.HostPathProvisionerSpec {
	return &hppv1.HostPathProvisionerSpec{StoragePools: []hppv1.StoragePool{{Name: "local", Path: "/var/hpp"}}, FeatureGates: features}
}

func container(t *testing.T, pod corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range pod.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %s", name)
	return corev1.Container{}
}

// With the peer transport, hpp-csi listens on the common port published on
// its node, keeps its certificate in a memory emptyDir and reads the
// operator's bundle from the optional ConfigMap volume; csi-provisioner
// passes the claim's name (--extra-create-metadata), which the peer
// transport needs to find a clone's source.
func TestPeerTransportFlagsPortAndVolumes(t *testing.T) {
	cfg := DefaultConfig()
	cfg.PeerTransport = true
	ds, err := cfg.CSIDaemonSet(peerSpec())
	if err != nil {
		t.Fatal(err)
	}
	pod := ds.Spec.Template.Spec
	driver := container(t, pod, CSIContainerName)
	for _, want := range []string{"--peer-address=:" + strconv.Itoa(PeerPort), "--peer-cert-dir=" + peerCertDir,
		"--peer-ca-bundle=" + path.Join(peerBundleDir, PeerCABundleKey)} {
		if !slices.Contains(driver.Args, want) {
			t.Errorf("hpp-csi args lack %s: %v", want, driver.Args)
		}
	}
	i := slices.IndexFunc(driver.Ports, func(p corev1.ContainerPort) bool { return p.Name == peerPortName })
	if i < 0 || driver.Ports[i].ContainerPort != PeerPort || driver.Ports[i].HostPort != PeerPort || driver.Ports[i].Protocol != corev1.ProtocolTCP {
		t.Errorf("hpp-csi ports %+v: want %s %d published as hostPort %d", driver.Ports, peerPortName, PeerPort, PeerPort)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range driver.VolumeMounts {
		mounts[m.Name] = m
	}
	if m := mounts["peer-cert"]; m.MountPath != peerCertDir || m.ReadOnly {
		t.Errorf("peer-cert mount %+v: want writable at %s (the keeper writes there)", m, peerCertDir)
	}
	if m := mounts["peer-ca-bundle"]; m.MountPath != peerBundleDir || !m.ReadOnly {
		t.Errorf("peer-ca-bundle mount %+v: want read-only at %s", m, peerBundleDir)
	}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	if ed := vols["peer-cert"].EmptyDir; ed == nil || ed.Medium != corev1.StorageMediumMemory {
		t.Errorf("peer-cert volume %+v: want an emptyDir in memory (the key never reaches the disk)", vols["peer-cert"])
	}
	if cm := vols["peer-ca-bundle"].ConfigMap; cm == nil || cm.Name != PeerCABundleName || cm.Optional == nil || !*cm.Optional {
		t.Errorf("peer-ca-bundle volume %+v: want the optional ConfigMap %s", vols["peer-ca-bundle"], PeerCABundleName)
	}
	if p := container(t, pod, "csi-provisioner"); !slices.Contains(p.Args, "--extra-create-metadata=true") {
		t.Errorf("csi-provisioner args lack --extra-create-metadata=true: %v", p.Args)
	}
	if pod.HostNetwork {
		t.Error("the node pods run on the host network: the hostPort is how the peer port reaches the node")
	}
}

// Off (deploy/'s csi-only base): no peer flag, port or volume.
func TestNoPeerTransportByDefault(t *testing.T) {
	cfg := DefaultConfig()
	ds, err := cfg.CSIDaemonSet(peerSpec())
	if err != nil {
		t.Fatal(err)
	}
	pod := ds.Spec.Template.Spec
	driver := container(t, pod, CSIContainerName)
	for _, a := range driver.Args {
		if len(a) > 7 && a[:7] == "--peer-" {
			t.Errorf("hpp-csi has %s without the peer transport", a)
		}
	}
	for _, p := range driver.Ports {
		if p.HostPort != 0 {
			t.Errorf("port %+v published on the node without the peer transport", p)
		}
	}
	for _, v := range pod.Volumes {
		if v.Name == "peer-cert" || v.Name == "peer-ca-bundle" {
			t.Errorf("volume %s without the peer transport", v.Name)
		}
	}
}

// grants flattens rules to "group resource verb" (resource/name when the
// rule names one).
func grants(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, g+" "+res+" "+v)
				}
			}
		}
	}
	return out
}

// The node plugin's ClusterRole gains exactly what cmd/hpp-csi/kubeapi
// calls for the peer transport: get nodes, create and get its own
// certificate request. Claims and PVs (get) it already has; VolumeSnapshots
// and their contents (get) come with the Snapshotting gate.
func TestPeerTransportRBAC(t *testing.T) {
	role := func(peer bool, features ...string) []string {
		cfg := DefaultConfig()
		cfg.PeerTransport = peer
		objs, err := cfg.CSIObjects(peerSpec(features...))
		if err != nil {
			t.Fatal(err)
		}
		cr, ok := objs[1].(*rbacv1.ClusterRole)
		if !ok || cr.Name != CSIServiceAccount {
			t.Fatalf("objects[1] is %T %s, want the ClusterRole %s", objs[1], objs[1].GetName(), CSIServiceAccount)
		}
		return grants(cr.Rules)
	}
	off, on := role(false), role(true)
	var added []string
	for _, g := range on {
		if !slices.Contains(off, g) {
			added = append(added, g)
		}
	}
	want := []string{" nodes get", "certificates.k8s.io certificatesigningrequests create", "certificates.k8s.io certificatesigningrequests get"}
	if !slices.Equal(added, want) {
		t.Errorf("the peer transport adds %q; want exactly %q", added, want)
	}
	for _, g := range off {
		if !slices.Contains(on, g) {
			t.Errorf("the peer transport drops %q", g)
		}
	}
	for _, need := range []string{" persistentvolumeclaims get", " persistentvolumes get"} {
		if !slices.Contains(on, need) {
			t.Errorf("the peer transport reads claims and PVs, but the ClusterRole lacks %q", need)
		}
	}
	snap := role(true, hppv1.FeatureSnapshotting)
	for _, need := range []string{"snapshot.storage.k8s.io volumesnapshots get", "snapshot.storage.k8s.io volumesnapshotcontents get"} {
		if !slices.Contains(snap, need) {
			t.Errorf("with Snapshotting a restore reads %q, which the ClusterRole lacks", need)
		}
	}
}
