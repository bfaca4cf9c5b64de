package onnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
	"github.com/hostpath-provisioner/hpp/test/cluster"
	"github.com/hostpath-provisioner/hpp/test/csitest"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// The takeover tier (issue 21): upstream's real operator, driver, mounter
// and sidecars (shared/upstream) installed as its deploy/ says, then
// `hpp-migrate takeover --plan`, the switch, the way back and the
// uninstall, each exactly as deploy/README.md writes them (the test reads
// the commands from there). `make takeover-on-node` runs it (root).
// Upstream's CR has four pools: a directory pool, two Filesystem
// pvcTemplate pools (one with a 50-character name upstream shortens) and a
// Block pvcTemplate pool on an empty device, which upstream's mounter
// formats and mounts itself and hpp-mounter must then adopt.

// longPool is a pool whose claim and mounter names upstream shortens with
// its hash on node hpp-node (hpp-pool-653b815e).
const longPool = "a-pool-name-of-exactly-fifty-characters-0123456789"

// appNamespace holds the user's claims and pods.
const appNamespace = "takeover-apps"

// blockPool is the pvcTemplate pool with volumeMode Block, upstream's most
// documented pool (a ceph-rbd or other block StorageClass per node).
const blockPool = "blk"

// tkPool is one pool of upstream's CR.
type tkPool struct {
	name, path string
	// disk names a pvcTemplate pool's loop device ("" for a directory
	// pool) and its mount in the node (<cluster>/disks/<disk>); dev is the
	// device; vol the local PV's directory on its filesystem, or for a
	// Block pool where the test mounts the device to read it after the
	// uninstall.
	disk, dev, vol string
	// block: the pool claim is volumeMode Block, the local PV the empty
	// device itself; upstream's mounter formats it.
	block bool
	class string
}

func (p *tkPool) template() bool { return p.disk != "" }

// templatePools counts the pvcTemplate pools (one pool claim and one
// mounter Deployment each on the one node).
func (r *takeoverRun) templatePools() int {
	n := 0
	for _, p := range r.pools {
		if p.template() {
			n++
		}
	}
	return n
}

// claimAtRest is a claim written once, before the switch, by a pod that
// then exits.
type claimAtRest struct {
	pool *tkPool
	name string
	data string
	uid  types.UID
	pv   string
}

// takeoverRun is the state the phases share.
type takeoverRun struct {
	*env
	upstream string
	bin      string // hpp-migrate and kubectl, for the README's commands
	pools    []*tkPool
	atRest   []*claimAtRest
	// poolClaims are upstream's pool claims (name -> uid); dsUID the CSI
	// DaemonSet's uid; mounters upstream's mounter Deployments (name -> uid).
	poolClaims map[string]types.UID
	mounters   map[string]types.UID
	dsUID      types.UID
	tl         *timeline
	watch      *watchers
}

func TestTakeoverOnTheRealNode(t *testing.T) {
	r := startTakeoverRun(t)
	ctx := t.Context()
	defer r.tl.print()

	r.installUpstream(ctx, t)
	r.watch = r.startWatchers(ctx, t)
	r.writeAtRest(ctx, t)
	r.startWriter(ctx, t)
	r.record(ctx, t)
	r.tl.mark("upstream running: writer started, claims at rest written")
	r.checkPlanWritesNothing(ctx, t)

	// The switch interrupted after hpp's install is applied, as a closed
	// terminal would, and finished by the README's section run again;
	// then run once more on the switched cluster.
	r.runSectionKilled(ctx, t, "Switch", "6/7 waiting for hpp's operator")
	r.runSection(ctx, t, "Switch")
	r.checkUnderHPP(ctx, t, "switch")
	r.checkSwitchChangesNothing(ctx, t)

	// The way back interrupted once upstream's node workloads are back.
	r.runSectionKilled(ctx, t, "Way back", "4/7 restoring upstream's install objects")
	r.runSection(ctx, t, "Way back")
	r.checkUnderUpstream(ctx, t, "way back")

	// hpp again (the round trip ends where it started: the switch is
	// repeatable), then its uninstall.
	r.runSection(ctx, t, "Switch")
	r.checkUnderHPP(ctx, t, "switch again")
	r.stopWriter(ctx, t)
	r.runSection(ctx, t, "Uninstall")
	r.checkKept(ctx, t)
	r.tl.mark("uninstalled: every pool claim, PV and data directory kept")
}

