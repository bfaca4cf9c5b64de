package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/hostpath-provisioner/hpp/internal/clonecache"
	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
	"github.com/hostpath-provisioner/hpp/test/cluster"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// Failure tier of issue 28, on one simulated source node ("golden-f", its
// own hpp-csi at 127.0.0.3) and the real node:
//
//   - the receiving hpp-csi SIGKILLed while the stream arrives: nothing is
//     left in the pool's staging or the clone cache's, and the claim is
//     Bound with the source's bytes once hpp-csi is back (restarted as a
//     crash would be) and csi-provisioner retries;
//   - the sending hpp-csi SIGKILLed while it streams (a second source, in
//     the fast pool, which no cache holds): the same;
//   - the receiving hpp-csi SIGKILLed again later, once the whole stream has
//     arrived (its "copied" log line) and before the claim is Bound, and
//     the sending one once it has sent half of the source: the same;
//   - packets dropped on the peer port: every packet of the copy's
//     connection, both ways, once it has carried cutAfterBytes (iptables,
//     this machine's netfilter, matching only the source node's own
//     address and port), for cutHold: the stream stalls (nothing more
//     arrives, the claim's events name the node and the progress so far),
//     then, the rule removed, TCP's retransmissions carry it on and the
//     clone completes with the source's bytes, nothing left over;
//   - the source claim deleted while its copy streams: csi-provisioner's
//     cloning-protection finalizer keeps it Terminating, the clone is Bound
//     with its bytes, then the source goes and its volume directory is
//     removed on its node; likewise a VolumeSnapshot deleted while a
//     restore from it streams (csi-provisioner's
//     volumesnapshot-as-source-protection finalizer; the snapshot's
//     directory removed), when snapshots are installed;
//   - a clone whose copy outlasts the first CreateVolume (held by the cut
//     above), its source claim deleted meanwhile: csi-provisioner never
//     calls CreateVolume again, the copy ends in the pool with no PV; once
//     the clone claim is deleted too, hpp-csi's sweep of uncollected
//     copies removes the volume within uncollectedBound, and the source
//     claim, its PV and its directory go;
//   - the source's node down (its hpp-csi stopped) for a new clone: within
//     30 s an event on the claim names the node and why it cannot be
//     reached; once it is back, the clone completes.
//
// The sources hold failureSourceMiB (1 GiB apparent), enough for a stream
// to be caught in flight by polling the metrics (the kills came within the
// first MiB on this machine); each kill, cut and delete is checked to have
// come while the stream was in flight, not after it. Each scenario that
// streams has a source of its own: a source copied once is in the real
// node's clone cache and is not sent again.
func TestCrossNodeFailures(t *testing.T) {
	env := needEnv(t)
	ctx := context.Background()
	real := env.C.RealNode()
	golden, err := env.AddPeerNode(ctx, "golden-f", goldenFailIP, env.Snapshotter, kit.PoolFast)
	if golden != nil {
		t.Cleanup(func() {
			if err := env.C.RemoveSimulatedNode(context.Background(), "golden-f"); err != nil {
				t.Error(err)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	ns := namespace(t, env)
	local, fast := ns+"-local", ns+"-fast"
	storageClass(t, env, kit.StorageClass(local, kit.PoolLocal))
	storageClass(t, env, kit.StorageClass(fast, kit.PoolFast))
	src := goldenSources(t, env, golden, ns,
		goldenSpec{"golden-local", local, kit.PoolLocal}, goldenSpec{"golden-fast", fast, kit.PoolFast},
		goldenSpec{"golden-late", local, kit.PoolLocal}, goldenSpec{"golden-half", fast, kit.PoolFast},
		goldenSpec{"golden-cut", local, kit.PoolLocal}, goldenSpec{"golden-gone", local, kit.PoolLocal},
		goldenSpec{"golden-leak", local, kit.PoolLocal})
	srcLocal := src["golden-local"]

	t.Run("receiver killed during the copy", func(t *testing.T) {
		cloneKilledMidStream(t, env, ns, "killed-receiver", local, srcLocal, real, real, 0)
		assertNoCopyLeftovers(t, env.Pools[kit.PoolLocal])
	})
	t.Run("sender killed during the copy", func(t *testing.T) {
		cloneKilledMidStream(t, env, ns, "killed-sender", fast, src["golden-fast"], golden, real, 0)
		assertNoCopyLeftovers(t, env.Pools[kit.PoolFast])
	})
	t.Run("receiver killed after the stream arrived", func(t *testing.T) {
		cloneKilledAfterStream(t, env, ns, "killed-receiver-late", local, env.Pools[kit.PoolLocal], src["golden-late"], real)
		assertNoCopyLeftovers(t, env.Pools[kit.PoolLocal])
	})
	t.Run("sender killed halfway", func(t *testing.T) {
		cloneKilledMidStream(t, env, ns, "killed-sender-half", fast, src["golden-half"], golden, real, 0.5)
		assertNoCopyLeftovers(t, env.Pools[kit.PoolFast])
	})
	t.Run("packets dropped on the peer port", func(t *testing.T) {
		cloneThroughCut(t, env, ns, "cut", local, src["golden-cut"], golden, real)
		assertNoCopyLeftovers(t, env.Pools[kit.PoolLocal])
	})
	t.Run("source deleted during the copy", func(t *testing.T) {
		gone := src["golden-gone"]
		copySourceDeleted(t, env, ns, "source-gone", local, sourceClaim(env, ns, gone), gone.sums, golden, real)
		assertNoCopyLeftovers(t, env.Pools[kit.PoolLocal])
	})
	t.Run("copy outlasting the call, source and clone deleted", func(t *testing.T) {
		uncollectedCopyRemoved(t, env, ns, "leak", local, env.Pools[kit.PoolLocal], src["golden-leak"], golden, real)
		assertNoCopyLeftovers(t, env.Pools[kit.PoolLocal])
	})
	t.Run("snapshot deleted during the restore", func(t *testing.T) {
		if !env.Snapshots {
			testutil.MissingPrerequisite(t, "snapshots are not installed in this cluster: %s", theSuite.noSnapshots)
		}
		snap := sourceSnapshot(t, env, ns, "golden-snap", srcLocal, filepath.Join(golden.Dir(), "pools", kit.PoolLocal))
		copySourceDeleted(t, env, ns, "snapshot-gone", local, snap, srcLocal.sums, golden, real)
		assertNoCopyLeftovers(t, env.Pools[kit.PoolLocal])
	})
	t.Run("source node down", func(t *testing.T) {
		proc := golden.Process("hpp-csi")
		if err := proc.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		claim := "while-down"
		startClone(t, env, ns, claim, local, srcLocal.claim, real.Name)
		// The event says which node and why: what a user needs to act.
		start := time.Now()
		var events string
		if err := kit.Poll(ctx, 30*time.Second, "an event on the claim naming the source's node and the reason", func(ctx context.Context) (bool, string, error) {
			events = kit.Events(ctx, env.C.Client, ns, "PersistentVolumeClaim", claim)
			return strings.Contains(events, "node golden-f") && strings.Contains(events, "connection refused"), events, nil
		}); err != nil {
			t.Fatal(err)
		}
		t.Logf("event after %s:\n%s", time.Since(start).Round(time.Second), events)
		if err := proc.Restart(); err != nil {
			t.Fatal(err)
		}
		readBack(t, env, ns, claim, srcLocal.sums)
		assertNoCopyLeftovers(t, env.Pools[kit.PoolLocal])
	})
}

// goldenFailIP is golden-f's address: its hpp-csi's peer port listens
// there, and the cut matches it.
var goldenFailIP = net.IPv4(127, 0, 0, 3)

// failureSourceMiB is what the failure tier's sources hold: small, to keep
// the tier short, yet a stream of several hundred milliseconds.
const failureSourceMiB = 48

// streamEnd is how much of a failure source's stream must have passed for
// it to have possibly ended: disk.img's data. The stream is a little more
// (the small files, the headers), yet less than the allocated bytes (a
// small file's block holds more than its bytes), so a count under
// streamEnd is a stream still in flight.
const streamEnd = failureSourceMiB << 20

// goldenSrc is a golden image claim on the source node.
type goldenSrc struct {
	claim     string
	pv        string
	dir       string // its volume directory on the source node
	allocated int64
	sums      []string
}

// goldenSpec names a golden image claim to make: its name, StorageClass
// and the source node's pool of that class.
type goldenSpec struct{ claim, class, pool string }

// goldenSources makes the claims on the golden node, all created before
// the first is awaited (provisioned side by side), and writes a golden
// image of failureSourceMiB into each.
func goldenSources(t *testing.T, env *kit.Env, golden *cluster.Node, ns string, specs ...goldenSpec) map[string]goldenSrc {
	t.Helper()
	for _, s := range specs {
		pvc := kit.PVC(ns, s.claim, s.class, "2Gi")
		pvc.Annotations = map[string]string{contract.AnnSelectedNode: golden.Name}
		createPVC(t, env, pvc)
	}
	out := map[string]goldenSrc{}
	for _, s := range specs {
		pv := boundPV(t, env, ns, s.claim)
		dir := volumeDir(filepath.Join(golden.Dir(), "pools", s.pool), pv)
		if err := kit.WriteGoldenImage(dir, failureSourceMiB); err != nil {
			t.Fatal(err)
		}
		out[s.claim] = goldenSrc{claim: s.claim, pv: pv.Name, dir: dir, allocated: allocatedBytes(t, dir), sums: treeSums(t, dir)}
	}
	return out
}

// startClone creates claim, cloned from source, and a pod on node that
// prints the checksums of the clone's files.
func startClone(t *testing.T, env *kit.Env, ns, claim, class, source, node string) {
	t.Helper()
	startCopy(t, env, ns, claim, class, corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: source}, node)
}

// startCopy creates claim with the data source from and a pod on node
// that prints the checksums of its files.
func startCopy(t *testing.T, env *kit.Env, ns, claim, class string, from corev1.TypedLocalObjectReference, node string) {
	t.Helper()
	pvc := kit.PVC(ns, claim, class, "2Gi")
	pvc.Spec.DataSource = &from
	createPVC(t, env, pvc)
	script := "cd /data && find . -type f | sort | xargs sha256sum"
	createPod(t, env, kit.OnNode(kit.Pod(ns, "read-"+claim, script, kit.PodVolume{Name: "v", Claim: claim, Path: "/data"}), node))
}

// readBack waits for the clone's pod ("read-<claim>"), compares the
// checksums it printed with want, and returns its output.
func readBack(t *testing.T, env *kit.Env, ns, claim string, want []string) string {
	t.Helper()
	ctx := context.Background()
	pod := "read-" + claim
	if _, err := kit.WaitPodPhase(ctx, env.C.Client, ns, pod, corev1.PodSucceeded, 5*time.Minute); err != nil {
		t.Fatal(err, "\n", kit.Events(ctx, env.C.Client, ns, "PersistentVolumeClaim", claim))
	}
	logs, err := kit.PodLogs(ctx, env.C.Client, ns, pod)
	if err != nil {
		t.Fatal(err)
	}
	if got := podSums(logs); !equalSums(got, want) {
		t.Errorf("%s: the pod read\n%v\nwant the source's\n%v", claim, got, want)
	}
	return logs
}

// cloneKilledMidStream starts a clone of src and SIGKILLs victim's hpp-csi
// as soon as the source's node has sent more than the fraction at of the
// source (at 0: anything), then checks that the kill cut the stream (not
// all was sent before), and that the clone completes once hpp-csi is back
// (it restarts as after a crash).
func cloneKilledMidStream(t *testing.T, env *kit.Env, ns, claim, class string, src goldenSrc, victim, receiver *cluster.Node, at float64) {
	t.Helper()
	ctx := context.Background()
	golden := env.C.Node("golden-f")
	base := sentBytes(t, golden)
	startClone(t, env, ns, claim, class, src.claim, receiver.Name)
	threshold := int64(at * float64(src.allocated))
	sent, err := waitSent(ctx, golden, base, threshold)
	if err != nil {
		t.Fatal(err)
	}
	proc := victim.Process("hpp-csi")
	if err := proc.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("hpp-csi on %s killed with %d of %d bytes sent", victim.Name, sent, src.allocated)
	if sent >= streamEnd {
		t.Fatalf("the stream may have ended (%d bytes sent of %d) before hpp-csi on %s was killed: the kill cut nothing", sent, src.allocated, victim.Name)
	}
	if err := proc.WaitRunning(ctx); err != nil {
		t.Fatal(err)
	}
	readBack(t, env, ns, claim, src.sums)
}

// waitSent polls golden's sent-bytes counter (5 ms apart: a stream of the
// failure sources lasts a few hundred milliseconds) until it is more than
// threshold above base, and returns what was sent since base.
func waitSent(ctx context.Context, golden *cluster.Node, base, threshold int64) (int64, error) {
	var sent int64
	err := kit.PollEvery(ctx, 2*time.Minute, 5*time.Millisecond, fmt.Sprintf("the source's node streaming (more than %d bytes sent)", threshold), func(ctx context.Context) (bool, string, error) {
		v, err := kit.MetricSum(ctx, golden, "hpp_peer_sent_bytes_total")
		if err != nil {
			return false, "", kit.Retry(err)
		}
		sent = int64(v) - base
		return sent > threshold, fmt.Sprintf("%d bytes sent", sent), nil
	})
	return sent, err
}

// copiedLogLine is what the receiving hpp-csi logs once a stream has fully
// arrived and been written into the staged volume, before it syncs, keeps
// a copy in the clone cache and publishes the volume
// (cmd/hpp-csi/pools/remotecopy.go).
const copiedLogLine = "volume content copied from another node"

// waitLogged waits until proc's log, read from byte from on (where it
// ended before the step under test), holds line.
func waitLogged(ctx context.Context, proc *cluster.Process, from int64, line string, timeout, every time.Duration) error {
	return kit.PollEvery(ctx, timeout, every, proc.Name()+" logging "+strconv.Quote(line), func(context.Context) (bool, string, error) {
		f, err := os.Open(proc.LogPath())
		if err != nil {
			return false, "", err
		}
		defer func() { _ = f.Close() }()
		b, err := io.ReadAll(io.NewSectionReader(f, from, 1<<30))
		if err != nil {
			return false, "", err
		}
		return strings.Contains(string(b), line), "not yet", nil
	})
}

// cloneKilledAfterStream starts a clone of src onto receiver and SIGKILLs
// the receiver's hpp-csi as soon as it logs that the whole stream arrived:
// the volume is then staged or just published, and CreateVolume has not
// answered. It checks that the claim was not Bound at the kill, and that
// the clone completes once hpp-csi is back.
func cloneKilledAfterStream(t *testing.T, env *kit.Env, ns, claim, class, poolPath string, src goldenSrc, receiver *cluster.Node) {
	t.Helper()
	ctx := context.Background()
	proc := receiver.Process("hpp-csi")
	fi, err := os.Stat(proc.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	from := fi.Size()
	startClone(t, env, ns, claim, class, src.claim, receiver.Name)
	if err := waitLogged(ctx, proc, from, copiedLogLine, 2*time.Minute, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := proc.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	// hpp-csi restarts a second after its death: what the kill left on
	// disk is still there.
	staged := stagedCreates(t, poolPath)
	pvc, err := env.C.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pvc.Status.Phase == corev1.ClaimBound {
		t.Fatalf("claim %s was Bound when hpp-csi on %s was killed: the kill came after the copy", claim, receiver.Name)
	}
	t.Logf("hpp-csi on %s killed after the whole stream arrived, the claim %s; staged creates at the kill: %v", receiver.Name, pvc.Status.Phase, staged)
	if err := proc.WaitRunning(ctx); err != nil {
		t.Fatal(err)
	}
	readBack(t, env, ns, claim, src.sums)
}

// The network cut: cutAfterBytes of the stream pass, then the connection
// is cut for cutHold.
const (
	cutAfterBytes = 16 << 20
	cutHold       = 20 * time.Second
)

// cloneThroughCut starts a clone of src onto receiver with the source
// node's peer connections cut once they have carried cutAfterBytes from
// it, holds the cut for cutHold once it has dropped packets, then removes
// it: the copy must stall while cut (no byte received, the claim's events
// naming the node), then complete on the same connection (TCP retransmits;
// hpp-csi's stall watchdog, 5 minutes, does not fire) or on a retry.
func cloneThroughCut(t *testing.T, env *kit.Env, ns, claim, class string, src goldenSrc, golden, receiver *cluster.Node) {
	t.Helper()
	ctx := context.Background()
	cut := cutPeerPort(t, goldenFailIP, cutAfterBytes)
	base := receivedBytes(t, receiver)
	startClone(t, env, ns, claim, class, src.claim, receiver.Name)
	var dropped int64
	if err := kit.Poll(ctx, 2*time.Minute, "the cut dropping the stream's packets", func(ctx context.Context) (bool, string, error) {
		n, err := cut.dropped(ctx)
		if err != nil {
			return false, "", err
		}
		dropped = n
		v, err := kit.MetricSum(ctx, receiver, "hpp_pool_remote_copy_received_bytes_total")
		if err != nil {
			return false, "", kit.Retry(err)
		}
		got := int64(v) - base
		if n == 0 && got >= streamEnd {
			return false, "", fmt.Errorf("%d bytes received and no packet dropped: the cut did not hold the stream", got)
		}
		return n > 0, fmt.Sprintf("%d packets dropped, %d bytes received", n, got), nil
	}); err != nil {
		t.Fatal(err)
	}
	cutAt := time.Now()
	// Events while cut: csi-provisioner's CreateVolume gets the copy's
	// progress (Aborted, operation pending) after hpp-csi's join wait.
	progress := "copying from node " + golden.Name + ": "
	var events string
	if err := kit.Poll(ctx, time.Minute, "an event on the claim naming the source's node", func(ctx context.Context) (bool, string, error) {
		events = kit.Events(ctx, env.C.Client, ns, "PersistentVolumeClaim", claim)
		return strings.Contains(events, progress), events, nil
	}); err != nil {
		t.Fatal(err)
	}
	stalled := receivedBytes(t, receiver) - base
	time.Sleep(time.Until(cutAt.Add(cutHold)))
	held := receivedBytes(t, receiver) - base
	if n, err := cut.dropped(ctx); err == nil {
		dropped = n
	}
	events = kit.Events(ctx, env.C.Client, ns, "PersistentVolumeClaim", claim)
	if err := cut.remove(); err != nil {
		t.Fatal(err)
	}
	t.Logf("cut for %s: %d packets dropped; %d of %d bytes received when the claim's event came, %d when the cut was removed; events:\n%s",
		time.Since(cutAt).Round(time.Second), dropped, stalled, src.allocated, held, events)
	if held >= streamEnd {
		t.Fatalf("%d bytes of %d received while cut: the cut came after the stream", held, src.allocated)
	}
	if held != stalled {
		t.Errorf("bytes arrived while the connection was cut: %d when the claim's event came, %d at the end of the cut", stalled, held)
	}
	if !strings.Contains(events, "operation pending") {
		t.Errorf("the claim's events while cut do not say the copy is pending: %s", events)
	}
	removed := time.Now()
	readBack(t, env, ns, claim, src.sums)
	t.Logf("clone read back %s after the cut was removed", time.Since(removed).Round(time.Second))
}

// peerCut is a pair of iptables rules (OUTPUT, this machine's filter
// table: the nodes' hpp-csi all run on this machine, talking over
// loopback) dropping the packets, both ways, of the connections to one
// node's peer port that have carried a number of bytes from it: only that
// address and port, so nothing else on the machine is touched, and only
// past a point of the stream, so the cut lands mid-copy.
type peerCut struct {
	rules [][]string // those in place
}

// peerCutComment marks the rules, for their counters and by anyone who
// finds one left behind.
const peerCutComment = "hpp-e2e-peer-cut"

// cutPeerPort installs the cut of ip's peer port after afterBytes; the
// test's cleanup removes it if the test did not.
func cutPeerPort(t *testing.T, ip net.IP, afterBytes int64) *peerCut {
	t.Helper()
	match := []string{"-m", "connbytes", "--connbytes", strconv.FormatInt(afterBytes, 10) + ":", "--connbytes-dir", "reply", "--connbytes-mode", "bytes",
		"-m", "comment", "--comment", peerCutComment, "-j", "DROP"}
	port := strconv.Itoa(cluster.PeerPort)
	c := &peerCut{}
	t.Cleanup(func() {
		// A cut left in place would break every later cross-node copy.
		if err := c.remove(); err != nil {
			t.Error(err)
		}
	})
	for _, r := range [][]string{
		append([]string{"OUTPUT", "-p", "tcp", "-d", ip.String(), "--dport", port}, match...),
		append([]string{"OUTPUT", "-p", "tcp", "-s", ip.String(), "--sport", port}, match...),
	} {
		if _, err := kit.IPTables(context.Background(), append([]string{"-I"}, r...)...); err != nil {
			t.Fatal(err)
		}
		c.rules = append(c.rules, r)
	}
	return c
}

// remove deletes the rules in place; once done, again is a no-op.
func (c *peerCut) remove() error {
	var errs []error
	var left [][]string
	for _, r := range c.rules {
		if _, err := kit.IPTables(context.Background(), append([]string{"-D"}, r...)...); err != nil {
			errs = append(errs, err)
			left = append(left, r)
		}
	}
	c.rules = left
	return errors.Join(errs...)
}

// dropped is the packets the rules dropped so far.
func (c *peerCut) dropped(ctx context.Context) (int64, error) {
	return kit.DroppedPackets(ctx, peerCutComment)
}

// The finalizers csi-provisioner puts on a copy's source while it
// provisions the copy (external-provisioner v6.4.0 pkg/controller:
// pvcCloneFinalizer, snapshotSourceProtectionFinalizer), and what its
// refusals to provision from a source being deleted say (getPVCSource:
// "the PVC DataSource <name> is currently being deleted"; getSnapshotSource,
// for a snapshot without that finalizer: "snapshot <name> is being
// deleted").
const (
	cloningProtection  = "provisioner.storage.kubernetes.io/cloning-protection"
	snapshotProtection = "provisioner.storage.kubernetes.io/volumesnapshot-as-source-protection"
	sourceBeingDeleted = " being deleted"
)

// deletedSource is a copy's source deleted in the middle: the reference
// to it, how to delete it and read its state (get fails with NotFound
// once it is gone), the finalizer that must hold it, and what must be gone
// afterwards (its PV or VolumeSnapshotContent, and its directory on the
// source's node).
type deletedSource struct {
	ref        corev1.TypedLocalObjectReference
	del        func(context.Context) error
	get        func(context.Context) (deleting bool, finalizers []string, err error)
	finalizer  string
	backing    string
	backingGet func(context.Context) error
	dir        string
}

// copySourceDeleted starts a copy of src onto receiver, deletes the source
// while its stream is in flight, and checks what Kubernetes makes of it:
// the source is held (Terminating, csi-provisioner's finalizer on it), the
// copy is Bound with its bytes, then the source goes, with what backs it,
// and its directory is removed on its node.
func copySourceDeleted(t *testing.T, env *kit.Env, ns, claim, class string, src deletedSource, sums []string, golden, receiver *cluster.Node) {
	t.Helper()
	ctx := context.Background()
	base := sentBytes(t, golden)
	startCopy(t, env, ns, claim, class, src.ref, receiver.Name)
	if _, err := waitSent(ctx, golden, base, 0); err != nil {
		t.Fatal(err)
	}
	if err := src.del(ctx); err != nil {
		t.Fatal(err)
	}
	sent := sentBytes(t, golden) - base
	what := src.ref.Kind + " " + src.ref.Name
	t.Logf("%s deleted with %d bytes of its copy sent", what, sent)
	if sent >= streamEnd {
		t.Fatalf("the stream may have ended (%d bytes sent) before %s was deleted", sent, what)
	}
	deleting, finalizers, err := src.get(ctx)
	if err != nil {
		t.Fatalf("%s right after its delete: %v", what, err)
	}
	if !deleting || !slices.Contains(finalizers, src.finalizer) {
		t.Errorf("%s right after its delete: being deleted %v, finalizers %v; want it Terminating, held by %s", what, deleting, finalizers, src.finalizer)
	}
	// csi-provisioner calls CreateVolume again for a clone only while its
	// source claim is not being deleted: a clone whose copy outlasts the
	// first call (hpp-csi answers "pending" after its join wait) would
	// never complete. A restore goes on while the snapshot holds the
	// finalizer.
	if err := kit.Poll(ctx, 2*time.Minute, "the copy Bound", func(ctx context.Context) (bool, string, error) {
		pvc, err := env.C.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			return false, "", kit.Retry(err)
		}
		events := kit.Events(ctx, env.C.Client, ns, "PersistentVolumeClaim", claim)
		if strings.Contains(events, sourceBeingDeleted) {
			return false, "", fmt.Errorf("csi-provisioner no longer calls CreateVolume: %s", events)
		}
		return pvc.Status.Phase == corev1.ClaimBound, string(pvc.Status.Phase) + ": " + events, nil
	}); err != nil {
		t.Fatal(err)
	}
	readBack(t, env, ns, claim, sums)
	if err := kit.WaitGone(ctx, what, 2*time.Minute, func(ctx context.Context) error {
		_, finalizers, err := src.get(ctx)
		if err == nil {
			return fmt.Errorf("finalizers %v", finalizers)
		}
		return err
	}); err != nil {
		t.Fatal(err, "\n", kit.Events(ctx, env.C.Client, ns, src.ref.Kind, src.ref.Name))
	}
	if err := kit.WaitGone(ctx, src.backing, 2*time.Minute, src.backingGet); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(src.dir); !os.IsNotExist(err) {
		t.Errorf("%s's directory on %s after %s went: %v (want it removed)", what, golden.Name, src.backing, err)
	}
}

// sourceClaim is claim src as a deletedSource.
func sourceClaim(env *kit.Env, ns string, src goldenSrc) deletedSource {
	claims := env.C.Client.CoreV1().PersistentVolumeClaims(ns)
	return deletedSource{
		ref: corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: src.claim},
		del: func(ctx context.Context) error { return claims.Delete(ctx, src.claim, metav1.DeleteOptions{}) },
		get: func(ctx context.Context) (bool, []string, error) {
			pvc, err := claims.Get(ctx, src.claim, metav1.GetOptions{})
			if err != nil {
				return false, nil, err
			}
			return pvc.DeletionTimestamp != nil, pvc.Finalizers, nil
		},
		finalizer: cloningProtection,
		backing:   "pv " + src.pv,
		backingGet: func(ctx context.Context) error {
			_, err := env.C.Client.CoreV1().PersistentVolumes().Get(ctx, src.pv, metav1.GetOptions{})
			return err
		},
		dir: src.dir,
	}
}

// sourceSnapshot takes VolumeSnapshot name of src on the golden node and
// returns it as a deletedSource, its directory the one the snapshot added
// to the pool's snapshot area.
func sourceSnapshot(t *testing.T, env *kit.Env, ns, name string, src goldenSrc, poolPath string) deletedSource {
	t.Helper()
	ctx := context.Background()
	area := filepath.Join(poolPath, "csi", ".hpp-snapshots")
	before := snapshotDirs(t, area)
	dyn := createSnapshot(t, env, ns, name, src.claim)
	waitSnapshotReady(t, env, dyn, ns, name)
	snaps := dyn.Resource(kit.VolumeSnapshots).Namespace(ns)
	got, err := snaps.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	content, _, _ := unstructured.NestedString(got.Object, "status", "boundVolumeSnapshotContentName")
	var dir string
	for _, d := range snapshotDirs(t, area) {
		if !slices.Contains(before, d) {
			dir = filepath.Join(area, d)
		}
	}
	if dir == "" || content == "" {
		t.Fatalf("VolumeSnapshot %s: content %q, no new directory in %s", name, content, area)
	}
	return deletedSource{
		ref: corev1.TypedLocalObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: name},
		del: func(ctx context.Context) error { return snaps.Delete(ctx, name, metav1.DeleteOptions{}) },
		get: func(ctx context.Context) (bool, []string, error) {
			got, err := snaps.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil, err
			}
			return got.GetDeletionTimestamp() != nil, got.GetFinalizers(), nil
		},
		finalizer: snapshotProtection,
		backing:   "volumesnapshotcontent " + content,
		backingGet: func(ctx context.Context) error {
			_, err := dyn.Resource(volumeSnapshotContents).Get(ctx, content, metav1.GetOptions{})
			return err
		},
		dir: dir,
	}
}

var volumeSnapshotContents = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotcontents"}

// snapshotDirs are the snapshots in a pool's snapshot area.
func snapshotDirs(t *testing.T, area string) []string {
	t.Helper()
	entries, err := os.ReadDir(area)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out
}

// stagedCreates are the staged creates (".create-" entries) in the pool's
// staging: a volume being made, or what a crash left of one.
func stagedCreates(t *testing.T, poolPath string) []string {
	t.Helper()
	staged, err := os.ReadDir(filepath.Join(poolPath, "csi", dirvol.StagingDir))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range staged {
		if strings.Contains(e.Name(), ".create-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// assertNoCopyLeftovers checks the pool on disk: no staged create in its
// staging, nothing in the clone cache's staging, and every cache entry
// whole (its record and its data).
func assertNoCopyLeftovers(t *testing.T, poolPath string) {
	t.Helper()
	for _, name := range stagedCreates(t, poolPath) {
		t.Errorf("pool staging holds %s", name)
	}
	cache := filepath.Join(poolPath, "csi", clonecache.Dir)
	left, err := os.ReadDir(filepath.Join(cache, clonecache.StagingDir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("clone cache staging holds %s", e.Name())
	}
	entries, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == clonecache.StagingDir {
			continue
		}
		for _, part := range []string{clonecache.RecordFile, clonecache.DataDir} {
			if _, err := os.Stat(filepath.Join(cache, e.Name(), part)); err != nil {
				t.Errorf("clone cache entry %s: %v", e.Name(), err)
			}
		}
	}
}

// uncollectedBound is how long after the clone claim's delete its
// uncollected copy may stay in the pool: hpp-csi sweeps once a minute
// (pools.defaultUncollectedSweep), plus a GET of the claim and of the PV
// and the delete, plus slack for a loaded machine.
const uncollectedBound = 90 * time.Second

// sweptLogLine is what the receiving hpp-csi logs when it removes an
// uncollected copy (cmd/hpp-csi/pools/uncollected.go).
const sweptLogLine = "removed a volume copied from another node that no CreateVolume collected"

// uncollectedCopyRemoved reproduces the leak of a copy no CreateVolume
// collects, and checks it is removed: a clone of src onto receiver whose
// stream is cut (cutPeerPort) so that it outlasts csi-provisioner's first
// CreateVolume ("operation pending"); the source claim deleted, so that
// csi-provisioner refuses to call again ("being deleted"); the cut removed,
// the copy finished into the pool (the volume directory pvc-<clone UID>,
// no PV, the claim Pending); then the clone claim and its pod deleted:
// the directory must be gone within uncollectedBound, by hpp-csi's sweep
// (its log line), then the source claim, its PV and its directory on the
// source's node.
func uncollectedCopyRemoved(t *testing.T, env *kit.Env, ns, claim, class, poolPath string, src goldenSrc, golden, receiver *cluster.Node) {
	t.Helper()
	ctx := context.Background()
	claims := env.C.Client.CoreV1().PersistentVolumeClaims(ns)
	proc := receiver.Process("hpp-csi")
	fi, err := os.Stat(proc.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	logFrom := fi.Size()
	cut := cutPeerPort(t, goldenFailIP, cutAfterBytes)
	base := receivedBytes(t, receiver)
	startClone(t, env, ns, claim, class, src.claim, receiver.Name)
	pvc, err := claims.Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(poolPath, "csi", "pvc-"+string(pvc.UID))
	// The first CreateVolume answered "pending": the copy outlasts it.
	var events string
	if err := kit.Poll(ctx, 2*time.Minute, "the clone's copy answered pending", func(ctx context.Context) (bool, string, error) {
		events = kit.Events(ctx, env.C.Client, ns, "PersistentVolumeClaim", claim)
		return strings.Contains(events, "operation pending"), events, nil
	}); err != nil {
		t.Fatal(err)
	}
	held := receivedBytes(t, receiver) - base
	if held >= streamEnd {
		t.Fatalf("%d bytes of %d received before the source's delete: the copy was not held", held, src.allocated)
	}
	if err := claims.Delete(ctx, src.claim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	if err := kit.Poll(ctx, 2*time.Minute, "csi-provisioner refusing the clone's source", func(ctx context.Context) (bool, string, error) {
		events = kit.Events(ctx, env.C.Client, ns, "PersistentVolumeClaim", claim)
		return strings.Contains(events, sourceBeingDeleted), events, nil
	}); err != nil {
		t.Fatal(err)
	}
	refused := time.Since(deleted)
	if err := cut.remove(); err != nil {
		t.Fatal(err)
	}
	removed := time.Now()
	// The copy ends in the pool (TCP's retransmissions carry the same
	// connection on): a published volume directory, nothing staged.
	if err := kit.Poll(ctx, 3*time.Minute, "the copy published in the pool", func(context.Context) (bool, string, error) {
		_, err := os.Stat(dir)
		return err == nil && len(stagedCreates(t, poolPath)) == 0, fmt.Sprintf("%s: %v, staged %v", dir, err, stagedCreates(t, poolPath)), nil
	}); err != nil {
		t.Fatal(err)
	}
	copied := time.Since(removed)
	received := receivedBytes(t, receiver) - base
	// What leaked before the sweep: no CreateVolume came, so the claim is
	// Pending and no PV names the volume. Waited a little, so that a
	// retry of csi-provisioner's in flight would have shown.
	time.Sleep(10 * time.Second)
	pvc, err = claims.Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pvc.Status.Phase != corev1.ClaimPending {
		t.Fatalf("claim %s is %s after its copy ended: csi-provisioner collected the copy, so this is not the leak's case", claim, pvc.Status.Phase)
	}
	if _, err := env.C.Client.CoreV1().PersistentVolumes().Get(ctx, "pvc-"+string(pvc.UID), metav1.GetOptions{}); err == nil {
		t.Fatalf("a PV names the copy of %s", claim)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the copy left the pool before its claim went: %v", err)
	}
	t.Logf("clone %s: %d bytes received when the first call answered pending; source deleted, refused by csi-provisioner %s later; "+
		"cut removed, the copy (%d bytes received) in the pool %s later, claim %s, no PV",
		claim, held, refused.Round(time.Second), received, copied.Round(time.Second), pvc.Status.Phase)
	if err := env.C.Client.CoreV1().Pods(ns).Delete(ctx, "read-"+claim, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if err := claims.Delete(ctx, claim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kit.WaitGone(ctx, "claim "+claim, time.Minute, func(ctx context.Context) error {
		_, err := claims.Get(ctx, claim, metav1.GetOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	claimGone := time.Now()
	if err := kit.Poll(ctx, uncollectedBound, "the uncollected copy removed from the pool", func(context.Context) (bool, string, error) {
		_, err := os.Stat(dir)
		if err != nil && !os.IsNotExist(err) {
			return false, "", err
		}
		return os.IsNotExist(err), dir + " still there", nil
	}); err != nil {
		t.Fatal(err)
	}
	swept := time.Since(claimGone)
	// The sweeper logs right after it removes the directory, so the line
	// may land a moment after the test saw the directory gone.
	if err := waitLogged(ctx, proc, logFrom, sweptLogLine, 10*time.Second, 250*time.Millisecond); err != nil {
		t.Errorf("hpp-csi on %s did not log %q: %v", receiver.Name, sweptLogLine, err)
	}
	// Nothing holds the source any more: csi-provisioner drops its
	// cloning-protection finalizer, and the source's PV and directory go.
	source := sourceClaim(env, ns, src)
	if err := kit.WaitGone(ctx, "claim "+src.claim, 2*time.Minute, func(ctx context.Context) error {
		_, _, err := source.get(ctx)
		return err
	}); err != nil {
		t.Fatal(err, "\n", kit.Events(ctx, env.C.Client, ns, "PersistentVolumeClaim", src.claim))
	}
	sourceGone := time.Since(claimGone)
	if err := kit.WaitGone(ctx, source.backing, 2*time.Minute, source.backingGet); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(src.dir); !os.IsNotExist(err) {
		t.Errorf("the source's directory on %s after its PV went: %v (want it removed)", golden.Name, err)
	}
	t.Logf("clone claim gone: its copy removed from the pool %s later (bound %s), the source claim gone %s later",
		swept.Round(time.Second), uncollectedBound, sourceGone.Round(time.Second))
}
