package onnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// The takeover tier on the legacy form of upstream's CR (issue 21): older
// clusters run upstream's operator with `spec.pathConfig`, and upstream
// then runs its legacy provisioner (hostPath PVs of
// kubevirt.io/hostpath-provisioner) as the DaemonSet hostpath-provisioner
// beside its CSI driver, whose one pool "legacy" is <path>/csi. Claims at
// rest on both, then deploy/README.md's Switch, Way back, Switch and
// Uninstall as written.

// upLegacyImage is upstream's legacy provisioner as its operator.yaml
// names it (PROVISIONER_IMAGE); its image runs /hostpath-provisioner
// (shared/upstream/README.md).
const upLegacyImage = "quay.io/kubevirt/hostpath-provisioner:latest"

var upstreamLegacyBin = upstreamBin{ref: upLegacyImage, name: "hostpath-provisioner", path: "/hostpath-provisioner"}

// pathConfigRun adds to the takeover's state what a pathConfig install
// has besides: the legacy DaemonSet, and the selectors upstream gave both
// DaemonSets (hpp's takeover keeps them).
type pathConfigRun struct {
	*takeoverRun
	dir       string // spec.pathConfig.path
	legacyUID types.UID
	selectors map[string]string // DaemonSet -> its selector, as upstream made it
}

func TestTakeoverPathConfigOnTheRealNode(t *testing.T) {
	r := &pathConfigRun{takeoverRun: startTakeoverRun(t, upstreamLegacyBin)}
	ctx := t.Context()
	defer r.tl.print()

	r.installPathConfig(ctx, t)
	r.watch = r.startWatchers(ctx, t)
	r.writeAtRestBoth(ctx, t)
	r.recordPathConfig(ctx, t)
	r.tl.mark("upstream running: claims at rest written on the legacy and the CSI class")

	r.runSection(ctx, t, "Switch")
	r.checkPathConfig(ctx, t, "switch", csiImage, legacyImage)
	r.checkNoOrphans(ctx, t, "switch")

	r.runSection(ctx, t, "Way back")
	r.waitDeploymentAvailable(ctx, t, operatorName)
	r.checkPathConfig(ctx, t, "way back", upDriverImage, upLegacyImage)

	r.runSection(ctx, t, "Switch")
	r.checkPathConfig(ctx, t, "switch again", csiImage, legacyImage)
	r.checkNoOrphans(ctx, t, "switch again")
	r.runSection(ctx, t, "Uninstall")
	r.checkDataKept(ctx, t)
	r.tl.mark("uninstalled: every PV and data directory of the claims at rest kept")
}

// installPathConfig installs upstream's operator as its deploy/ says, its
// two legacy StorageClasses exactly as its deploy/ writes them
// (storageclass-wffc-legacy.yaml: the legacy provisioner;
// storageclass-wffc-legacy-csi.yaml: the CSI driver, no storagePool, so
// its pool "legacy"), and its hostpathprovisioner_legacy_cr.yaml with the
// path moved into the cluster's directory and a pull policy that needs no
// registry; then waits for the CR's Available and both DaemonSets.
func (r *pathConfigRun) installPathConfig(ctx context.Context, t *testing.T) {
	t.Helper()
	r.installUpstreamOperator(ctx, t)

	r.dir = filepath.Join(r.env.pools, "hpvolumes")
	for _, f := range []struct{ file, provisioner string }{
		{"storageclass-wffc-legacy.yaml", contract.LegacyProvisionerName},
		{"storageclass-wffc-legacy-csi.yaml", contract.DriverName},
	} {
		sc := upstreamClass(t, r.upstream, f.file)
		if sc.Provisioner != f.provisioner || sc.Parameters[contract.ParamStoragePool] != "" {
			t.Fatalf("upstream's deploy/%s: provisioner %q, "+contract.ParamStoragePool+" %q; the test expects %q and no pool", f.file, sc.Provisioner, sc.Parameters[contract.ParamStoragePool], f.provisioner)
		}
		b, err := os.ReadFile(filepath.Join(r.upstream, "deploy", f.file))
		if err != nil {
			t.Fatal(err)
		}
		r.create(ctx, t, "upstream "+f.file, string(b))
		// The legacy class's "pool" is the directory itself: its claims
		// are hostPath PVs in <path>/<pv>; the CSI class's is "legacy",
		// <path>/csi.
		p := &tkPool{name: contract.DefaultPool, path: r.dir, class: sc.Name}
		if f.provisioner == contract.LegacyProvisionerName {
			p.name = "pathConfig (legacy provisioner)"
		}
		r.pools = append(r.pools, p)
	}
	cr := upstreamLegacyCR(t, r.upstream, r.dir)
	r.create(ctx, t, "upstream's hostpathprovisioner_legacy_cr.yaml", cr)
	r.waitCRAvailable(ctx, t, "upstream")
	r.waitDaemonSetReady(ctx, t, legacyDS)
	r.waitDaemonSetReady(ctx, t, csiDaemonSet)
	r.waitRegistered(ctx, t)
	r.tl.mark("upstream's pathConfig CR Available, legacy provisioner and CSI driver running")
}