// startTakeoverRun skips the test unless the takeover tier can run here
// (under CI=true in that tier, a missing root or upstream fails it), then
// starts the local cluster with upstream's images and, as images, the
// binaries of upstream's bin/ in extra, and builds the commands the
// README's sections run.
func startTakeoverRun(t *testing.T, extra ...upstreamBin) *takeoverRun {
	t.Helper()
	skip := func(reason string) {
		if os.Getenv("CI") == "true" && os.Getenv("HPP_TEST_TIER") == "takeover" {
			t.Fatalf("CI=true: %s", reason)
		}
		t.Skip(reason)
	}
	if tier := os.Getenv("HPP_TEST_TIER"); tier != "takeover" {
		t.Skipf("runs with `make takeover-on-node` (HPP_TEST_TIER=takeover), this is tier %q", tier)
	}
	if os.Geteuid() != 0 {
		skip("the local cluster needs root (kubelet, containerd, mounts)")
	}
	upstream, why := findUpstream(repoRoot(t))
	if upstream == "" {
		skip(why)
	}
	t.Logf("upstream system: %s", upstream)
	ctx := t.Context()
	bins := cluster.BinariesFromCache(cacheDir(t))
	if bins.CSIProvisioner == "" {
		t.Fatal("csi-provisioner binary not in the cache: run make cluster-binaries")
	}
	images := upstreamImages(ctx, t, upstream, bins)
	for _, b := range extra {
		img, err := cluster.ComponentImage(b.ref, filepath.Join(upstream, "bin", b.name), b.path)
		if err != nil {
			t.Fatal(err)
		}
		images = append(images, img)
	}
	r := &takeoverRun{upstream: upstream, tl: newTimeline(t)}
	r.env = startOnNodeCluster(t, images...)
	r.bin = r.commandDir(ctx, t)
	r.tl.mark("cluster up")
	return r
}

// upstreamBin is a binary of upstream's bin/ and the image that runs it
// at path.
type upstreamBin struct{ ref, name, path string }

