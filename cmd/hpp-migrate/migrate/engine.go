package migrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// Step is one API write (or the backup) of a replacement. A failure
// injection hook runs after each, so tests can kill the tool between any
// pair of steps.
type Step string

// The steps in order. README.md explains why this order keeps the claim
// Bound.
const (
	StepBackup  Step = "backup"  // the original PV is in its backup file
	StepHold    Step = "hold"    // reclaim policy Retain + our finalizer on the old PV
	StepDelete  Step = "delete"  // old PV marked for deletion; our finalizer keeps it
	StepPark    Step = "park"    // the terminating PV's claimRef names no claim
	StepRelease Step = "release" // finalizers dropped: the old PV is gone
	StepCreate  Step = "create"  // new PV created, Retain
	StepRestore Step = "restore" // original reclaim policy on the new PV
	StepConfirm Step = "confirm" // PV and claim Bound to each other
)

// Steps lists every step, in order.
var Steps = []Step{StepBackup, StepHold, StepDelete, StepPark, StepRelease, StepCreate, StepRestore, StepConfirm}

// finalizerExternalProvisioner is csi-provisioner's; rollback removes it
// from the CSI PV it replaces (no DeleteVolume must happen).
const finalizerExternalProvisioner = "external-provisioner.volume.kubernetes.io/finalizer"

// droppable are the finalizers release removes; any other one stops the
// replacement with an error naming it.
var droppable = []string{contract.FinalizerMigration, FinalizerPVProtection, finalizerExternalProvisioner}

// Replacement is one PV to replace by another object of the same name.
type Replacement struct {
	// Original is the PV as it was before anything changed (the backup):
	// the claim it is bound to and its reclaim policy.
	Original *corev1.PersistentVolume
	// Want is the final object, with the original reclaim policy.
	Want *corev1.PersistentVolume
	// IsWant tells whether a live PV is already the replacement.
	IsWant func(*corev1.PersistentVolume) bool
	// Live, when set, is the PV as the plan read it: the first step starts
	// from it instead of a GET (every write is guarded, so a stale copy
	// only costs a retry).
	Live *corev1.PersistentVolume
}

// Engine replaces PVs in place. Each call to Replace looks at the cluster
// first and continues from there, so a rerun after a kill finishes the job.
type Engine struct {
	Client kubernetes.Interface
	// Urgent, when set, makes the create that follows a release: a client
	// without client-side rate limiting, so that the only moment the claim
	// has no PV is not stretched by a wait behind other PVs' requests.
	Urgent kubernetes.Interface
	// AfterStep runs after each completed step (progress, failure injection).
	AfterStep func(pv string, step Step)
	// PollInterval and BoundTimeout bound the wait for the PV controller.
	PollInterval time.Duration
	BoundTimeout time.Duration
}

// ParkedClaimName is the claimRef name a PV carries when it is deleted: no
// claim has it (the claim's UID is kept, so none could match), so the PV
// controller's reaction to the delete event cannot touch the real claim.
func ParkedClaimName(uid types.UID) string { return "hpp-migrate-parked-" + string(uid) }

func (e *Engine) after(pv string, s Step) {
	if e.AfterStep != nil {
		e.AfterStep(pv, s)
	}
}

// maxRounds bounds the loop of Replace: each round makes progress or
// retries after a conflict with a controller.
const maxRounds = 30

