package controller

import (
	"context"
	"fmt"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// apply returns whether it wrote.
func (a *applier) apply(ctx context.Context, obj client.Object) (bool, error) {
	desired, err := toUnstructured(a.scheme, obj)
	if err != nil {
		return false, err
	}
	live, err := a.get(ctx, desired)
	if err != nil {
		return false, err
	}
	var liveFields map[string]any
	var kept []string
	if live != nil {
		if err := a.adopt(ctx, live); err != nil {
			return false, err
		}
		if err := a.recreateStrategy(ctx, desired, live); err != nil {
			return false, err
		}
		if liveFields, err = runtime.DefaultUnstructuredConverter.ToUnstructured(live); err != nil {
			return false, err
		}
		kept = keepImmutable(desired, liveFields)
		kept = append(kept, keepLiveSelector(desired, liveFields)...)
		keepUserSet(desired, live)
	}
	if err := setLastApplied(desired); err != nil {
		return false, err
	}
	sum, err := digest(desired)
	if err != nil {
		return false, err
	}
	ann := desired.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[hashAnnotation] = sum
	desired.SetAnnotations(ann)

	if live != nil && live.GetAnnotations()[hashAnnotation] == sum && isSubset(desired.Object, liveFields) {
		return false, nil
	}
	if len(kept) > 0 && a.kept != nil {
		a.kept(desired, kept)
	}
	if err := a.writer.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired),
		client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return false, fmt.Errorf("apply %s %s: %w", desired.GetKind(), desired.GetName(), err)
	}
	return true, nil
}

// applyOwned applies obj with the CR as its owner (the CSIDriver excepted:
// it must outlive the CR while PVs of the driver exist, see finalize). A
// DaemonSet or Deployment of another installation keeps its selector
// (takeover.go): it is never deleted and recreated, so its pods roll.
func (r *Reconciler) applyOwned(ctx context.Context, p *pass, a *applier, obj client.Object) error {
	if _, isDriver := obj.(*storagev1.CSIDriver); !isDriver {
		if err := controllerutil.SetControllerReference(p.cr, obj, r.Scheme); err != nil {
			return err
		}
	}
	wrote, err := a.apply(ctx, obj)
	if err != nil {
		p.st.degrade("ApplyFailed", err.Error())
		return err
	}
	if wrote {
		p.log.Info("applied", "kind", obj.GetObjectKind().GroupVersionKind().Kind, "name", obj.GetName())
	}
	return nil
}