// upstreamClass decodes a StorageClass of upstream's deploy/.
func upstreamClass(t *testing.T, dir, file string) *storagev1.StorageClass {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "deploy", file))
	if err != nil {
		t.Fatal(err)
	}
	sc := &storagev1.StorageClass{}
	if err := yaml.Unmarshal(b, sc); err != nil {
		t.Fatalf("upstream's deploy/%s: %v", file, err)
	}
	return sc
}

// upstreamLegacyCR is upstream's deploy/hostpathprovisioner_legacy_cr.yaml
// with its two edits: the path into the cluster's directory (teardown
// removes it) and imagePullPolicy IfNotPresent (nothing here can pull).
func upstreamLegacyCR(t *testing.T, dir, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "deploy", "hostpathprovisioner_legacy_cr.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, edit := range [][2]string{
		{`path: "` + upstreamPath + `"`, `path: "` + path + `"`},
		{"imagePullPolicy: Always", "imagePullPolicy: IfNotPresent"},
	} {
		if !strings.Contains(s, edit[0]) {
			t.Fatalf("%s/deploy/hostpathprovisioner_legacy_cr.yaml: no %q; the test's edit no longer applies", dir, edit[0])
		}
		s = strings.Replace(s, edit[0], edit[1], 1)
	}
	if !strings.Contains(s, "pathConfig:") || strings.Contains(s, "storagePools:") {
		t.Fatalf("%s/deploy/hostpathprovisioner_legacy_cr.yaml is no pathConfig CR:\n%s", dir, s)
	}
	return s
}

// writeAtRestBoth writes one claim per class through a pod that exits,
// and checks the PV each provisioner made against upstream's layout:
// the legacy provisioner a hostPath PV in <path>/<pv name> annotated
// provisioned-by kubevirt.io/hostpath-provisioner, the CSI driver a
// volume in the pool "legacy", <path>/csi/<handle>.
func (r *pathConfigRun) writeAtRestBoth(ctx context.Context, t *testing.T) {
	t.Helper()
	for _, p := range r.pools {
		c, pv := r.writeClaimAtRest(ctx, t, p, "written by upstream into "+p.class)
		file := r.dataFile(t, pv)
		b, err := os.ReadFile(file)
		if err != nil || strings.TrimSpace(string(b)) != c.data {
			t.Fatalf("claim %s (PV %s): %s reads %q, %v; want %q", c.name, c.pv, file, b, err, c.data)
		}
		t.Logf("claim at rest %s: PV %s provisioned by %q, data in %s", c.name, c.pv, pv.Annotations[contract.AnnProvisionedBy], file)
	}
}

// dataFile is where a claim at rest's file is, as this machine sees it:
// <path>/<pv name>/file for the legacy provisioner's hostPath PV,
// <path>/csi/<handle>/file for a CSI PV in the pool "legacy". A PV of
// neither kind, or not in upstream's layout, fails the test.
func (r *pathConfigRun) dataFile(t *testing.T, pv *corev1.PersistentVolume) string {
	t.Helper()
	switch {
	case pv.Spec.HostPath != nil:
		if pv.Spec.HostPath.Path != filepath.Join(r.dir, pv.Name) || pv.Annotations[contract.AnnProvisionedBy] != contract.LegacyProvisionerName {
			t.Fatalf("legacy PV %s: hostPath %s, provisioned-by %q; want upstream's %s/<pv name> and %q",
				pv.Name, pv.Spec.HostPath.Path, pv.Annotations[contract.AnnProvisionedBy], r.dir, contract.LegacyProvisionerName)
		}
		return filepath.Join(r.inNode(pv.Spec.HostPath.Path), "file")
	case pv.Spec.CSI != nil && pv.Spec.CSI.Driver == contract.DriverName:
		return filepath.Join(r.inNode(filepath.Join(r.dir, "csi", pv.Spec.CSI.VolumeHandle)), "file")
	}
	t.Fatalf("PV %s is neither a hostPath PV nor one of %s", pv.Name, contract.DriverName)
	return ""
}