// Replace drives r to completion from whatever state the cluster is in.
func (e *Engine) Replace(ctx context.Context, r Replacement) error {
	name := r.Want.Name
	ref := r.Original.Spec.ClaimRef
	if ref == nil || ref.UID == "" {
		return fmt.Errorf("PV %s: the original has no claimRef with a uid", name)
	}
	live, err := r.Live, error(nil)
	if live == nil {
		live, err = e.get(ctx, name)
	}
	for round := 0; round < maxRounds; round++ {
		if err != nil {
			return err
		}
		switch {
		case live == nil: // gone
			live, err = e.create(ctx, r)
		case live.Spec.ClaimRef == nil || live.Spec.ClaimRef.UID != ref.UID:
			return fmt.Errorf("PV %s: spec.claimRef is %s, not the claim %s/%s (uid %s) of the backup: left alone",
				name, refString(live.Spec.ClaimRef), ref.Namespace, ref.Name, ref.UID)
		case live.DeletionTimestamp != nil && r.IsWant(live) && !slices.Contains(live.Finalizers, contract.FinalizerMigration):
			return fmt.Errorf("PV %s: the replacement is being deleted by someone else: left alone", name)
		case live.DeletionTimestamp != nil && live.Spec.ClaimRef.Name != ParkedClaimName(ref.UID):
			live, err = e.park(ctx, live)
		case live.DeletionTimestamp != nil && live.Status.Phase != corev1.VolumeReleased:
			live, err = e.waitReleased(ctx, live)
		case live.DeletionTimestamp != nil:
			live, err = e.release(ctx, live)
		case r.IsWant(live):
			if live, err = e.restore(ctx, r, live); err == nil {
				if err = e.confirm(ctx, live, ref); err == nil {
					e.after(name, StepConfirm)
				}
				return err
			}
		case live.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain ||
			!slices.Contains(live.Finalizers, contract.FinalizerMigration):
			live, err = e.hold(ctx, live)
		default:
			live, err = e.delete(ctx, live)
		}
		if isStale(err) {
			// A controller wrote first, the object came back or went: look again.
			live, err = e.get(ctx, name)
		}
	}
	return fmt.Errorf("PV %s: no progress after %d rounds (a controller keeps changing it)", name, maxRounds)
}

func (e *Engine) get(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	pv, err := e.Client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get PV %s: %w", name, err)
	}
	return pv, nil
}

// hold sets Retain (nothing may delete the directory while two objects
// describe it) and adds our finalizer, in one patch guarded by the
// resourceVersion.
func (e *Engine) hold(ctx context.Context, live *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
	fins := live.Finalizers
	if !slices.Contains(fins, contract.FinalizerMigration) {
		fins = append(slices.Clone(fins), contract.FinalizerMigration)
	}
	patch, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": live.ResourceVersion, "finalizers": fins},
		"spec":     map[string]any{"persistentVolumeReclaimPolicy": corev1.PersistentVolumeReclaimRetain},
	})
	pv, err := e.Client.CoreV1().PersistentVolumes().Patch(ctx, live.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return nil, wrapStale(fmt.Sprintf("PV %s: set Retain and finalizer", live.Name), err)
	}
	e.after(live.Name, StepHold)
	return pv, nil
}

// delete marks the old PV for deletion. It stays (our finalizer) and keeps
// its claimRef, so the claim stays Bound meanwhile.
func (e *Engine) delete(ctx context.Context, live *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
	uid := live.UID
	err := e.Client.CoreV1().PersistentVolumes().Delete(ctx, live.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid},
	})
	if err != nil {
		return nil, wrapStale(fmt.Sprintf("PV %s: delete", live.Name), err)
	}
	e.after(live.Name, StepDelete)
	// No GET: the object is terminating now, and the next writes are JSON
	// patches that test what they depend on instead of a resourceVersion.
	pv := live.DeepCopy()
	now := metav1.Now()
	pv.DeletionTimestamp = &now
	return pv, nil
}

// park points the terminating PV's claimRef at a claim that cannot exist
// (the name changes, the UID stays). The PV controller may mark it
// Released (Retain: nothing happens); if its periodic resync binds it back
// to the claim meanwhile, release conflicts and Replace parks it again.
func (e *Engine) park(ctx context.Context, live *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
	ref := live.Spec.ClaimRef
	patch := jsonPatch(
		op{"test", "/metadata/uid", live.UID},
		op{"test", "/spec/claimRef/uid", ref.UID},
		op{"replace", "/spec/claimRef/name", ParkedClaimName(ref.UID)},
	)
	out, err := e.Client.CoreV1().PersistentVolumes().Patch(ctx, live.Name, types.JSONPatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return nil, wrapStale(fmt.Sprintf("PV %s: park claimRef", live.Name), err)
	}
	e.after(live.Name, StepPark)
	return out, nil
}

