package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// Legacy scenario 1: on the real node, a pod writes through a legacy
// hostPath PV and the file is in PV_DIR/<pv name> on the host; the PV is
// what the KubeVirt provisioner made (hostPath type Directory, pinned by
// the node's hostname label); deleting the claim removes the directory.
func TestLegacyPodWritesThroughHostPathPV(t *testing.T) {
	env := needEnv(t)
	ns := namespace(t, env)
	ctx := context.Background()
	real := startLegacy(t, env, env.C.RealNode(), legacyOptions{})
	storageClass(t, env, legacyClass(ns))
	createPVC(t, env, kit.PVC(ns, "data", ns, "16Mi"))
	createPod(t, env, kit.OnNode(kit.Pod(ns, "writer", "echo written-by-pod > /data/file", kit.PodVolume{Name: "v", Claim: "data", Path: "/data"}), real.node.Name))
	if _, err := kit.WaitPodPhase(ctx, env.C.Client, ns, "writer", corev1.PodSucceeded, 2*time.Minute); err != nil {
		t.Fatalf("%v; claim events: %s", err, kit.Events(ctx, env.C.Client, ns, "PersistentVolumeClaim", "data"))
	}
	pv := boundPV(t, env, ns, "data")
	dir := filepath.Join(real.pvDir, pv.Name)
	checkLegacyPV(t, env, pv, real, dir)
	if got := readFile(t, filepath.Join(dir, "file")); got != "written-by-pod\n" {
		t.Errorf("%s/file = %q", dir, got)
	}
	checkSELinuxType(t, dir, filepath.Join(dir, "file"))
	if v := real.metric(t, `hpp_legacy_provision_total{result="provisioned"}`); v != "1" {
		t.Errorf("hpp_legacy_provision_total{result=provisioned} = %q, want 1", v)
	}

	deletePodNow(t, env, ns, "writer")
	deletePVC(t, env, ns, "data")
	waitPVGone(t, env, pv.Name)
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat %s after the claim was deleted: %v, want not exist", dir, err)
	}
	if v := real.metric(t, `hpp_legacy_delete_total{result="deleted"}`); v != "1" {
		t.Errorf("hpp_legacy_delete_total{result=deleted} = %q, want 1", v)
	}
}

// checkLegacyPV checks the PV fields the compatibility contract fixes.
func checkLegacyPV(t *testing.T, env *kit.Env, pv *corev1.PersistentVolume, owner *legacyNode, dir string) {
	t.Helper()
	node, err := env.C.Client.CoreV1().Nodes().Get(context.Background(), owner.node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hp := pv.Spec.HostPath
	if hp == nil || hp.Path != dir || hp.Type == nil || *hp.Type != corev1.HostPathDirectory {
		t.Errorf("PV %s hostPath = %+v, want path %s type Directory", pv.Name, hp, dir)
	}
	wantTerms := []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
		Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node.Labels[corev1.LabelHostname]},
	}}}}
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil || !reflect.DeepEqual(pv.Spec.NodeAffinity.Required.NodeSelectorTerms, wantTerms) {
		t.Errorf("PV %s node affinity = %+v, want %+v", pv.Name, pv.Spec.NodeAffinity, wantTerms)
	}
	for k, v := range map[string]string{
		contract.AnnProvisionOnNode: owner.node.Name,
		contract.AnnIdentity:        contract.LegacyProvisionerName,
		contract.AnnProvisionedBy:   contract.LegacyProvisionerName,
	} {
		if pv.Annotations[k] != v {
			t.Errorf("PV %s annotation %s = %q, want %q", pv.Name, k, pv.Annotations[k], v)
		}
	}
}

// checkSELinuxType checks the container_file_t type where SELinux is on,
// and says that it could not where it is off.
func checkSELinuxType(t *testing.T, paths ...string) {
	t.Helper()
	if _, err := os.Stat("/sys/fs/selinux/enforce"); err != nil {
		t.Logf("SELinux is off on this host (no /sys/fs/selinux/enforce): the container_file_t label of %s is not checked", paths)
		return
	}
	for _, p := range paths {
		buf := make([]byte, 256)
		n, err := unix.Lgetxattr(p, "security.selinux", buf)
		if err != nil {
			t.Errorf("SELinux label of %s: %v", p, err)
			continue
		}
		label := strings.TrimRight(string(buf[:n]), "\x00")
		if parts := strings.Split(label, ":"); len(parts) < 3 || parts[2] != "container_file_t" {
			t.Errorf("%s has SELinux label %q, want type container_file_t", p, label)
		}
	}
}

