package controller

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// UpstreamFieldManager is the field manager of the objects the KubeVirt
// hostpath-provisioner-operator wrote. It writes with Create and Update and
// no field owner, so the API server names the manager after its binary
// (/usr/local/bin/hostpath-provisioner-operator in its image).
const UpstreamFieldManager = "hostpath-provisioner-operator"

var upstreamManagers = sets.New(UpstreamFieldManager)

// UpstreamFinalizer is the upstream operator's finalizer on the CR; hpp
// replaces it with its own (Reconcile).
const UpstreamFinalizer = "finalizer.delete.hostpath-provisioner"

// adopt hands the fields the upstream operator owns on live over to hpp's
// field manager. Server-side apply removes only fields its own manager
// stops setting: without this, whatever upstream set and hpp does not
// (its node-driver-registrar and livenessprobe sidecars, env vars, labels,
// volumes) would stay forever, owned by a manager that no longer runs. After
// it, hpp's next apply removes them. client-go's csaupgrade does the
// managedFields surgery (the documented client-side to server-side apply
// migration); the patch carries the resourceVersion, so a concurrent change
// fails it with a conflict and the reconcile retries.
func (a *applier) adopt(ctx context.Context, live client.Object) error {
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(live, upstreamManagers, FieldOwner)
	if err != nil {
		return fmt.Errorf("take over the fields of %s %s from %s: %w", kindOf(a.scheme, live), live.GetName(), UpstreamFieldManager, err)
	}
	if patch == nil {
		return nil
	}
	if err := a.writer.Patch(ctx, live, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		return fmt.Errorf("take over the fields of %s %s from %s: %w", kindOf(a.scheme, live), live.GetName(), UpstreamFieldManager, err)
	}
	return nil
}

// immutableFields are the fields of a kind the API server refuses to
// change once the object exists.
var immutableFields = map[schema.GroupKind][][]string{
	{Group: "storage.k8s.io", Kind: "CSIDriver"}: {{"spec", "attachRequired"}, {"spec", "volumeLifecycleModes"}},
}

// keepImmutable sets in desired the live values of immutable fields that
// differ, and returns their paths. The upstream operator's CSIDriver has
// volumeLifecycleModes [Persistent], hpp's adds Ephemeral: applying would
// fail on every reconcile, and replacing the object is worse than the
// missing mode: while a CSIDriver is absent kubelet treats the driver as
// needing attachment, so pods starting meanwhile hang. The volumes that
// exist keep working; the reconciler reports what was kept (an event) and
// the README says how to get the new values (delete the CSIDriver while no
// pod uses the driver; the operator recreates it).
func keepImmutable(desired *unstructured.Unstructured, live map[string]any) []string {
	var kept []string
	for _, f := range immutableFields[desired.GroupVersionKind().GroupKind()] {
		lv, found, err := unstructured.NestedFieldNoCopy(live, f...)
		if err != nil || !found {
			continue
		}
		dv, _, _ := unstructured.NestedFieldNoCopy(desired.Object, f...)
		if reflect.DeepEqual(lv, dv) || fmt.Sprint(lv) == fmt.Sprint(dv) {
			continue
		}
		if err := unstructured.SetNestedField(desired.Object, runtime.DeepCopyJSONValue(lv), f...); err != nil {
			continue // not a JSON value: apply as desired and let the API server say why
		}
		kept = append(kept, strings.Join(f, "."))
	}
	return kept
}

func kindOf(s *runtime.Scheme, obj client.Object) string {
	if gvks, _, err := s.ObjectKinds(obj); err == nil {
		return gvks[0].Kind
	}
	return fmt.Sprintf("%T", obj)
}
