package takeover

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/csaupgrade"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/manifests"
)

// CSIDaemonSetName is the CSI driver's DaemonSet, upstream's and hpp's.
const CSIDaemonSetName = "hostpath-provisioner-csi"

// Runner performs the switch and the way back, printing progress.
type Runner struct {
	Client    dynamic.Interface
	Namespace string
	Out       io.Writer
	// Timeout bounds each wait (operator Available, pods rolled).
	Timeout time.Duration
	// Interval between polls; 1 s when zero.
	Interval time.Duration
	start    time.Time
	// changes counts the writes this run made: none means the cluster
	// was already where the command takes it.
	changes int
}

func (r *Runner) say(format string, args ...any) {
	if r.start.IsZero() {
		r.start = time.Now()
	}
	fmt.Fprintf(r.Out, "[%6.1fs] %s\n", time.Since(r.start).Seconds(), fmt.Sprintf(format, args...))
}

// did reports a write this run made.
func (r *Runner) did(format string, args ...any) {
	r.changes++
	r.say("      "+format, args...)
}

func (r *Runner) res(res Resource) dynamic.ResourceInterface {
	if res.Namespaced {
		return r.Client.Resource(res.GVR).Namespace(r.Namespace)
	}
	return r.Client.Resource(res.GVR)
}

func (r *Runner) resOf(o *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	res, err := ResourceOf(o.GetAPIVersion(), o.GetKind())
	if err != nil {
		return nil, err
	}
	return r.res(res), nil
}

func (r *Runner) get(res Resource, name string) (*unstructured.Unstructured, error) {
	return r.getFrom(context.TODO(), r.res(res), name)
}

// getFrom is the named object, or nil when there is none.
func (r *Runner) getFrom(ctx context.Context, ri dynamic.ResourceInterface, name string) (*unstructured.Unstructured, error) {
	o, err := ri.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return o, err
}

// Switch performs the takeover the plan describes; every step checks
// the cluster first, so a second run finishes what an interrupted one
// began and a run after a complete switch changes nothing.
func (r *Runner) Switch(ctx context.Context, inv *Inventory, plan *Plan) error {
	if !plan.Go() {
		return fmt.Errorf("the plan says no-go: %v", plan.NoGo)
	}
	want := inv.Manifest("Deployment", OperatorName)
	if want == nil {
		return fmt.Errorf("the manifests hold no Deployment %s: pipe in hpp's operator install (kubectl kustomize deploy/overlays/operator)", OperatorName)
	}
	r.say("1/7 backing up upstream's install objects into Secret %s/%s (for --back)", r.Namespace, BackupSecret)
	if err := r.backup(ctx, inv); err != nil {
		return err
	}
	r.say("2/7 stopping upstream's operator")
	if live := inv.Get("Deployment", r.Namespace, OperatorName); live != nil && !sameSelector(live, want) {
		if err := r.deleteAndWait(ctx, rDeployment, live); err != nil {
			return err
		}
	}
	if err := r.waitUpstreamOperatorGone(ctx, want); err != nil {
		return err
	}
	r.say("3/7 removing upstream's webhook (configuration, Service, Secret, cert-manager objects)")
	if live, m := inv.Get("ValidatingWebhookConfiguration", "", WebhookConfigName), inv.Manifest("ValidatingWebhookConfiguration", WebhookConfigName); live != nil && isUpstreams(live) && (m == nil || !sameWebhooks(live, m)) {
		if err := r.delete(ctx, rVWC, WebhookConfigName); err != nil {
			return err
		}
	}
	for _, it := range plan.Items {
		if it.Action != Removed {
			continue
		}
		res, err := resourceByKind(it.Kind)
		if err != nil {
			return err
		}
		if err := r.delete(ctx, res, it.Name); err != nil {
			return err
		}
	}
	r.say("4/7 handing kubectl create's fields over to %q (server-side apply)", ApplyManager)
	for _, m := range inv.Manifests {
		if live := inv.Get(m.GetKind(), m.GetNamespace(), m.GetName()); live != nil {
			if err := r.handOver(ctx, live); err != nil {
				return err
			}
		}
	}
	r.say("5/7 applying hpp's install (%d objects, server-side, forced)", len(inv.Manifests))
	if err := r.applyAll(ctx, inv.Manifests); err != nil {
		return err
	}
	r.say("6/7 waiting for hpp's operator")
	if err := r.waitAvailable(ctx, OperatorName); err != nil {
		return err
	}
	r.say("7/7 waiting for hpp's operator to roll the node pods and report the CR Available")
	if err := r.waitRolled(ctx, envOf(want, "CSI_PROVISIONER_IMAGE"), envOf(want, "MOUNTER_IMAGE")); err != nil {
		return err
	}
	if r.changes == 0 {
		r.say("already switched: hpp's operator runs %s and its install is applied; nothing changed", r.Namespace)
		return nil
	}
	r.say("switched: hpp's operator runs %s; `hpp-migrate takeover --back` returns to upstream's", r.Namespace)
	return nil
}

func resourceByKind(kind string) (Resource, error) {
	for _, r := range append(slices.Clone(manifestResources), Resources...) {
		if r.Kind == kind {
			return r, nil
		}
	}
	return Resource{}, fmt.Errorf("kind %s: unknown", kind)
}