// waitReleased waits until the PV controller has marked the parked PV
// Released. That write proves the controller's own cache holds the parked
// version: when a PV disappears, the controller queues the claim named by
// the version in its cache (not by the delete event), so releasing before
// it has seen the parked version would make it sync the real claim while
// no PV exists, and mark it Lost. Under load its volume queue lags, and
// this is what happened in the 1,000-PV benchmark before this wait.
func (e *Engine) waitReleased(ctx context.Context, live *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
	interval := e.PollInterval
	if interval <= 0 {
		interval = 50 * time.Millisecond
	}
	timeout := e.BoundTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("PV %s: the PV controller did not mark the parked PV Released within %s (is kube-controller-manager's persistentvolume-binder-controller running?); rerun to keep waiting", live.Name, timeout)
		case <-time.After(interval):
		}
		pv, err := e.get(ctx, live.Name)
		if err != nil || pv == nil || pv.UID != live.UID || pv.Status.Phase == corev1.VolumeReleased ||
			pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Name != live.Spec.ClaimRef.Name {
			return pv, err // Released, or changed: Replace decides
		}
	}
}

// release drops the finalizers of the parked PV: it disappears, and its
// delete event names no real claim, so the PV controller does not sync
// (and mark Lost) the claim.
func (e *Engine) release(ctx context.Context, live *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
	var keep []string
	for _, f := range live.Finalizers {
		if !slices.Contains(droppable, f) {
			keep = append(keep, f)
		}
	}
	if len(keep) > 0 {
		return nil, fmt.Errorf("PV %s: marked for deletion but held by finalizers %q that hpp-migrate does not own: remove them (or finish what they wait for), then rerun", live.Name, keep)
	}
	// Only this object, and only while parked, loses its finalizers; the
	// test fails (and Replace looks again) if the PV controller bound it
	// back to the claim meanwhile.
	patch := jsonPatch(
		op{"test", "/metadata/uid", live.UID},
		op{"test", "/spec/claimRef/name", ParkedClaimName(live.Spec.ClaimRef.UID)},
		op{"test", "/metadata/finalizers", live.Finalizers},
		op{"replace", "/metadata/finalizers", []string{}},
	)
	_, err := e.Client.CoreV1().PersistentVolumes().Patch(ctx, live.Name, types.JSONPatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return nil, wrapStale(fmt.Sprintf("PV %s: release", live.Name), err)
	}
	e.after(live.Name, StepRelease)
	// Gone: create next (an AlreadyExists there means someone re-created
	// it, and Replace looks again).
	return nil, nil
}

type op struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

func jsonPatch(ops ...op) []byte {
	data, _ := json.Marshal(ops)
	return data
}

// isStale tells an error that means "the object is not as we read it": a
// resourceVersion conflict, a failed JSON patch test, an object that came
// back or went away. Replace then reads it again. A failed test is a bare
// 422 (the API server does not say which operation failed); our patches
// are otherwise well-formed, and a persistent 422 ends after maxRounds.
// (The pv-protection controller dropping its finalizer from a parked PV is
// the usual cause.)
func isStale(err error) bool {
	var status apierrors.APIStatus
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) ||
		(errors.As(err, &status) && status.Status().Code == http.StatusUnprocessableEntity)
}

func wrapStale(what string, err error) error {
	if isStale(err) {
		return err
	}
	return fmt.Errorf("%s: %w", what, err)
}

// create makes the replacement with Retain: the original policy comes back
// only once the claim is confirmed on it.
func (e *Engine) create(ctx context.Context, r Replacement) (*corev1.PersistentVolume, error) {
	obj := r.Want.DeepCopy()
	obj.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	obj.Finalizers = slices.DeleteFunc(obj.Finalizers, func(f string) bool { return f == contract.FinalizerMigration })
	c := e.Client
	if e.Urgent != nil {
		c = e.Urgent
	}
	pv, err := c.CoreV1().PersistentVolumes().Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, err
		}
		return nil, fmt.Errorf("PV %s: create: %w", obj.Name, err)
	}
	e.after(obj.Name, StepCreate)
	return pv, nil
}