// Legacy scenario 2: with hpp-legacy on the real node and two simulated
// nodes, each with its own PV_DIR, a WaitForFirstConsumer claim is
// provisioned on the node the scheduler picked and nowhere else, and on
// deletion only the owner removes its directory: a same-named directory on
// another node is left alone.
func TestLegacyWFFCOnSchedulersNodeOnly(t *testing.T) {
	env := needEnv(t)
	ns := namespace(t, env)
	real := startLegacy(t, env, env.C.RealNode(), legacyOptions{})
	a := addLegacySimNode(t, env, "legacy-wffc-a", legacyOptions{})
	b := addLegacySimNode(t, env, "legacy-wffc-b", legacyOptions{})
	storageClass(t, env, legacyClass(ns))
	createPVC(t, env, kit.PVC(ns, "on-a", ns, "16Mi"))
	// The pod is scheduled to a (which has no kubelet: it stays Pending
	// there), and the scheduler's choice is what selects the node.
	createPod(t, env, kit.OnNode(kit.Pod(ns, "consumer", "true", kit.PodVolume{Name: "v", Claim: "on-a", Path: "/data"}), a.node.Name))
	pv := boundPV(t, env, ns, "on-a")
	checkLegacyPV(t, env, pv, a, filepath.Join(a.pvDir, pv.Name))
	if got := a.volumes(t); !reflect.DeepEqual(got, []string{pv.Name}) {
		t.Errorf("%s PV_DIR = %q, want [%s]", a.node.Name, got, pv.Name)
	}
	for _, other := range []*legacyNode{real, b} {
		if got := other.volumes(t); got != nil {
			t.Errorf("%s PV_DIR = %q, want nothing (the scheduler picked %s)", other.node.Name, got, a.node.Name)
		}
	}

	// A directory of the same name on b, as if b had one by accident.
	decoy := filepath.Join(b.pvDir, pv.Name)
	if err := os.Mkdir(decoy, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(decoy, "keep"), []byte("b's"), 0o644); err != nil {
		t.Fatal(err)
	}
	deletePodNow(t, env, ns, "consumer")
	deletePVC(t, env, ns, "on-a")
	waitPVGone(t, env, pv.Name)
	if got := a.volumes(t); got != nil {
		t.Errorf("%s PV_DIR = %q after delete, want nothing", a.node.Name, got)
	}
	if got := readFile(t, filepath.Join(decoy, "keep")); got != "b's" {
		t.Errorf("b's same-named directory was touched: keep = %q", got)
	}
	for _, other := range []*legacyNode{real, b} {
		if v := other.metric(t, `hpp_legacy_delete_total{result="deleted"}`); v != "" {
			t.Errorf("%s deleted something: hpp_legacy_delete_total{result=deleted} = %s", other.node.Name, v)
		}
	}
}

// Legacy scenario 3: kubevirt.io/provisionOnNode provisions at once on the
// named node, for Immediate and WaitForFirstConsumer classes, without a
// consumer; an Immediate claim without it is never provisioned and gets one
// event (not one per node) saying why and what to do.
func TestLegacyProvisionOnNode(t *testing.T) {
	env := needEnv(t)
	ns := namespace(t, env)
	ctx := context.Background()
	real := startLegacy(t, env, env.C.RealNode(), legacyOptions{})
	a := addLegacySimNode(t, env, "legacy-pin-a", legacyOptions{})
	b := addLegacySimNode(t, env, "legacy-pin-b", legacyOptions{})
	storageClass(t, env, legacyClass(ns+"-now", kit.Immediate))
	storageClass(t, env, legacyClass(ns+"-wffc"))

	createPVC(t, env, pinnedPVC(ns, "now-b", ns+"-now", "16Mi", b.node.Name))
	createPVC(t, env, pinnedPVC(ns, "wffc-a", ns+"-wffc", "16Mi", a.node.Name))
	pvB := boundPV(t, env, ns, "now-b")
	pvA := boundPV(t, env, ns, "wffc-a")
	checkLegacyPV(t, env, pvB, b, filepath.Join(b.pvDir, pvB.Name))
	checkLegacyPV(t, env, pvA, a, filepath.Join(a.pvDir, pvA.Name))
	claimA, err := env.C.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "wffc-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := claimA.Annotations[contract.AnnSelectedNode]; got != a.node.Name {
		t.Errorf("WaitForFirstConsumer claim pinned to %s: selected-node = %q", a.node.Name, got)
	}

	createPVC(t, env, kit.PVC(ns, "nowhere", ns+"-now", "16Mi"))
	ev := waitEvent(t, env, ns, "PersistentVolumeClaim", "nowhere", "NoNodeForClaim")
	want := `no node will provision this claim: StorageClass "` + ns + `-now" binds immediately and the claim has no ` + contract.AnnProvisionOnNode + ` annotation, so ` + contract.LegacyProvisionerName + ` cannot tell which node's disk to use; add the annotation ` + contract.AnnProvisionOnNode + `: <node name> to the claim, or use a StorageClass with volumeBindingMode: WaitForFirstConsumer`
	if ev.Message != want || ev.Type != corev1.EventTypeWarning {
		t.Errorf("event = %s %q\nwant Warning %q", ev.Type, ev.Message, want)
	}
	// Count only after every node has judged the claim unplaceable: each
	// tried to create the event, and all but one got AlreadyExists.
	for _, l := range []*legacyNode{real, a, b} {
		l.waitLog(t, "claim nowhere judged", `"claim": "`+ns+`/nowhere"`, `"verdict": "unplaceable"`)
	}
	list, err := env.C.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.InvolvedObject.Name == "nowhere" && e.Reason == "NoNodeForClaim" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d NoNodeForClaim events, want 1 for three nodes", n)
	}
	pvc, err := env.C.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "nowhere", metav1.GetOptions{})
	if err != nil || pvc.Spec.VolumeName != "" || pvc.Status.Phase != corev1.ClaimPending {
		t.Errorf("claim nowhere: volume %q phase %s (%v), want Pending", pvc.Spec.VolumeName, pvc.Status.Phase, err)
	}
	if got := real.volumes(t); got != nil {
		t.Errorf("real node PV_DIR = %q, want nothing", got)
	}
	if got := a.volumes(t); !reflect.DeepEqual(got, []string{pvA.Name}) {
		t.Errorf("%s PV_DIR = %q, want [%s]", a.node.Name, got, pvA.Name)
	}
	if got := b.volumes(t); !reflect.DeepEqual(got, []string{pvB.Name}) {
		t.Errorf("%s PV_DIR = %q, want [%s]", b.node.Name, got, pvB.Name)
	}
}