// handOver moves the fields upstream's Update managers own to
// ApplyManager, so the forced apply then owns them and drops what hpp's
// manifest does not set (client-go's csaupgrade, as kubectl's own
// client- to server-side apply migration). The patch carries the
// resourceVersion: a concurrent change fails it.
func (r *Runner) handOver(ctx context.Context, live *unstructured.Unstructured) error {
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(live, sets.New(append(slices.Clone(upstreamUpdateManagers), UpstreamOperatorManager)...), ApplyManager)
	if err != nil || patch == nil {
		return err
	}
	ri, err := r.resOf(live)
	if err != nil {
		return err
	}
	_, err = ri.Patch(ctx, live.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		// Removed since the inventory was read (upstream's operator
		// Deployment and webhook, by steps 2 and 3): nothing to hand over.
		return nil
	}
	if err != nil {
		return fmt.Errorf("hand the fields of %s over to %s: %w", refOf(live), ApplyManager, err)
	}
	return nil
}

// applyAll applies objs server-side with force: the Namespace and CRD
// first (then waits until the CRD is established), the webhook
// configuration last.
func (r *Runner) applyAll(ctx context.Context, objs []*unstructured.Unstructured) error {
	rank := func(o *unstructured.Unstructured) int {
		switch o.GetKind() {
		case "Namespace":
			return 0
		case "CustomResourceDefinition":
			return 1
		case "ValidatingWebhookConfiguration":
			return 3
		}
		return 2
	}
	ordered := slices.Clone(objs)
	slices.SortStableFunc(ordered, func(a, b *unstructured.Unstructured) int { return rank(a) - rank(b) })
	for _, o := range ordered {
		ri, err := r.resOf(o)
		if err != nil {
			return err
		}
		live, err := r.getFrom(ctx, ri, o.GetName())
		if err != nil {
			return fmt.Errorf("read %s: %w", refOf(o), err)
		}
		o, err = stamped(o)
		if err != nil {
			return err
		}
		if live != nil && manifests.Holds(live.Object, o.Object) {
			continue // this very manifest was applied and nothing changed since: no write
		}
		data, err := json.Marshal(o.Object)
		if err != nil {
			return err
		}
		if _, err := ri.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: ApplyManager, Force: ptrTrue()}); err != nil {
			return fmt.Errorf("apply %s: %w", refOf(o), err)
		}
		r.did("applied %s", refOf(o))
		if o.GetKind() == "CustomResourceDefinition" {
			if err := r.waitEstablished(ctx, o.GetName()); err != nil {
				return err
			}
		}
	}
	return nil
}

// stamped is a copy of manifest m carrying AnnTakeoverApplied, the digest
// of m: the annotation arrives with the forced apply itself, so it says
// that this very manifest was applied in full (fields upstream set that
// hpp's manifest does not were dropped), which the hand-over of step 4
// alone, or another manifest, cannot say.
func stamped(m *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(m.Object)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	out := m.DeepCopy()
	ann := out.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[contract.AnnTakeoverApplied] = hex.EncodeToString(sum[:16])
	out.SetAnnotations(ann)
	return out, nil
}

func ptrTrue() *bool { b := true; return &b }

func (r *Runner) delete(ctx context.Context, res Resource, name string) error {
	err := r.res(res).Delete(ctx, name, metav1.DeleteOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("delete %s %s: %w", res.Kind, name, err)
	}
	r.did("deleted %s %s", res.Kind, name)
	return nil
}

// deleteAndWait deletes live (only that object: a precondition on its
// uid) and waits until it is gone.
func (r *Runner) deleteAndWait(ctx context.Context, res Resource, live *unstructured.Unstructured) error {
	uid := live.GetUID()
	fg := metav1.DeletePropagationForeground
	err := r.res(res).Delete(ctx, live.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &fg})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete %s: %w", refOf(live), err)
	}
	r.did("deleted %s", refOf(live))
	return r.poll(ctx, refOf(live).String()+" gone", func() (bool, string, error) {
		o, err := r.get(res, live.GetName())
		return o == nil || o.GetUID() != uid, "still there", err
	})
}

// pollRoll polls cond while the node pods roll, four times as often as
// poll, first removing the CSI pods that are stopping (hurry.go): the new
// driver pod of a node then starts within a quarter second.
func (r *Runner) pollRoll(ctx context.Context, what string, cond func() (bool, string, error)) error {
	return r.pollEvery(ctx, r.interval()/4, what, func() (bool, string, error) {
		if err := r.hurryOldDriverPods(ctx); err != nil {
			return false, "", err
		}
		return cond()
	})
}

func (r *Runner) interval() time.Duration {
	if r.Interval == 0 {
		return time.Second
	}
	return r.Interval
}

// poll calls cond every Interval until it is done, printing its state
// whenever it changes, for at most Timeout.
func (r *Runner) poll(ctx context.Context, what string, cond func() (bool, string, error)) error {
	return r.pollEvery(ctx, r.interval(), what, cond)
}

func (r *Runner) pollEvery(ctx context.Context, interval time.Duration, what string, cond func() (bool, string, error)) error {
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	last := ""
	for {
		done, state, err := cond()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if done {
			return nil
		}
		if state != last {
			r.say("      waiting for %s: %s", what, state)
			last = state
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not after %s: %s", what, r.Timeout, state)
		case <-time.After(interval):
		}
	}
}
