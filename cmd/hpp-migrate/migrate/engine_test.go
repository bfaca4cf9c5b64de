package migrate

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// killed is what the failure hook panics with: the run stops right there,
// as a killed process would, and the test starts a new one.
type killed struct{ pv string }

// fakeCluster has one node with hpp-csi, a legacy PV bound to a claim, a
// stand-in for the PV controller (a created PV whose claim names it is
// Bound at once) and for the API server's finalizers (a DELETE of a PV
// with finalizers only marks it; a write that empties them removes it).
// A parked PV is Released at once. The real behaviour is tested against
// kube-apiserver and kube-controller-manager in test/migrate.
func fakeCluster(t *testing.T, prefixed bool) (*fake.Clientset, *corev1.PersistentVolume) {
	t.Helper()
	pv := legacyPV("pvc-1", "disk", prefixed)
	n := node("node-a", "host-a")
	cn := csiNode("node-a")
	c := fake.NewClientset(pv, boundClaim("disk", "pvc-1"), &n, &cn)
	c.PrependReactor("create", "persistentvolumes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pv := a.(k8stesting.CreateAction).GetObject().(*corev1.PersistentVolume)
		pv.Status.Phase = corev1.VolumeBound
		pv.UID = types.UID(fmt.Sprintf("uid-%d", time.Now().UnixNano())) // the API server's job
		return false, nil, nil
	})
	pvs := corev1.SchemeGroupVersion.WithResource("persistentvolumes")
	c.PrependReactor("delete", "persistentvolumes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj, err := c.Tracker().Get(pvs, "", a.(k8stesting.DeleteAction).GetName())
		if err != nil {
			return true, nil, err
		}
		if len(obj.(*corev1.PersistentVolume).Finalizers) == 0 {
			return false, nil, nil // the default reactor deletes it
		}
		live := obj.(*corev1.PersistentVolume)
		now := metav1.Now()
		live.DeletionTimestamp = &now
		return true, nil, c.Tracker().Update(pvs, live, "")
	})
	// Parking: the PV controller marks a PV whose claim does not exist
	// Released.
	c.PrependReactor("patch", "persistentvolumes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		patch := string(a.(k8stesting.PatchAction).GetPatch())
		if !strings.Contains(patch, `"op":"replace","path":"/spec/claimRef/name"`) {
			return false, nil, nil
		}
		obj, err := c.Tracker().Get(pvs, "", a.(k8stesting.PatchAction).GetName())
		if err != nil {
			return true, nil, err
		}
		pv := obj.(*corev1.PersistentVolume)
		pv.Spec.ClaimRef.Name = ParkedClaimName(pv.Spec.ClaimRef.UID)
		pv.Status.Phase = corev1.VolumeReleased
		return true, pv, c.Tracker().Update(pvs, pv, "")
	})
	c.PrependReactor("patch", "persistentvolumes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name := a.(k8stesting.PatchAction).GetName()
		obj, err := c.Tracker().Get(pvs, "", name)
		if err != nil {
			return true, nil, err
		}
		if obj.(*corev1.PersistentVolume).DeletionTimestamp == nil || !strings.Contains(string(a.(k8stesting.PatchAction).GetPatch()), `{"op":"replace","path":"/metadata/finalizers","value":[]}`) {
			return false, nil, nil
		}
		return true, obj, c.Tracker().Delete(pvs, "", name)
	})
	return c, pv
}

func planFor(t *testing.T, c *fake.Clientset, backups Backups) *Plan {
	t.Helper()
	inv, err := Collect(context.Background(), c, backups)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := Assess(inv, Config{PVDir: testPVDir, Pool: "legacy"})
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// runUntilKilled runs migrate (or rollback) with a hook that kills it
// after step `at` and reports whether it was killed and the steps seen.
func runUntilKilled(t *testing.T, r *Runner, run func() error, at Step) (wasKilled bool, err error) {
	t.Helper()
	r.Parallel = 1
	r.Engine.AfterStep = func(pv string, s Step) {
		if s == at {
			panic(killed{pv})
		}
	}
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(killed); !ok {
				panic(v)
			}
			wasKilled = true
		}
	}()
	return false, run()
}

