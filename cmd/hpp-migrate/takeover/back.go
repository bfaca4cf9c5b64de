package takeover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// Back returns the namespace to upstream's operator from the backup the
// switch made: hpp's operator and webhook go, upstream's install objects
// are put back as they were (its CRD, RBAC, webhook and operator), hpp's
// finalizer leaves the CR, and once upstream's operator has rolled the
// node pods back, what only hpp made is removed. Pool claims, PVs and the
// node workloads stay throughout: the workloads are put back as upstream's
// operator wrote them before it starts (back_workloads.go says why), and
// it takes them over by name. Every step checks first: a second run
// finishes the first.
func (r *Runner) Back(ctx context.Context) error {
	b, err := r.ReadBackup(ctx)
	if errors.Is(err, errNoBackup) {
		if back, berr := r.upstreamOperatorRuns(); berr != nil || back {
			return berr
		}
	}
	if err != nil {
		return err
	}
	up := b.Find("Deployment", OperatorName)
	if up == nil {
		return fmt.Errorf("backup %s holds no Deployment %s", BackupSecret, OperatorName)
	}
	r.say("1/7 stopping hpp's operator")
	if live, err := r.get(rDeployment, OperatorName); err != nil {
		return err
	} else if live != nil && !sameSelector(live, up) {
		if err := r.deleteAndWait(ctx, rDeployment, live); err != nil {
			return err
		}
	}
	r.say("2/7 removing hpp's webhook configuration and hpp's finalizer from the CR")
	if live, err := r.get(rVWC, WebhookConfigName); err != nil {
		return err
	} else if bw := b.Find("ValidatingWebhookConfiguration", WebhookConfigName); live != nil && (bw == nil || !sameWebhooks(live, bw)) {
		if err := r.delete(ctx, rVWC, WebhookConfigName); err != nil {
			return err
		}
	}
	if err := r.dropFinalizer(ctx); err != nil {
		return err
	}
	r.say("3/7 putting upstream's node workloads back (%d) and waiting for their pods, before its operator starts", len(b.Workloads))
	if err := r.restoreWorkloads(ctx, b.Workloads); err != nil {
		return err
	}
	r.say("4/7 restoring upstream's install objects (%d)", len(b.Objects))
	var deployment, webhook *unstructured.Unstructured
	for _, o := range orderForRestore(b.Objects) {
		switch o.GetKind() {
		case "Deployment":
			deployment = o
			continue
		case "ValidatingWebhookConfiguration":
			webhook = o
			continue
		}
		if err := r.restore(ctx, o); err != nil {
			return err
		}
		if o.GetKind() == "CustomResourceDefinition" {
			if err := r.waitEstablished(ctx, o.GetName()); err != nil {
				return err
			}
			if err := r.clearVersions(ctx); err != nil {
				return err
			}
		}
	}
	if err := r.clearVersions(ctx); err != nil { // the restored CRD is served by now
		return err
	}
	if err := r.restore(ctx, deployment); err != nil {
		return err
	}
	r.say("5/7 waiting for upstream's operator")
	if err := r.waitAvailable(ctx, OperatorName); err != nil {
		return err
	}
	if webhook != nil {
		if err := r.restore(ctx, webhook); err != nil {
			return err
		}
	}
	r.say("6/7 waiting for upstream's operator to roll the node pods and report the CR Available")
	if err := r.waitRolled(ctx, envOf(up, "CSI_PROVISIONER_IMAGE"), envOf(up, "OPERATOR_IMAGE")); err != nil {
		return err
	}
	r.say("7/7 removing what only hpp made")
	if err := r.removeHPPOnly(ctx, b); err != nil {
		return err
	}
	if err := r.delete(ctx, rSecret, BackupSecret); err != nil {
		return err
	}
	r.say("back: upstream's operator runs %s", r.Namespace)
	return nil
}

// upstreamOperatorRuns says whether a way back finished here: the backup
// is gone (its deletion is the way back's last write) and the operator
// Deployment is upstream's again (its selector, upstream's deploy/
// operator.yaml, and not applied or labelled by hpp).
func (r *Runner) upstreamOperatorRuns() (bool, error) {
	live, err := r.get(rDeployment, OperatorName)
	if err != nil || live == nil || madeByHPP(live) {
		return false, err
	}
	sel, _, _ := unstructured.NestedStringMap(live.Object, "spec", "selector", "matchLabels")
	if len(sel) != 1 || sel["name"] != OperatorName {
		return false, nil
	}
	r.say("already back: upstream's operator runs %s and the switch's backup is gone; nothing changed", r.Namespace)
	return true, nil
}