// restore puts the original reclaim policy on the replacement, and drops
// our finalizer should the replacement carry it (a rollback of a migration
// that stopped after hold finds the legacy PV held), in one patch guarded
// by the resourceVersion.
func (e *Engine) restore(ctx context.Context, r Replacement, live *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
	want := r.Original.Spec.PersistentVolumeReclaimPolicy
	if want == "" {
		want = corev1.PersistentVolumeReclaimDelete
	}
	held := slices.Contains(live.Finalizers, contract.FinalizerMigration)
	if live.Spec.PersistentVolumeReclaimPolicy == want && !held {
		return live, nil
	}
	meta := map[string]any{"resourceVersion": live.ResourceVersion}
	if held {
		meta["finalizers"] = slices.DeleteFunc(slices.Clone(live.Finalizers), func(f string) bool { return f == contract.FinalizerMigration })
	}
	patch, _ := json.Marshal(map[string]any{"metadata": meta, "spec": map[string]any{"persistentVolumeReclaimPolicy": want}})
	out, err := e.Client.CoreV1().PersistentVolumes().Patch(ctx, live.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return nil, wrapStale(fmt.Sprintf("PV %s: restore reclaim policy %s", live.Name, want), err)
	}
	e.after(live.Name, StepRestore)
	return out, nil
}

// confirm waits until the PV controller has the PV and the claim Bound to
// each other. A claim it marked Lost while the PV was absent (its periodic
// resync fell into the gap) is nudged with an annotation: the update makes
// the controller sync it at once, and it binds it again (same UID).
func (e *Engine) confirm(ctx context.Context, pv *corev1.PersistentVolume, ref *corev1.ObjectReference) error {
	name := pv.Name
	interval := e.PollInterval
	if interval <= 0 {
		interval = 100 * time.Millisecond
	}
	timeout := e.BoundTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nudged := false
	var last string
	// The PV as the last write returned it saves a GET when the PV
	// controller was quicker than us.
	var err error
	for {
		if pv == nil {
			pv, err = e.get(ctx, name)
		}
		if err == nil && pv != nil && pv.Status.Phase == corev1.VolumeBound {
			claim, cerr := e.Client.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			switch {
			case cerr != nil:
				last = fmt.Sprintf("claim %s/%s: %v", ref.Namespace, ref.Name, cerr)
			case claim.UID != ref.UID:
				return fmt.Errorf("PV %s: claim %s/%s has uid %s, not %s: the claim was deleted and re-created", name, ref.Namespace, ref.Name, claim.UID, ref.UID)
			case claim.Spec.VolumeName != name:
				return fmt.Errorf("PV %s: claim %s/%s names volume %q", name, ref.Namespace, ref.Name, claim.Spec.VolumeName)
			case claim.Status.Phase == corev1.ClaimBound:
				return nil
			case claim.Status.Phase == corev1.ClaimLost && !nudged:
				if err := e.nudge(ctx, claim, pv); err != nil {
					return err
				}
				nudged = true
			default:
				last = fmt.Sprintf("claim %s/%s is %s", ref.Namespace, ref.Name, claim.Status.Phase)
			}
		} else if err == nil && pv != nil {
			last = fmt.Sprintf("PV is %q", pv.Status.Phase)
		} else if err == nil {
			last = "PV is gone"
		} else {
			last = err.Error()
		}
		pv = nil
		select {
		case <-ctx.Done():
			return fmt.Errorf("PV %s: not Bound to claim %s/%s within %s (%s); rerun to keep waiting", name, ref.Namespace, ref.Name, timeout, last)
		case <-time.After(interval):
		}
	}
}

func (e *Engine) nudge(ctx context.Context, claim *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{contract.AnnRebind: pv.Name + "/" + string(pv.UID)}}})
	_, err := e.Client.CoreV1().PersistentVolumeClaims(claim.Namespace).Patch(ctx, claim.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("claim %s/%s: annotate to rebind: %w", claim.Namespace, claim.Name, err)
	}
	return nil
}

func refString(ref *corev1.ObjectReference) string {
	if ref == nil {
		return "empty"
	}
	return fmt.Sprintf("claim %s/%s (uid %s)", ref.Namespace, ref.Name, ref.UID)
}

// ErrNotLegacy is returned for a PV that is not a legacy hostPath PV.
var ErrNotLegacy = errors.New("not a legacy hostPath PV")
