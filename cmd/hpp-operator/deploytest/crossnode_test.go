package deploytest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	secv1 "github.com/openshift/api/security/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

const crossNodeComponent = "cross-node-clones"

// csiOnlyOverlays are the overlays without the operator, each of which the
// cross-node-clones component must turn the peer transport on in.
func csiOnlyOverlays(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, name := range overlays(t) {
		if strings.HasPrefix(name, "csi-only") {
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		t.Fatal("no csi-only overlays")
	}
	return out
}

// withCrossNode adds, in the copy of deploy/ at root, the overlay a user
// writes to turn cross-node clones on over overlay name, and returns its
// directory.
func withCrossNode(t *testing.T, root, name string) string {
	t.Helper()
	dir := filepath.Join(root, "overlays", name+"-"+crossNodeComponent)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../" + name +
		"\ncomponents:\n- ../../components/" + crossNodeComponent + "\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// buildCrossNode renders overlay name with the component.
func buildCrossNode(t *testing.T, name string) []*unstructured.Unstructured {
	t.Helper()
	return build(t, filesys.MakeFsOnDisk(), withCrossNode(t, copyDeploy(t, ""), name))
}

func typed[T any](t *testing.T, objs []*unstructured.Unstructured, kind, name string) *T {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			out := new(T)
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
				t.Fatal(err)
			}
			return out
		}
	}
	return nil
}

// peerParts is what the operator's render adds with the peer transport:
// hpp-csi's args, ports and mounts, the pod's volumes, the ClusterRole's
// rules.
type peerParts struct {
	args    []string
	ports   []corev1.ContainerPort
	mounts  []corev1.VolumeMount
	volumes []corev1.Volume
	rules   []rbacv1.PolicyRule
}

func renderedPeerParts(t *testing.T) peerParts {
	t.Helper()
	spec := &hppv1.HostPathProvisionerSpec{StoragePools: []hppv1.StoragePool{{Name: "local", Path: "/var/hpvolumes"}}}
	objs := func(peer bool) (*appsv1.DaemonSet, *rbacv1.ClusterRole) {
		cfg := render.DefaultConfig()
		cfg.PeerTransport = peer
		all, err := cfg.CSIObjects(spec)
		if err != nil {
			t.Fatal(err)
		}
		var ds *appsv1.DaemonSet
		var cr *rbacv1.ClusterRole
		for _, o := range all {
			switch o := o.(type) {
			case *appsv1.DaemonSet:
				ds = o
			case *rbacv1.ClusterRole:
				if o.Name == render.CSIServiceAccount {
					cr = o
				}
			}
		}
		return ds, cr
	}
	offDS, offCR := objs(false)
	onDS, onCR := objs(true)
	off, on := offDS.Spec.Template.Spec, onDS.Spec.Template.Spec
	return peerParts{
		args:    minus(on.Containers[0].Args, off.Containers[0].Args),
		ports:   minus(on.Containers[0].Ports, off.Containers[0].Ports),
		mounts:  minus(on.Containers[0].VolumeMounts, off.Containers[0].VolumeMounts),
		volumes: minus(on.Volumes, off.Volumes),
		rules:   minus(onCR.Rules, offCR.Rules),
	}
}

// minus is a without the items of b, in a's order.
func minus[T any](a, b []T) []T {
	var out []T
	for _, v := range a {
		if !slices.ContainsFunc(b, func(o T) bool { return equality.Semantic.DeepEqual(o, v) }) {
			out = append(out, v)
		}
	}
	return out
}