func orderForRestore(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := slices.Clone(objs)
	slices.SortStableFunc(out, func(a, b *unstructured.Unstructured) int {
		return btoi(b.GetKind() == "CustomResourceDefinition") - btoi(a.GetKind() == "CustomResourceDefinition")
	})
	return out
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// restore creates o, or replaces the live object with it (a PUT, as
// `kubectl replace` does, so that fields hpp added go), under upstream's
// install manager, with the managed fields reset to that manager alone.
func (r *Runner) restore(ctx context.Context, o *unstructured.Unstructured) error {
	ri, err := r.resOf(o)
	if err != nil {
		return err
	}
	want := o.DeepCopy()
	live, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if want.GetKind() == "Service" { // addresses are the cluster's to give
			unstructured.RemoveNestedField(want.Object, "spec", "clusterIP")
			unstructured.RemoveNestedField(want.Object, "spec", "clusterIPs")
		}
		if _, err := ri.Create(ctx, want, metav1.CreateOptions{FieldManager: KubectlCreateManager}); err != nil {
			return fmt.Errorf("restore %s: %w", refOf(o), err)
		}
		r.did("created %s", refOf(o))
		return nil
	case err != nil:
		return fmt.Errorf("restore %s: %w", refOf(o), err)
	}
	want.SetResourceVersion(live.GetResourceVersion())
	want.SetManagedFields([]metav1.ManagedFieldsEntry{{}}) // reset: the PUT's manager owns all
	if want.GetKind() == "Service" {
		for _, f := range []string{"clusterIP", "clusterIPs"} {
			if v, found, _ := unstructured.NestedFieldCopy(live.Object, "spec", f); found {
				_ = unstructured.SetNestedField(want.Object, v, "spec", f)
			}
		}
	}
	if _, err := ri.Update(ctx, want, metav1.UpdateOptions{FieldManager: KubectlCreateManager}); err != nil {
		return fmt.Errorf("restore %s: %w", refOf(o), err)
	}
	r.did("replaced %s", refOf(o))
	return nil
}

// dropFinalizer removes hpp's finalizer from every CR: with hpp's
// operator gone nothing would ever remove it, and a CR deletion would
// hang. Upstream's operator adds its own.
func (r *Runner) dropFinalizer(ctx context.Context) error {
	crs, err := r.Client.Resource(rCR.GVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range crs.Items {
		cr := &crs.Items[i]
		fins := cr.GetFinalizers()
		idx := slices.Index(fins, HPPFinalizer)
		if idx < 0 {
			continue
		}
		patch := fmt.Sprintf(`[{"op":"test","path":"/metadata/finalizers/%d","value":%q},{"op":"remove","path":"/metadata/finalizers/%d"}]`, idx, HPPFinalizer, idx)
		if _, err := r.Client.Resource(rCR.GVR).Patch(ctx, cr.GetName(), types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("remove finalizer %s from HostPathProvisioner %s: %w", HPPFinalizer, cr.GetName(), err)
		}
		r.did("removed finalizer %s from HostPathProvisioner %s", HPPFinalizer, cr.GetName())
	}
	return nil
}

// clearVersions drops the CR's status versions hpp wrote (its own
// version scheme): upstream's operator compares them with its own as an
// upgrade, and treats empty ones as a fresh install of itself. Upstream's
// CRD has no status subresource, so the main resource carries them.
func (r *Runner) clearVersions(ctx context.Context) error {
	crs, err := r.Client.Resource(rCR.GVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"observedVersion": nil, "operatorVersion": nil, "targetVersion": nil}})
	for i := range crs.Items {
		cr := &crs.Items[i]
		if _, found, _ := unstructured.NestedString(cr.Object, "status", "observedVersion"); !found {
			continue
		}
		if _, err := r.Client.Resource(rCR.GVR).Patch(ctx, cr.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("clear the status versions of HostPathProvisioner %s: %w", cr.GetName(), err)
		}
		// Until the API server serves the restored CRD, status is still a
		// subresource and the main resource's patch leaves it alone.
		if _, err := r.Client.Resource(rCR.GVR).Patch(ctx, cr.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("clear the status versions of HostPathProvisioner %s: %w", cr.GetName(), err)
		}
		r.did("cleared the status versions hpp wrote on HostPathProvisioner %s", cr.GetName())
	}
	return nil
}

// removeHPPOnly deletes the objects hpp's install applied that upstream's
// has not, and the objects hpp's operator made that upstream's operator
// did not take over (still labelled hpp's, never written by upstream's
// operator). Never a workload (upstream's operator runs the same
// DaemonSets and mounters), a claim, a PV, a StorageClass, the CR or the
// namespace.
func (r *Runner) removeHPPOnly(ctx context.Context, b *Backup) error {
	for _, ref := range b.Applied {
		if ref.Kind == "Namespace" || b.Find(ref.Kind, ref.Name) != nil || b.wasUpstreams(ref.Kind, ref.Name) {
			continue
		}
		res, err := resourceByKind(ref.Kind)
		if err != nil {
			return err
		}
		if err := r.delete(ctx, res, ref.Name); err != nil {
			return err
		}
	}
	// Workloads hpp made stay only where upstream's operator has taken
	// them over by now (the CSI DaemonSet, the pool mounters: it rolled
	// them in step 5, so they carry its field manager); one it never
	// touches is hpp's alone (the csi-resizer Deployment) and goes.
	keep := []string{"Job", "PersistentVolumeClaim", "PersistentVolume", "StorageClass", "HostPathProvisioner", "CSIDriver", "CustomResourceDefinition"}
	for _, res := range Resources {
		if slices.Contains(keep, res.Kind) {
			continue
		}
		l, err := r.res(res).List(ctx, metav1.ListOptions{LabelSelector: ManagedByLabel + "=" + hppManagedBy})
		if err != nil {
			if res.Optional {
				continue
			}
			return fmt.Errorf("list %s: %w", res.GVR.Resource, err)
		}
		for i := range l.Items {
			name := l.Items[i].GetName()
			if hasManager(&l.Items[i], UpstreamOperatorManager) || b.Find(res.Kind, name) != nil || b.wasUpstreams(res.Kind, name) {
				continue // upstream's now, restored from the backup, or upstream's before the switch
			}
			if err := r.delete(ctx, res, l.Items[i].GetName()); err != nil {
				return err
			}
		}
	}
	return nil
}