// recordPathConfig notes what must keep its identity: both DaemonSets
// (uid and selector as upstream made them). A pathConfig CR has no pool
// claims or mounters.
func (r *pathConfigRun) recordPathConfig(ctx context.Context, t *testing.T) {
	t.Helper()
	r.poolClaims, r.mounters = map[string]types.UID{}, map[string]types.UID{}
	r.selectors = map[string]string{}
	for _, name := range []string{csiDaemonSet, legacyDS} {
		ds, err := r.c.Client.AppsV1().DaemonSets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r.selectors[name] = metav1.FormatLabelSelector(ds.Spec.Selector)
		if name == csiDaemonSet {
			r.dsUID = ds.UID
		} else {
			r.legacyUID = ds.UID
		}
	}
	claims, err := r.c.Client.CoreV1().PersistentVolumeClaims(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(claims.Items) != 0 {
		t.Fatalf("upstream made %d pool claims for a pathConfig CR; want none", len(claims.Items))
	}
	t.Logf("upstream's DaemonSets: %s uid %s, %s uid %s; selectors %v", csiDaemonSet, r.dsUID, legacyDS, r.legacyUID, r.selectors)
}

// checkPathConfig: after a switch or the way back, the CR is Available,
// both DaemonSets run the given images on all their pods and are
// upstream's objects (uid, selector), the claims at rest mount in new pods
// with their data and a new claim provisions on both classes
// (checkPhase); the DaemonSets are checked again after that, as an
// operator that recreates them does so some seconds after a reconcile.
func (r *pathConfigRun) checkPathConfig(ctx context.Context, t *testing.T, phase, driverImage, legacyImg string) {
	t.Helper()
	r.waitCRAvailable(ctx, t, phase)
	r.waitDaemonSetImages(ctx, t, phase, map[string]string{csiDaemonSet: driverImage, legacyDS: legacyImg})
	r.checkDaemonSetsKept(ctx, t, phase)
	r.checkPhase(ctx, t, phase)
	r.checkDaemonSetsKept(ctx, t, phase+", after the claims")
}

// checkDaemonSetsKept: both DaemonSets are the objects upstream made
// (uid) with the selectors it gave them.
func (r *pathConfigRun) checkDaemonSetsKept(ctx context.Context, t *testing.T, phase string) {
	t.Helper()
	for name, uid := range map[string]types.UID{csiDaemonSet: r.dsUID, legacyDS: r.legacyUID} {
		ds, err := r.c.Client.AppsV1().DaemonSets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sel := metav1.FormatLabelSelector(ds.Spec.Selector); ds.UID != uid || sel != r.selectors[name] {
			t.Fatalf("%s: DaemonSet %s: uid %s, selector %s; want upstream's %s, %s (replaced, not rolled)", phase, name, ds.UID, sel, uid, r.selectors[name])
		}
	}
	t.Logf("%s: DaemonSets %s and %s kept upstream's uids and selectors", phase, csiDaemonSet, legacyDS)
}

// waitDaemonSetImages waits until each DaemonSet (name -> image) has one
// Ready pod, on that image, and no pod of another image left.
func (r *pathConfigRun) waitDaemonSetImages(ctx context.Context, t *testing.T, phase string, want map[string]string) {
	t.Helper()
	err := kit.Poll(ctx, 4*time.Minute, fmt.Sprintf("%s: DaemonSets on %v", phase, want), func(ctx context.Context) (bool, string, error) {
		pods, err := r.c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", kit.Retry(err)
		}
		ready := map[string]int{}
		var state []string
		done := true
		for i := range pods.Items {
			p := &pods.Items[i]
			owner := metav1.GetControllerOf(p)
			if owner == nil || owner.Kind != "DaemonSet" || want[owner.Name] == "" {
				continue
			}
			images := podImages(p)
			state = append(state, p.Name+" "+strings.Join(images, ",")+" "+kit.PodSummary(p))
			switch {
			case !slices.Contains(images, want[owner.Name]):
				done = false
			case p.DeletionTimestamp == nil && podReady(p):
				ready[owner.Name]++
			}
		}
		for name := range want {
			done = done && ready[name] == 1
		}
		return done, strings.Join(state, "; "), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r.tl.mark(fmt.Sprintf("%s: DaemonSets rolled to %v", phase, want))
}

// checkDataKept: after the uninstall every PV of the claims at rest and
// its data directory is still there, and so is the namespace.
func (r *pathConfigRun) checkDataKept(ctx context.Context, t *testing.T) {
	t.Helper()
	r.checkAtRestKept(ctx, t, func(_ *claimAtRest, pv *corev1.PersistentVolume) string { return r.dataFile(t, pv) })
	t.Logf("after the uninstall: %d PVs and their data kept; namespace %s kept", len(r.atRest), namespace)
}