// migrateFirst runs one PV's migration in this goroutine (the Runner's
// workers are other goroutines, where a simulated kill could not be caught).
func migrateFirst(t *testing.T, r *Runner, c *fake.Clientset) func() error {
	return func() error {
		plan := planFor(t, c, r.Backups)
		if len(plan.Items) != 1 {
			t.Fatalf("plan %+v", plan.Items)
		}
		return r.migrateOne(context.Background(), plan.Items[0])
	}
}

func rollbackFirst(r *Runner) func() error {
	return func() error {
		b, err := r.Backups.Load("pvc-1")
		if err != nil {
			return err
		}
		_, err = r.rollbackOne(context.Background(), b)
		return err
	}
}

func TestMigrateKilledAfterEveryStepThenRollback(t *testing.T) {
	for _, prefixed := range []bool{false, true} {
		for _, at := range Steps {
			t.Run(fmt.Sprintf("prefixed=%v/killed-after-%s", prefixed, at), func(t *testing.T) {
				ctx := context.Background()
				c, orig := fakeCluster(t, prefixed)
				backups := Backups{Dir: t.TempDir()}
				r := &Runner{Engine: &Engine{Client: c, PollInterval: time.Millisecond, BoundTimeout: 5 * time.Second}, Backups: backups}
				wasKilled, err := runUntilKilled(t, r, migrateFirst(t, r, c), at)
				if err != nil {
					t.Fatal(err)
				}
				if !wasKilled {
					t.Fatalf("the run never reached step %s", at)
				}
				r.Engine.AfterStep = nil
				results := r.Migrate(ctx, planFor(t, c, backups))
				if len(results) != 1 || (results[0].Outcome != OutcomeMigrated && results[0].Outcome != OutcomeDone) {
					t.Fatalf("rerun: %+v", results)
				}
				checkMigrated(t, c, orig, prefixed)
				b, err := backups.Load("pvc-1")
				if err != nil || b == nil || b.UID != orig.UID || b.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
					t.Fatalf("backup %+v, %v: want the untouched original", b, err)
				}
				// A third run finds nothing to do and writes nothing.
				before := len(c.Actions())
				results = r.Migrate(ctx, planFor(t, c, backups))
				if results[0].Outcome != OutcomeDone {
					t.Errorf("third run: %+v", results)
				}
				for _, a := range c.Actions()[before:] {
					if a.GetVerb() != "list" && a.GetVerb() != "get" {
						t.Errorf("third run wrote: %s %s", a.GetVerb(), a.GetResource().Resource)
					}
				}

				// Rollback, killed after the same step, then rerun.
				wasKilled, err = runUntilKilled(t, r, rollbackFirst(r), at)
				if err != nil {
					t.Fatal(err)
				}
				if at != StepBackup && !wasKilled {
					t.Fatalf("rollback never reached step %s", at)
				}
				r.Engine.AfterStep = nil
				if res := r.Rollback(ctx, []string{"pvc-1"}); res[0].Outcome != OutcomeRestored && res[0].Outcome != OutcomeDone {
					t.Fatalf("rollback rerun: %+v", res)
				}
				got, err := c.CoreV1().PersistentVolumes().Get(ctx, "pvc-1", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				wantSpec := orig.Spec.DeepCopy()
				wantSpec.ClaimRef.ResourceVersion = "" // dropped on purpose: it names the claim's version at binding
				if diff := cmp.Diff(*wantSpec, got.Spec); diff != "" {
					t.Errorf("rolled back spec (-original +got):\n%s", diff)
				}
				if diff := cmp.Diff(orig.Labels, got.Labels); diff != "" {
					t.Errorf("rolled back labels (-original +got):\n%s", diff)
				}
				if got.Annotations[contract.AnnIdentity] != contract.LegacyProvisionerName || got.Annotations[contract.AnnRestoredFrom] != string(orig.UID) || slices.Contains(got.Finalizers, contract.FinalizerMigration) {
					t.Errorf("rolled back metadata %+v", got.ObjectMeta)
				}
			})
		}
	}
}