// The component over each csi-only overlay: the overlay's objects are
// still installable; hpp-csi (whichever container the overlay puts first:
// the component's JSON patch addresses it by index) gains exactly the operator's peer args, appended
// after the overlay's own (the sidecars' args patch included), and its
// port, mounts and volumes, and the DaemonSet changes in nothing else; the
// node plugin's ClusterRole gains exactly the operator's peer rules; the
// peer NetworkPolicy is in the DaemonSet's namespace, as the operator's
// install has it; on OpenShift the SCC admits the host port and volumes.
func TestCrossNodeComponentOverEveryCSIOnlyOverlay(t *testing.T) {
	want := renderedPeerParts(t)
	if len(want.args) != 3 || len(want.ports) != 1 || len(want.mounts) != 2 || len(want.volumes) != 2 || len(want.rules) != 2 {
		t.Fatalf("render's peer transport changed (%+v): update this test and the component's README text", want)
	}
	for _, name := range csiOnlyOverlays(t) {
		t.Run(name, func(t *testing.T) {
			objs := buildCrossNode(t, name)
			checkInstallable(t, objs)
			plain := buildOverlay(t, name)
			ds := typed[appsv1.DaemonSet](t, objs, "DaemonSet", render.CSIDaemonSetName)
			base := typed[appsv1.DaemonSet](t, plain, "DaemonSet", render.CSIDaemonSetName)
			if ds == nil || base == nil {
				t.Fatal("no DaemonSet " + render.CSIDaemonSetName)
			}
			pod := ds.Spec.Template.Spec
			drv, baseDrv := driver(t, ds), driver(t, base)
			if got := drv.Args; !slices.Equal(got, append(slices.Clone(baseDrv.Args), want.args...)) {
				t.Errorf("hpp-csi args %q: want the overlay's, then %q", got, want.args)
			}
			checkAdded(t, "hpp-csi ports", drv.Ports, baseDrv.Ports, want.ports)
			checkAdded(t, "hpp-csi volumeMounts", drv.VolumeMounts, baseDrv.VolumeMounts, want.mounts)
			checkAdded(t, "volumes", pod.Volumes, base.Spec.Template.Spec.Volumes, want.volumes)
			// Nothing else of the DaemonSet changes (container order aside:
			// a strategic merge patch puts the containers it names first).
			strip := ds.DeepCopy()
			sp := &strip.Spec.Template.Spec
			for i := range sp.Containers {
				if c := &sp.Containers[i]; c.Name == render.CSIContainerName {
					c.Args = c.Args[:len(c.Args)-len(want.args)]
					c.Ports = minus(c.Ports, want.ports)
					c.VolumeMounts = minus(c.VolumeMounts, want.mounts)
				}
			}
			sp.Volumes = minus(sp.Volumes, want.volumes)
			for _, d := range []*appsv1.DaemonSet{strip, base} {
				normalize(d)
				slices.SortFunc(d.Spec.Template.Spec.Containers, func(a, b corev1.Container) int { return strings.Compare(a.Name, b.Name) })
			}
			if !equality.Semantic.DeepEqual(strip.Spec, base.Spec) {
				t.Errorf("the component changes the DaemonSet beyond the peer transport")
			}

			cr := typed[rbacv1.ClusterRole](t, objs, "ClusterRole", render.CSIServiceAccount)
			baseCR := typed[rbacv1.ClusterRole](t, plain, "ClusterRole", render.CSIServiceAccount)
			if cr == nil || baseCR == nil || !equality.Semantic.DeepEqual(cr.Rules, append(slices.Clone(baseCR.Rules), want.rules...)) {
				t.Errorf("ClusterRole %s rules: want the overlay's and then %+v", render.CSIServiceAccount, want.rules)
			}

			np := typed[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy", render.PeerNetworkPolicyName)
			cfg := render.DefaultConfig()
			if np == nil || np.Namespace != ds.Namespace || !equality.Semantic.DeepEqual(np.Spec, cfg.PeerNetworkPolicy().Spec) {
				t.Errorf("NetworkPolicy %s: %+v; want the operator's install's, in the DaemonSet's namespace %s", render.PeerNetworkPolicyName, np, ds.Namespace)
			}

			if scc := typed[secv1.SecurityContextConstraints](t, objs, "SecurityContextConstraints", render.CSISCCName); scc != nil {
				cfg.OpenShift, cfg.PeerTransport = true, true
				op := cfg.CSISCC()
				if !scc.AllowHostPorts || !slices.Equal(scc.Volumes, op.Volumes) {
					t.Errorf("SCC %s: allowHostPorts %v, volumes %v; want the operator's with the peer transport: true, %v",
						render.CSISCCName, scc.AllowHostPorts, scc.Volumes, op.Volumes)
				}
			} else if name == "csi-only-openshift" {
				t.Errorf("no SCC %s in %s", render.CSISCCName, name)
			}
		})
	}
}

// driver is the DaemonSet's hpp-csi container.
func driver(t *testing.T, ds *appsv1.DaemonSet) corev1.Container {
	t.Helper()
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name == render.CSIContainerName {
			return c
		}
	}
	t.Fatalf("no container %s", render.CSIContainerName)
	return corev1.Container{}
}

func checkAdded[T any](t *testing.T, what string, got, base, peer []T) {
	t.Helper()
	if len(got) != len(base)+len(peer) || len(minus(got, base)) != len(peer) || len(minus(minus(got, base), peer)) != 0 {
		t.Errorf("%s %+v: want the overlay's %+v and %+v", what, got, base, peer)
	}
}

// TestCSIOnlyWithCrossNodeIsTheOperators: csi-only with the component runs
// the very DaemonSet the operator builds with the peer transport.
func TestCSIOnlyWithCrossNodeIsTheOperators(t *testing.T) {
	ds := typed[appsv1.DaemonSet](t, buildCrossNode(t, "csi-only"), "DaemonSet", render.CSIDaemonSetName)
	checkIsTheOperators(t, "csi-only with "+crossNodeComponent, ds, true)
}

// The component follows the overlay's namespace: line.
func TestCrossNodeComponentFollowsTheNamespace(t *testing.T) {
	const ns = "storage-system"
	objs := build(t, filesys.MakeFsOnDisk(), withCrossNode(t, copyDeploy(t, ns), "csi-only"))
	for _, u := range objs {
		if u.GetNamespace() != "" && u.GetNamespace() != ns {
			t.Errorf("%s: namespace %s, want %s", id(u), u.GetNamespace(), ns)
		}
	}
	if np := typed[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy", render.PeerNetworkPolicyName); np == nil || np.Namespace != ns {
		t.Errorf("NetworkPolicy %s: %v", render.PeerNetworkPolicyName, np)
	}
}