// Legacy scenario 4: USE_NAMING_PREFIX=true (any case) names the directory
// <claim name>-<pv name>.
func TestLegacyNamingPrefix(t *testing.T) {
	env := needEnv(t)
	ns := namespace(t, env)
	real := startLegacy(t, env, env.C.RealNode(), legacyOptions{env: []string{"USE_NAMING_PREFIX=True"}})
	storageClass(t, env, legacyClass(ns, kit.Immediate))
	createPVC(t, env, pinnedPVC(ns, "named", ns, "16Mi", real.node.Name))
	pv := boundPV(t, env, ns, "named")
	want := "named-" + pv.Name
	if got := real.volumes(t); !reflect.DeepEqual(got, []string{want}) {
		t.Errorf("PV_DIR = %q, want [%s]", got, want)
	}
	checkLegacyPV(t, env, pv, real, filepath.Join(real.pvDir, want))
	deletePVC(t, env, ns, "named")
	waitPVGone(t, env, pv.Name)
	if got := real.volumes(t); got != nil {
		t.Errorf("PV_DIR = %q after delete", got)
	}
}

// Legacy scenario 5: the Retain reclaim policy (from the StorageClass)
// keeps the directory and its data after the claim is gone.
func TestLegacyRetainKeepsDirectory(t *testing.T) {
	env := needEnv(t)
	ns := namespace(t, env)
	ctx := context.Background()
	real := startLegacy(t, env, env.C.RealNode(), legacyOptions{})
	storageClass(t, env, legacyClass(ns, kit.Immediate, kit.Retain))
	createPVC(t, env, pinnedPVC(ns, "kept", ns, "16Mi", real.node.Name))
	pv := boundPV(t, env, ns, "kept")
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
		t.Errorf("reclaim policy = %s, want Retain from the class", pv.Spec.PersistentVolumeReclaimPolicy)
	}
	data := filepath.Join(real.pvDir, pv.Name, "data")
	if err := os.WriteFile(data, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.C.Client.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	deletePVC(t, env, ns, "kept")
	waitPVPhase(t, env, pv.Name, corev1.VolumeReleased)
	// The owner looks at every PV update; once it logged this one as
	// Released, it has decided, and the directory shows what it decided.
	real.waitLog(t, "PV "+pv.Name+" checked as Released", `"pv": "`+pv.Name+`"`, `"phase": "Released"`)
	if got := readFile(t, data); got != "precious" {
		t.Errorf("retained data = %q", got)
	}
	if _, err := env.C.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("retained PV: %v", err)
	}
}

