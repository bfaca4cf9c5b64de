package onnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hostpath-provisioner/hpp/test/chaos/plan"
	"github.com/hostpath-provisioner/hpp/test/chaos/probes"
	"github.com/hostpath-provisioner/hpp/test/chaos/records"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// The faults only an operator install has (issue 31): the chaos tier
// (test/chaos) runs hpp-csi and the sidecars as the harness's processes,
// so hpp-operator and hpp-mounter, which exist only as the operator's
// pods, are killed here, where the operator overlay and its pvcTemplate
// pools (one on a Block claim, one on a Filesystem claim) are installed.
const (
	killOperator plan.Kind = "kill hpp-operator"
	killMounters plan.Kind = "kill every hpp-mounter"
	killCSI      plan.Kind = "kill hpp-csi"
	// operatorFaultsLength is the faults' window: long enough for each
	// component to be killed about twice (kubelet restarts a container
	// killed again within 10 minutes after a doubling back-off: 10 s,
	// 20 s, ...), short enough for make test's budget.
	operatorFaultsLength = 45 * time.Second
	// recoverBound is the issue's: everything whole again within 2
	// minutes of the last fault.
	recoverBound = 2 * time.Minute
	// recoverStable is how long the CR must stay whole to count: its
	// operator reconciles again within seconds of any change it sees.
	recoverStable = 10 * time.Second
)

var operatorFaultSpecs = []plan.Spec{{Kind: killOperator, Weight: 1}, {Kind: killMounters, Weight: 1}, {Kind: killCSI, Weight: 1}}

// poolWriter is a pod appending records (test/chaos/writer) to a claim of
// one pvcTemplate pool.
type poolWriter struct {
	id    uint32
	pool  *templatePool
	claim string
	file  string // the records file, from this machine
	acked uint64
}