func checkMigrated(t *testing.T, c *fake.Clientset, orig *corev1.PersistentVolume, prefixed bool) {
	t.Helper()
	ctx := context.Background()
	pvs, err := c.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil || len(pvs.Items) != 1 {
		t.Fatalf("PVs %+v, %v: want exactly one", pvs, err)
	}
	pv := pvs.Items[0]
	handle := "pvc-1"
	if prefixed {
		handle = "disk-pvc-1"
	}
	if pv.Name != "pvc-1" || pv.Spec.CSI == nil || pv.Spec.CSI.VolumeHandle != handle || pv.Spec.ClaimRef.UID != orig.Spec.ClaimRef.UID ||
		pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || slices.Contains(pv.Finalizers, contract.FinalizerMigration) {
		t.Errorf("migrated PV %+v", pv)
	}
	claim, err := c.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "disk", metav1.GetOptions{})
	if err != nil || claim.UID != "uid-disk" || claim.Spec.VolumeName != "pvc-1" {
		t.Errorf("claim %+v, %v", claim, err)
	}
}

func TestReplaceLeavesForeignPVAlone(t *testing.T) {
	ctx := context.Background()
	c, orig := fakeCluster(t, false)
	other := orig.DeepCopy()
	other.Spec.ClaimRef.UID = "someone-else"
	if _, err := c.CoreV1().PersistentVolumes().Update(ctx, other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want, _ := Translate(orig, Target{Node: "node-a", Pool: "legacy", Dir: "pvc-1"})
	e := &Engine{Client: c}
	err := e.Replace(ctx, Replacement{Original: orig, Want: want, IsWant: func(*corev1.PersistentVolume) bool { return false }})
	wantErr := "PV pvc-1: spec.claimRef is claim ns/disk (uid someone-else), not the claim ns/disk (uid uid-disk) of the backup: left alone"
	if err == nil || err.Error() != wantErr {
		t.Errorf("error %v, want %q", err, wantErr)
	}
}

func TestRollbackRefusesForeignCSIPV(t *testing.T) {
	ctx := context.Background()
	c, orig := fakeCluster(t, false)
	backups := Backups{Dir: t.TempDir()}
	if _, err := backups.Ensure(orig); err != nil {
		t.Fatal(err)
	}
	foreign, _ := Translate(orig, Target{Node: "node-a", Pool: "legacy", Dir: "pvc-1"})
	delete(foreign.Annotations, contract.AnnMigratedFrom)
	if err := c.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("persistentvolumes"), "", "pvc-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().PersistentVolumes().Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := &Runner{Engine: &Engine{Client: c}, Backups: backups}
	res := r.Rollback(ctx, []string{"pvc-1"})
	want := "PV pvc-1 is not the CSI PV hpp-migrate made from this backup (uid uid-pvc-1): left alone"
	if res[0].Outcome != OutcomeFailed || res[0].Reason != want {
		t.Errorf("result %+v, want failure %q", res[0], want)
	}
}

// A migration stopped after hold, then rolled back: the legacy PV gets its
// policy back and loses the finalizer.
func TestRollbackOfAHeldPV(t *testing.T) {
	ctx := context.Background()
	c, orig := fakeCluster(t, false)
	backups := Backups{Dir: t.TempDir()}
	r := &Runner{Engine: &Engine{Client: c, PollInterval: time.Millisecond, BoundTimeout: 5 * time.Second}, Backups: backups}
	if wasKilled, err := runUntilKilled(t, r, migrateFirst(t, r, c), StepHold); !wasKilled || err != nil {
		t.Fatalf("killed %v, %v", wasKilled, err)
	}
	r.Engine.AfterStep = nil
	if res := r.Rollback(ctx, []string{"pvc-1"}); res[0].Outcome != OutcomeRestored {
		t.Fatalf("rollback: %+v", res)
	}
	got, err := c.CoreV1().PersistentVolumes().Get(ctx, "pvc-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != orig.UID || got.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || slices.Contains(got.Finalizers, contract.FinalizerMigration) {
		t.Errorf("PV after rollback: uid %s policy %s finalizers %q", got.UID, got.Spec.PersistentVolumeReclaimPolicy, got.Finalizers)
	}
}