// Legacy scenario 6: a PV whose path is not a volume inside PV_DIR is
// never deleted, even by its owner and with reclaim Delete: the owner
// refuses with an event and the data stays. (A PV's source cannot be
// edited after creation, so the test creates PVs that point outside, as
// an edited or hand-made PV would.)
func TestLegacyRefusesToDeleteOutsidePVDir(t *testing.T) {
	env := needEnv(t)
	ns := namespace(t, env)
	ctx := context.Background()
	real := startLegacy(t, env, env.C.RealNode(), legacyOptions{})
	storageClass(t, env, legacyClass(ns))
	outside := filepath.Join(real.node.Dir(), "not-a-volume-"+ns)
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	sentinel := filepath.Join(outside, "sentinel")
	if err := os.WriteFile(sentinel, []byte("do not delete"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(real.pvDir, "pvc-escape-"+ns)
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, path, why string }{
		{"outside", outside, "it is not a directory directly inside PV_DIR " + real.pvDir},
		{"symlink", link, `volume id: "pvc-escape-` + ns + `" is a symbolic link that resolves outside the pool (to "` + outside + `"); volumes are always real directories`},
	}
	for _, c := range cases {
		pvName := ns + "-" + c.name
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: pvName, Annotations: map[string]string{
				contract.AnnProvisionedBy:   contract.LegacyProvisionerName,
				contract.AnnIdentity:        contract.LegacyProvisionerName,
				contract.AnnProvisionOnNode: real.node.Name,
			}},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
				StorageClassName:              ns,
				ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: c.name},
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: c.path, Type: ptr.To(corev1.HostPathDirectory),
				}},
			},
		}
		if _, err := env.C.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = env.C.Client.CoreV1().PersistentVolumes().Delete(context.Background(), pvName, metav1.DeleteOptions{})
		})
		claim := kit.PVC(ns, c.name, ns, "16Mi")
		claim.Spec.VolumeName = pvName
		createPVC(t, env, claim)
		boundPV(t, env, ns, c.name)
		deletePVC(t, env, ns, c.name)
		ev := waitEvent(t, env, metav1.NamespaceDefault, "PersistentVolume", pvName, "VolumeFailedDelete")
		want := `refusing to delete hostPath "` + c.path + `": ` + c.why + "; nothing was removed (remove it by hand if it really is this volume's data)"
		if ev.Message != want {
			t.Errorf("%s: event %q\nwant %q", c.name, ev.Message, want)
		}
		if _, err := env.C.Client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{}); err != nil {
			t.Errorf("%s: the PV must stay for the admin: %v", c.name, err)
		}
	}
	if got := readFile(t, sentinel); got != "do not delete" {
		t.Errorf("sentinel = %q", got)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink in PV_DIR was touched: %v %v", fi, err)
	}
}

// Legacy scenario 7: what a hostPath directory cannot serve is refused on
// the claim with an event, and no directory is made.
func TestLegacyRefusals(t *testing.T) {
	env := needEnv(t)
	ns := namespace(t, env)
	real := startLegacy(t, env, env.C.RealNode(), legacyOptions{})
	storageClass(t, env, legacyClass(ns, kit.Immediate))

	huge := pinnedPVC(ns, "huge", ns, "1Ei", real.node.Name)
	block := pinnedPVC(ns, "block", ns, "16Mi", real.node.Name)
	block.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock)
	selector := pinnedPVC(ns, "selector", ns, "16Mi", real.node.Name)
	selector.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"disk": "ssd"}}
	for _, c := range []struct {
		claim *corev1.PersistentVolumeClaim
		want  string
	}{
		{huge, "requested 1Ei (1152921504606846976 bytes) is more than the "},
		{block, contract.LegacyProvisionerName + " does not support block volume provisioning"},
		{selector, "spec.selector is not supported: a new hostPath volume has no labels to match it"},
	} {
		createPVC(t, env, c.claim)
		ev := waitEvent(t, env, ns, "PersistentVolumeClaim", c.claim.Name, "ProvisioningFailed")
		if !strings.Contains(ev.Message, c.want) {
			t.Errorf("claim %s: event %q does not say %q", c.claim.Name, ev.Message, c.want)
		}
	}
	if got := real.volumes(t); got != nil {
		t.Errorf("PV_DIR = %q after refusals", got)
	}
}

// waitPVPhase waits for a PV to reach phase.
func waitPVPhase(t *testing.T, env *kit.Env, name string, phase corev1.PersistentVolumePhase) {
	t.Helper()
	err := kit.Poll(context.Background(), 2*time.Minute, "pv "+name+" "+string(phase), func(ctx context.Context) (bool, string, error) {
		pv, err := env.C.Client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, "", err
		}
		if err != nil {
			return false, "", kit.Retry(err)
		}
		return pv.Status.Phase == phase, string(pv.Status.Phase), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