// operatorFaults SIGKILLs hpp-operator, every hpp-mounter and hpp-csi at
// times drawn from a printed seed (HPP_CHAOS_SEED replays), overlapping as
// the draw has it, while a writer on each pool appends fsynced records.
// At every poll no pool is unmounted or mounted again (mount ID); within
// recoverBound of the last fault the CR is whole again (Available, every
// pool and mounter Ready: probes.CheckRecovered), a new claim on each pool
// is provisioned, written and deleted, every record a writer acknowledged
// is on disk, and the writers went on writing.
func (e *env) operatorFaults(ctx context.Context, t *testing.T, pools []*templatePool) {
	t.Helper()
	seed, err := plan.SeedFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	schedule, err := plan.New(seed, operatorFaultsLength, 8*time.Second, operatorFaultSpecs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("operator faults, replay with HPP_CHAOS_SEED=%d make operator-on-node:\n%s", seed, schedule)
	ns := e.testNamespace(ctx, t)
	writers := e.startWriters(ctx, t, ns, pools)
	targets := make([]string, len(pools))
	for i, p := range pools {
		targets[i] = filepath.Join(p.path, "csi")
	}
	mounts := e.poolMountIDs(t, targets)

	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	killed := map[plan.Kind]int{}
	for _, f := range schedule.Faults {
		wg.Go(func() {
			time.Sleep(time.Until(start.Add(f.At)))
			n, err := killComponent(f.Kind)
			mu.Lock()
			defer mu.Unlock()
			killed[f.Kind] += n
			at := time.Since(start).Round(100 * time.Millisecond)
			if err != nil {
				t.Errorf("t+%v %s: %d processes killed, %v", at, f.Kind, n, err)
				return
			}
			t.Logf("t+%v %s: %d processes killed", at, f.Kind, n)
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	polls := 0
	for waiting := true; waiting; polls++ {
		select {
		case <-done:
			waiting = false
		case <-time.After(2 * time.Second):
		}
		if err := probes.CheckMounts(mounts, e.poolMountIDs(t, targets)); err != nil {
			t.Errorf("at t+%v: %v", time.Since(start).Round(time.Second), err)
		}
	}
	lastFault := time.Now()
	for _, s := range operatorFaultSpecs {
		if killed[s.Kind] == 0 {
			t.Errorf("%s: no process was found to kill in the whole run (the fault never happened)", s.Kind)
		}
	}
	e.waitRecovered(ctx, t, lastFault)
	if err := probes.CheckMounts(mounts, e.poolMountIDs(t, targets)); err != nil {
		t.Error(err)
	}
	for _, p := range pools {
		e.checkPoolMounted(ctx, t, p)
		e.writeThroughClaim(ctx, t, "onnode-pool-"+p.name, func(pv *corev1.PersistentVolume) string {
			return e.inNode(filepath.Join(p.path, "csi", pv.Spec.CSI.VolumeHandle))
		})
	}
	e.checkWriters(ctx, t, ns, writers)
	t.Logf("operator faults: %d faults, processes killed %v, pool mounts unchanged at %d polls", len(schedule.Faults), killed, polls)
	e.stopWriters(ctx, t, ns, writers)
}

// startWriters starts one writer pod per pool (its claim of the pool's
// StorageClass) and waits until each runs.
func (e *env) startWriters(ctx context.Context, t *testing.T, ns string, pools []*templatePool) []*poolWriter {
	t.Helper()
	bin := filepath.Join(e.c.Dir, "chaosbin")
	if err := records.BuildWriter(ctx, filepath.Join(bin, "writer")); err != nil {
		t.Fatal(err)
	}
	client := e.c.Client
	var writers []*poolWriter
	for i, p := range pools {
		w := &poolWriter{id: uint32(i + 1), pool: p, claim: "records-" + p.name}
		if _, err := client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, kit.PVC(ns, w.claim, "onnode-pool-"+p.name, "16Mi"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod := kit.Pod(ns, w.claim, fmt.Sprintf("exec /chaos/writer --path /data/records --writer %d --every 100ms", w.id),
			kit.PodVolume{Name: "data", Claim: w.claim, Path: "/data"},
			kit.PodVolume{Name: "bin", Path: "/chaos", ReadOnly: true, Source: &corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: bin}}})
		pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
		if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		writers = append(writers, w)
	}
	for _, w := range writers {
		if _, err := kit.WaitPodPhase(ctx, client, ns, w.claim, corev1.PodRunning, 3*time.Minute); err != nil {
			t.Fatalf("writer on pool %s: %v\n%s", w.pool.name, err, kit.Events(ctx, client, ns, "Pod", w.claim))
		}
		pvc, err := kit.WaitPVCBound(ctx, client, ns, w.claim, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		pv, err := client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w.file = e.inNode(filepath.Join(w.pool.path, "csi", pv.Spec.CSI.VolumeHandle, "records"))
	}
	return writers
}

// poolMountIDs reads the pools' mount IDs from the node's mountinfo.
func (e *env) poolMountIDs(t *testing.T, targets []string) map[string]int {
	t.Helper()
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(e.c.NodeInitPID()), "mountinfo"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ids, err := probes.MountIDs(f, targets)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// killComponent SIGKILLs every process of the kind's program, as a crash
// would (kubelet restarts the container), and returns how many it found:
// none while kubelet is still restarting the one killed before.
func killComponent(kind plan.Kind) (int, error) {
	name := map[plan.Kind]string{killOperator: "hpp-operator", killMounters: "hpp-mounter", killCSI: "hpp-csi"}[kind]
	if name == "" {
		return 0, fmt.Errorf("no program for fault kind %q", kind)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, d := range entries {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", d.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != name {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("kill %s (pid %d): %w", name, pid, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// waitRecovered waits until every pod of the install is Ready again (the
// killed containers restarted) and then until the CR says the install is
// whole (probes.CheckRecovered) at every poll for recoverStable, failing
// after recoverBound from lastFault. Both, because a CR read while the
// operator is down still holds its word from before the faults, and the
// operator's first reconcile after its restart takes a moment.
func (e *env) waitRecovered(ctx context.Context, t *testing.T, lastFault time.Time) {
	t.Helper()
	var wholeSince time.Time
	err := kit.Poll(ctx, time.Until(lastFault.Add(recoverBound)), "HostPathProvisioner "+crName+" whole again", func(ctx context.Context) (bool, string, error) {
		state, err := e.recoveryState(ctx)
		if err != nil || state != "" {
			// Not whole yet is a state to wait on; a failed read is retried.
			wholeSince = time.Time{}
			if err != nil {
				return false, "", kit.Retry(err)
			}
			return false, state, nil
		}
		if wholeSince.IsZero() {
			wholeSince = time.Now()
		}
		return time.Since(wholeSince) >= recoverStable, "whole since " + wholeSince.Format(time.TimeOnly), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("HostPathProvisioner %s whole again %v after the last fault (every pod Ready, then the CR whole for %v)",
		crName, wholeSince.Sub(lastFault).Round(100*time.Millisecond), recoverStable)
}

// recoveryState says what keeps the install from being whole: the pods
// not Ready (pods that ran to completion, cleanup Jobs, do not count),
// else probes.CheckRecovered's verdict on the CR; "" when it is whole.
func (e *env) recoveryState(ctx context.Context) (string, error) {
	pods, err := e.c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	var waiting []string
	for i := range pods.Items {
		if p := &pods.Items[i]; p.Status.Phase != corev1.PodSucceeded && !podReady(p) {
			waiting = append(waiting, kit.PodSummary(p))
		}
	}
	if len(waiting) > 0 {
		return "pods not ready: " + strings.Join(waiting, "; "), nil
	}
	cr, err := e.getCR(ctx)
	if err != nil {
		return "", err
	}
	return probes.Split(probes.CheckRecovered(cr.Status))
}

// checkWriters: each writer acknowledged records after the faults too
// (it went on writing), and every record it acknowledged is in its file
// in order with its checksum (records.Verify).
func (e *env) checkWriters(ctx context.Context, t *testing.T, ns string, writers []*poolWriter) {
	t.Helper()
	for _, w := range writers {
		before := e.writerAcks(ctx, t, ns, w)
		time.Sleep(time.Second)
		w.acked = e.writerAcks(ctx, t, ns, w)
		if w.acked <= before {
			t.Errorf("writer on pool %s: no record acknowledged in a second after the faults (%d acknowledged)", w.pool.name, w.acked)
		}
		rep, err := records.VerifyFile(w.file, w.id, w.acked)
		if err != nil {
			t.Errorf("writer on pool %s: %v", w.pool.name, err)
			continue
		}
		t.Logf("writer on pool %s: %d records acknowledged, %d valid in %s", w.pool.name, w.acked, rep.Valid, w.file)
	}
}

// writerAcks is the highest record number the writer's log acknowledged
// ("ack N"). The log is its container's current one: were the writer
// restarted, the acks of the one before would not count, which weakens
// the check and never fails it wrongly.
func (e *env) writerAcks(ctx context.Context, t *testing.T, ns string, w *poolWriter) uint64 {
	t.Helper()
	b, err := e.c.Client.CoreV1().Pods(ns).GetLogs(w.claim, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("writer on pool %s: its log: %v", w.pool.name, err)
	}
	return records.HighestAck(b)
}

// stopWriters deletes the writers' pods and claims and waits until their
// volumes are gone, so the steps after this one find the pools as before.
func (e *env) stopWriters(ctx context.Context, t *testing.T, ns string, writers []*poolWriter) {
	t.Helper()
	client := e.c.Client
	for _, w := range writers {
		pvc, err := client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, w.claim, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := client.CoreV1().Pods(ns).Delete(ctx, w.claim, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		if err := client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, w.claim, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := kit.WaitGone(ctx, "PV "+pvc.Spec.VolumeName, 2*time.Minute, func(ctx context.Context) error {
			_, err := client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
}