func cacheDir(t *testing.T) string {
	c, err := cluster.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// installUpstreamOperator installs upstream's operator as its deploy/
// says (kubectl create of namespace.yaml, webhook.yaml with cert-manager's
// part played by the test, operator.yaml in the namespace) and waits for
// it.
func (r *takeoverRun) installUpstreamOperator(ctx context.Context, t *testing.T) {
	t.Helper()
	ns, err := os.ReadFile(filepath.Join(r.upstream, "deploy", "namespace.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r.create(ctx, t, "upstream namespace.yaml", string(ns))
	r.create(ctx, t, "upstream webhook.yaml (cert-manager's Secret and CA made by the test)", upstreamWebhookYAML(t, r.upstream))
	r.create(ctx, t, "upstream operator.yaml", upstreamOperatorYAML(t, r.upstream), "-n", namespace)
	r.waitDeploymentAvailable(ctx, t, operatorName)
	r.tl.mark("upstream operator Available")
}

// installUpstream installs upstream's system as its deploy/ says (kubectl
// create of namespace.yaml, webhook.yaml with cert-manager's part played by
// the test, operator.yaml in the namespace), its CR with a directory pool,
// two Filesystem pvcTemplate pools on loop-device local PVs and a Block
// pvcTemplate pool on an empty loop device, and a StorageClass per pool;
// then waits for the CR's Available.
func (r *takeoverRun) installUpstream(ctx context.Context, t *testing.T) {
	t.Helper()
	r.installUpstreamOperator(ctx, t)
	r.pools = []*tkPool{
		{name: "local", path: filepath.Join(r.env.pools, "local")},
		{name: "fast", path: filepath.Join(r.env.pools, "fast"), disk: "fast"},
		{name: longPool, path: filepath.Join(r.env.pools, "long"), disk: "long"},
		{name: blockPool, path: filepath.Join(r.env.pools, blockPool), disk: blockPool, block: true},
	}
	var spec strings.Builder
	for _, p := range r.pools {
		fmt.Fprintf(&spec, "  - name: %s\n    path: %s\n", p.name, p.path)
		// Each pool's claim has a class of its own disk, so it binds that
		// disk and no other (volumeDir and checkKept look on it).
		disks := "takeover-disks-" + p.disk
		if p.template() {
			r.create(ctx, t, "StorageClass "+disks, fmt.Sprintf(`apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: %s
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
`, disks))
		}
		if p.block {
			// A Block local PV's path is the device node. Left empty, as
			// a new disk is: upstream's mounter finds no filesystem
			// (blkid) and makes one (mkfs.xfs).
			p.dev, _ = testutil.LoopDevice(t, testutil.MinXFSBytes)
			p.vol = filepath.Join(r.c.Dir, "disks", p.disk)
			r.offerDisk(ctx, t, &spec, p, disks, p.dev, corev1.PersistentVolumeBlock)
		} else if p.template() {
			// The PV is the whole filesystem, as local-static-provisioner
			// makes them (one disk mounted per PV): upstream's mounter
			// binds only a kubelet pod mount of the filesystem's root
			// (mountinfo Root "/") and never a subdirectory's.
			var sub string
			p.dev, sub = r.nodeFilesystem(ctx, t, p.disk)
			p.vol = filepath.Dir(sub)
			if err := os.Remove(r.inNode(sub)); err != nil {
				t.Fatal(err)
			}
			r.offerDisk(ctx, t, &spec, p, disks, p.vol, corev1.PersistentVolumeFilesystem)
		}
		p.class = "takeover-" + p.disk
		if p.disk == "" {
			p.class = "takeover-local"
		}
		// As upstream's storageclass-wffc-csi.yaml, per pool.
		r.create(ctx, t, "StorageClass "+p.class, fmt.Sprintf(`apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: %s
provisioner: `+contract.DriverName+`
reclaimPolicy: Delete
volumeBindingMode: WaitForFirstConsumer
parameters:
  `+contract.ParamStoragePool+`: %s
`, p.class, p.name))
	}
	if !r.nodeRootShared(t) {
		r.shareNodeRoot(ctx, t)
	}
	// As upstream's hostpathprovisioner_pvctemplate_cr.yaml, with the
	// four pools and a pull policy that needs no registry.
	cr := fmt.Sprintf(`apiVersion: hostpathprovisioner.kubevirt.io/v1beta1
kind: HostPathProvisioner
metadata:
  name: %s
spec:
  imagePullPolicy: IfNotPresent
  storagePools:
%s  workload:
    nodeSelector:
      kubernetes.io/os: linux
`, crName, spec.String())
	r.create(ctx, t, "upstream's HostPathProvisioner", cr)
	r.waitCRAvailable(ctx, t, "upstream")
	r.waitDaemonSetReady(ctx, t, csiDaemonSet)
	r.waitRegistered(ctx, t)
	r.tl.mark("upstream's CR Available, its CSI driver registered")
	r.restartUpstreamPlugin(ctx, t)
	r.checkUpstreamBlockMount(t)
}

// checkUpstreamBlockMount: upstream's mounter made XFS on the empty Block
// pool device (blkid printed nothing, so mkfs.xfs) and mounted the device
// itself at <path>/csi: one mount of its major:minor, root "/". This is
// the mount hpp-mounter must adopt as its own.
func (r *takeoverRun) checkUpstreamBlockMount(t *testing.T) {
	t.Helper()
	for _, p := range r.pools {
		if !p.block {
			continue
		}
		target := filepath.Join(p.path, "csi")
		m, err := csitest.MountsAtIn(r.c.NodeInitPID(), target)
		if err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Stat(p.dev, &st); err != nil {
			t.Fatal(err)
		}
		major, minor := int(unix.Major(st.Rdev)), int(unix.Minor(st.Rdev))
		if len(m) != 1 || m[0].FSType != "xfs" || m[0].Root != "/" || m[0].Major != major || m[0].Minor != minor {
			t.Fatalf("upstream's mounter: node mounts at %s = %+v; want one XFS mount of %s (%d:%d), root /", target, m, p.dev, major, minor)
		}
		t.Logf("upstream's mounter formatted the empty %s with XFS and mounted it at %s (%d:%d, source %s)", p.dev, target, major, minor, m[0].Source)
	}
}

// offerDisk creates the local PV (Retain, as kit.LocalPV makes them) of a
// pvcTemplate pool's disk at path, in the disk's own class, and writes the
// pool's pvcTemplate into the CR's spec.
func (r *takeoverRun) offerDisk(ctx context.Context, t *testing.T, spec *strings.Builder, p *tkPool, class, path string, mode corev1.PersistentVolumeMode) {
	t.Helper()
	pv := kit.LocalPV("takeover-disk-"+p.disk, class, path, r.c.RealNode().Name, "300Mi", mode)
	if _, err := r.c.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(spec, "    pvcTemplate:\n")
	if mode == corev1.PersistentVolumeBlock {
		fmt.Fprintf(spec, "      volumeMode: Block\n")
	}
	fmt.Fprintf(spec, `      accessModes: [ReadWriteOnce]
      storageClassName: %s
      resources:
        requests:
          storage: 300Mi
`, class)
}

// waitUpstreamMounts waits until upstream's mounters have mounted every
// pvcTemplate pool: upstream's CR turns Available before that (it waits
// for their Deployments, not for the mount). A timeout prints the node's
// loop-device mounts, the install's state and its logs.
func (r *takeoverRun) waitUpstreamMounts(ctx context.Context, t *testing.T) {
	t.Helper()
	for _, p := range r.pools {
		if !p.template() {
			continue
		}
		err := kit.Poll(ctx, 3*time.Minute, "upstream's mounter mounts "+p.path, func(context.Context) (bool, string, error) {
			m, err := r.mountsUnder(p.path)
			return len(m) > 0, "nothing mounted under it yet", err
		})
		if err != nil {
			mi, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(r.c.NodeInitPID()), "mountinfo"))
			var disk []string
			for _, l := range strings.Split(string(mi), "\n") {
				if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[2], "7:") {
					disk = append(disk, l)
				}
			}
			t.Fatalf("%v\nnode mounts of loop devices:\n%s\ninstall: %s\nlogs:\n%s", err, strings.Join(disk, "\n"), r.podStates(ctx), r.podLogs(ctx))
		}
	}
}

// restartUpstreamPlugin waits for upstream's mounters to mount the
// pvcTemplate pools, then restarts upstream's CSI plugin pod once.
// Upstream's DaemonSet mounts the pools' directories without mount
// propagation, so a plugin that started before its pool was mounted
// writes new volumes into the bare directory on the node's disk (seen
// here: a run's writer volume never reached the pool disk). A node that
// has run for a while, the state a takeover starts from, has its plugin
// started after its pools.
func (r *takeoverRun) restartUpstreamPlugin(ctx context.Context, t *testing.T) {
	t.Helper()
	r.waitUpstreamMounts(ctx, t)
	c := r.c.Client.CoreV1().Pods(namespace)
	pods, err := c.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var old []types.UID
	for i := range pods.Items {
		if p := &pods.Items[i]; ofCSIDaemonSet(p) {
			old = append(old, p.UID)
			if err := c.Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	err = kit.Poll(ctx, 3*time.Minute, "upstream's CSI plugin pod restarted and Ready", func(ctx context.Context) (bool, string, error) {
		pods, err := c.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", kit.Retry(err)
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if ofCSIDaemonSet(p) && !slices.Contains(old, p.UID) && p.DeletionTimestamp == nil && podReady(p) {
				return true, "", nil
			}
		}
		return false, r.podStates(ctx), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r.waitRegistered(ctx, t)
	r.tl.mark("upstream's pools mounted, its CSI plugin restarted after them")
}

// create runs kubectl create -f - (upstream installs with create),
// retrying while the webhook the install starts is not serving yet.
func (r *takeoverRun) create(ctx context.Context, t *testing.T, what, manifests string, args ...string) {
	t.Helper()
	err := kit.Poll(ctx, 2*time.Minute, "create "+what, func(ctx context.Context) (bool, string, error) {
		out, err := r.kubectl(ctx, manifests, append([]string{"create", "-f", "-"}, args...)...)
		if err != nil && !strings.Contains(out, "AlreadyExists") && !strings.Contains(out, "already exists") {
			return false, "", kit.Retry(err)
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("created %s", what)
}

// waitCRAvailable waits for the CR's Available condition.
func (r *takeoverRun) waitCRAvailable(ctx context.Context, t *testing.T, who string) {
	t.Helper()
	if _, err := r.kubectl(ctx, "", "wait", "--for=condition=Available", "--timeout=4m", "hostpathprovisioner/"+crName); err != nil {
		status, _ := r.kubectl(ctx, "", "get", "hostpathprovisioner/"+crName, "-o", "jsonpath={.status}")
		t.Fatalf("%s: %v\nstatus: %s\ninstall: %s\nlogs:\n%s", who, err, status, r.podStates(ctx), r.podLogs(ctx))
	}
	r.tl.mark(who + ": CR Available")
}

// writeAtRest writes one claim per pool through a pod that exits; the
// claims stay, at rest, through everything that follows.
func (r *takeoverRun) writeAtRest(ctx context.Context, t *testing.T) {
	t.Helper()
	for _, p := range r.pools {
		c, pv := r.writeClaimAtRest(ctx, t, p, "written by the upstream driver into pool "+p.name)
		// What upstream's provisioner writes (issue 21: --default-fstype=xfs).
		t.Logf("claim at rest %s in pool %s: PV %s, fsType %q, handle %s", c.name, p.name, c.pv, pv.Spec.CSI.FSType, pv.Spec.CSI.VolumeHandle)
	}
}

// writeClaimAtRest writes data into a new claim of the pool's class
// through a pod that exits (making the apps namespace first, the first
// time), and returns the claim and its PV.
func (r *takeoverRun) writeClaimAtRest(ctx context.Context, t *testing.T, p *tkPool, data string) (*claimAtRest, *corev1.PersistentVolume) {
	t.Helper()
	if len(r.atRest) == 0 {
		if err := r.c.CreateNamespace(ctx, appNamespace); err != nil {
			t.Fatal(err)
		}
	}
	c := &claimAtRest{pool: p, name: "at-rest-" + p.class, data: data}
	r.atRest = append(r.atRest, c)
	pod := kit.Pod(appNamespace, "write-"+c.name, "echo '"+c.data+"' > /data/file && sync", kit.PodVolume{Name: "data", Claim: c.name, Path: "/data"})
	r.runClaimPod(ctx, t, kit.PVC(appNamespace, c.name, p.class, "10Mi"), pod)
	pvc, err := r.c.Client.CoreV1().PersistentVolumeClaims(appNamespace).Get(ctx, c.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.uid, c.pv = pvc.UID, pvc.Spec.VolumeName
	pv, err := r.c.Client.CoreV1().PersistentVolumes().Get(ctx, c.pv, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c, pv
}

// runClaimPod creates claim (if not nil) and pod, waits for the pod to
// succeed and deletes it; it returns the pod's log.
func (r *takeoverRun) runClaimPod(ctx context.Context, t *testing.T, claim *corev1.PersistentVolumeClaim, pod *corev1.Pod) string {
	t.Helper()
	c := r.c.Client
	if claim != nil {
		if _, err := c.CoreV1().PersistentVolumeClaims(claim.Namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kit.WaitPodPhase(ctx, c, pod.Namespace, pod.Name, corev1.PodSucceeded, 3*time.Minute); err != nil {
		log, _ := kit.PodLogs(ctx, c, pod.Namespace, pod.Name)
		t.Fatalf("%v\npod's log: %s\nevents: %s\ninstall: %s\nlogs:\n%s", err, log, kit.Events(ctx, c, pod.Namespace, "Pod", pod.Name), r.podStates(ctx), r.podLogs(ctx))
	}
	log, err := kit.PodLogs(ctx, c, pod.Namespace, pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	return log
}

// record notes what must keep its identity: the CSI DaemonSet, upstream's
// pool claims and mounter Deployments.
func (r *takeoverRun) record(ctx context.Context, t *testing.T) {
	t.Helper()
	ds, err := r.c.Client.AppsV1().DaemonSets(namespace).Get(ctx, csiDaemonSet, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.dsUID = ds.UID
	r.poolClaims, r.mounters = map[string]types.UID{}, map[string]types.UID{}
	claims, err := r.c.Client.CoreV1().PersistentVolumeClaims(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claims.Items {
		r.poolClaims[c.Name] = c.UID
	}
	deps, err := r.c.Client.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deps.Items {
		if d.Name != operatorName {
			r.mounters[d.Name] = d.UID
		}
	}
	if n := r.templatePools(); len(r.poolClaims) != n || len(r.mounters) != n {
		t.Fatalf("upstream made pool claims %v and mounters %v; want one each per pvcTemplate pool", r.poolClaims, r.mounters)
	}
	t.Logf("upstream's objects: CSI DaemonSet uid %s, pool claims %v, mounters %v", r.dsUID, r.poolClaims, r.mounters)
}

// checkUnderHPP: after a switch, hpp runs everything upstream ran, on the
// objects upstream made.
func (r *takeoverRun) checkUnderHPP(ctx context.Context, t *testing.T, phase string) {
	t.Helper()
	r.waitCRAvailable(ctx, t, phase)
	r.waitNodePods(ctx, t, phase, csiImage, mounterImage)
	r.checkPhase(ctx, t, phase)
	r.checkNoOrphans(ctx, t, phase)
}

// checkUnderUpstream: after the way back, upstream's operator runs
// everything again, on the same objects.
func (r *takeoverRun) checkUnderUpstream(ctx context.Context, t *testing.T, phase string) {
	t.Helper()
	r.waitDeploymentAvailable(ctx, t, operatorName)
	r.waitCRAvailable(ctx, t, phase)
	r.waitNodePods(ctx, t, phase, upDriverImage, upOperatorImage)
	r.checkPhase(ctx, t, phase)
}

// checkPhase: the claims at rest mount in new pods and show their data, a
// new claim provisions in every pool, identities were kept, and the
// watchers saw no write error, no gap over 2 s, at most one absence of
// the driver from CSINode and no pool mount missing.
func (r *takeoverRun) checkPhase(ctx context.Context, t *testing.T, phase string) {
	t.Helper()
	r.checkIdentities(ctx, t, phase)
	slug := strings.ReplaceAll(phase, " ", "-")
	for _, c := range r.atRest {
		pod := kit.Pod(appNamespace, "read-"+slug+"-"+c.pool.class, "cat /data/file", kit.PodVolume{Name: "data", Claim: c.name, Path: "/data"})
		if got := strings.TrimSpace(r.runClaimPod(ctx, t, nil, pod)); got != c.data {
			t.Fatalf("%s: claim %s read %q in a new pod, want %q", phase, c.name, got, c.data)
		}
	}
	r.tl.mark(fmt.Sprintf("%s: %d claims at rest mounted in new pods, data intact", phase, len(r.atRest)))
	for _, p := range r.pools {
		name := "new-" + slug + "-" + p.class
		pod := kit.Pod(appNamespace, name, "echo new > /data/file && cat /data/file", kit.PodVolume{Name: "data", Claim: name, Path: "/data"})
		if got := strings.TrimSpace(r.runClaimPod(ctx, t, kit.PVC(appNamespace, name, p.class, "10Mi"), pod)); got != "new" {
			t.Fatalf("%s: new claim in pool %s: pod read %q", phase, p.name, got)
		}
		if err := r.c.Client.CoreV1().PersistentVolumeClaims(appNamespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	r.tl.mark(fmt.Sprintf("%s: a new claim provisioned and written in each of the %d pools", phase, len(r.pools)))
	r.watch.check(t, phase)
}

// checkIdentities: the CSI DaemonSet, the pool claims and mounter
// Deployments upstream made are the same objects (uids).
func (r *takeoverRun) checkIdentities(ctx context.Context, t *testing.T, phase string) {
	t.Helper()
	ds, err := r.c.Client.AppsV1().DaemonSets(namespace).Get(ctx, csiDaemonSet, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ds.UID != r.dsUID {
		t.Errorf("%s: CSI DaemonSet uid %s, want upstream's %s (replaced, not rolled)", phase, ds.UID, r.dsUID)
	}
	for name, uid := range r.poolClaims {
		c, err := r.c.Client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil || c.UID != uid {
			t.Errorf("%s: pool claim %s: %v (uid %v, want %s)", phase, name, err, uidOf(c), uid)
		}
	}
	for name, uid := range r.mounters {
		d, err := r.c.Client.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil || d.UID != uid {
			t.Errorf("%s: mounter Deployment %s: %v (uid %v, want %s)", phase, name, err, uidOf(d), uid)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%s: CSI DaemonSet, %d pool claims and %d mounters kept their uids", phase, len(r.poolClaims), len(r.mounters))
}

func uidOf(o metav1.Object) types.UID {
	if o == nil || o.GetName() == "" {
		return ""
	}
	return o.GetUID()
}

// waitNodePods waits until the CSI DaemonSet and the mounter Deployments
// run the given images on all their pods (rolled out).
func (r *takeoverRun) waitNodePods(ctx context.Context, t *testing.T, phase, driverImage, mounterImg string) {
	t.Helper()
	err := kit.Poll(ctx, 4*time.Minute, phase+": node pods on "+driverImage+" and "+mounterImg, func(ctx context.Context) (bool, string, error) {
		pods, err := r.c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", kit.Retry(err)
		}
		var driver, mounters int
		var state []string
		for i := range pods.Items {
			p := &pods.Items[i]
			images := podImages(p)
			state = append(state, p.Name+" "+strings.Join(images, ",")+" "+kit.PodSummary(p))
			if p.DeletionTimestamp != nil || !podReady(p) {
				continue
			}
			for _, img := range images {
				switch {
				case img == driverImage && ofCSIDaemonSet(p):
					driver++
				case img == mounterImg && strings.HasPrefix(p.Name, "hpp-pool-"):
					mounters++
				}
			}
		}
		if driver != 1 || mounters != r.templatePools() {
			return false, strings.Join(state, "; "), nil
		}
		for _, p := range pods.Items {
			stale := true
			for _, img := range podImages(&p) {
				stale = stale && img != driverImage && img != mounterImg
			}
			if stale && (ofCSIDaemonSet(&p) || strings.HasPrefix(p.Name, "hpp-pool-")) {
				return false, strings.Join(state, "; "), nil
			}
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r.tl.mark(phase + ": CSI DaemonSet and mounters rolled to " + driverImage + ", " + mounterImg)
}

// ofCSIDaemonSet: the pod is the CSI DaemonSet's (hpp's csi-resizer
// Deployment's pods share the name prefix and the hpp-csi image).
func ofCSIDaemonSet(p *corev1.Pod) bool {
	owner := metav1.GetControllerOf(p)
	return owner != nil && owner.Kind == "DaemonSet" && owner.Name == csiDaemonSet
}

func podImages(p *corev1.Pod) []string {
	var out []string
	for _, c := range p.Spec.Containers {
		out = append(out, c.Image)
	}
	return out
}

// upstreamManagers are the field managers of upstream's install: its
// operator and `kubectl create`.
var upstreamManagers = []string{"hostpath-provisioner-operator", "kubectl-create"}

// checkNoOrphans: no object in the install namespace or of the install's
// cluster-wide kinds is still owned, field by field, by upstream's
// managers (objects hpp adopted carry hpp's). The CR is left out: its
// spec is the user's (kubectl create), whoever runs it.
func (r *takeoverRun) checkNoOrphans(ctx context.Context, t *testing.T, phase string) {
	t.Helper()
	kinds := "deployments,daemonsets,jobs,services,secrets,configmaps,serviceaccounts,roles,rolebindings,persistentvolumeclaims,networkpolicies"
	out, err := r.kubectl(ctx, "", "get", kinds, "-n", namespace, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := r.kubectl(ctx, "", "get", "clusterroles,clusterrolebindings,csidrivers,validatingwebhookconfigurations,customresourcedefinitions", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var orphans []string
	for _, doc := range []string{out, cluster} {
		for _, o := range listItems(t, doc) {
			if left := upstreamOnly(o); left != "" {
				orphans = append(orphans, left)
			}
		}
	}
	if len(orphans) > 0 {
		t.Fatalf("%s: %d objects still owned by upstream's install alone:\n%s", phase, len(orphans), strings.Join(orphans, "\n"))
	}
	r.tl.mark(phase + ": no object left to upstream's field managers")
}

// waitGone waits until the pod is gone.
func (r *takeoverRun) waitPodGone(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	if err := kit.WaitGone(ctx, "pod "+name, 2*time.Minute, func(ctx context.Context) error {
		_, err := r.c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// checkKept: after the uninstall every pool claim (same uid), every PV of
// the claims at rest and every data directory is still there.
func (r *takeoverRun) checkKept(ctx context.Context, t *testing.T) {
	t.Helper()
	for name, uid := range r.poolClaims {
		c, err := r.c.Client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil || c.UID != uid || c.DeletionTimestamp != nil {
			t.Errorf("after the uninstall: pool claim %s: %v (uid %v, want %s)", name, err, uidOf(c), uid)
		}
	}
	r.checkAtRestKept(ctx, t, func(c *claimAtRest, pv *corev1.PersistentVolume) string {
		if c.pool.block {
			r.mountBlockDisk(ctx, t, c.pool)
		}
		return filepath.Join(r.volumeDir(c.pool, pv.Spec.CSI.VolumeHandle), "file")
	})
	t.Logf("after the uninstall: %d pool claims, %d PVs and their data kept; namespace %s kept", len(r.poolClaims), len(r.atRest), namespace)
}

// checkAtRestKept: after the uninstall every PV of the claims at rest is
// there, the file in its data directory (dataFile) still holds what was
// written, and the namespace is kept; it stops the test otherwise.
func (r *takeoverRun) checkAtRestKept(ctx context.Context, t *testing.T, dataFile func(*claimAtRest, *corev1.PersistentVolume) string) {
	t.Helper()
	for _, c := range r.atRest {
		pv, err := r.c.Client.CoreV1().PersistentVolumes().Get(ctx, c.pv, metav1.GetOptions{})
		if err != nil || pv.DeletionTimestamp != nil {
			t.Errorf("after the uninstall: PV %s of claim %s: %v", c.pv, c.name, err)
			continue
		}
		file := dataFile(c, pv)
		b, err := os.ReadFile(file)
		if err != nil || strings.TrimSpace(string(b)) != c.data {
			t.Errorf("after the uninstall: %s: %q, %v; want %q", file, b, err, c.data)
		}
	}
	ns, err := r.c.Client.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if err != nil || ns.DeletionTimestamp != nil {
		t.Errorf("after the uninstall: namespace %s: %v, deleting %v", namespace, err, ns.DeletionTimestamp != nil)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// mountBlockDisk mounts a Block pool's device at its vol in the node (once
// the uninstall has unmounted the pool, nothing else shows its files).
func (r *takeoverRun) mountBlockDisk(ctx context.Context, t *testing.T, p *tkPool) {
	t.Helper()
	if err := os.MkdirAll(r.inNode(p.vol), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := r.inNodeRun(ctx, "mount", "-t", "xfs", p.dev, p.vol); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := r.inNodeRun(context.WithoutCancel(ctx), "umount", p.vol); err != nil {
			t.Errorf("%v: %s", err, out)
		}
	})
}

// volumeDir is a volume's directory as this machine sees it: under the
// pool directory for a directory pool, on the pool's disk (mounted in the
// node at disks/<name>; the pool path may be unmounted by then) for a
// template pool (a Block pool's device mounted there by mountBlockDisk). On the disk: <disk>/csi/<volume> when the mounter mounts
// the claim at the pool path, <disk>/<volume> when at <path>/csi.
func (r *takeoverRun) volumeDir(p *tkPool, handle string) string {
	if !p.template() {
		return r.inNode(filepath.Join(p.path, "csi", handle))
	}
	for _, d := range []string{filepath.Join(p.vol, "csi", handle), filepath.Join(p.vol, handle)} {
		if _, err := os.Stat(r.inNode(d)); err == nil {
			return r.inNode(d)
		}
	}
	return r.inNode(filepath.Join(p.vol, "csi", handle))
}
