// Package adopt is how hpp takes over what another installation made
// (upstream's KubeVirt operator, an earlier hpp): the fields upstream's
// field manager owns, immutable fields and selectors it set, what a user
// changed since, the last-applied annotation upstream's operator reads when
// it takes the cluster back, what its mounters say about themselves, and the
// objects it made that hpp does not make.
package adopt

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldOwner is hpp's server-side apply field manager: every write of the
// operator's uses it, and adoption hands upstream's fields over to it.
const FieldOwner = "hpp-operator"

// UpstreamFieldManager is the field manager of the objects the KubeVirt
// hostpath-provisioner-operator wrote. It writes with Create and Update and
// no field owner, so the API server names the manager after its binary
// (/usr/local/bin/hostpath-provisioner-operator in its image).
const UpstreamFieldManager = "hostpath-provisioner-operator"

var upstreamManagers = sets.New(UpstreamFieldManager)

// Object makes desired ready to be applied over live, an object that
// exists, whoever made it: the fields upstream's operator owns are handed to
// hpp's field manager, a Deployment moves to the Recreate strategy desired
// asks for, and desired keeps the live values of immutable fields, of a
// live selector and of fields a user set. It returns live as a map and the
// paths of the immutable fields kept (for the caller to report).
func Object(ctx context.Context, w client.Writer, scheme *runtime.Scheme, desired *unstructured.Unstructured, live client.Object) (liveFields map[string]any, kept []string, err error) {
	if err := handOver(ctx, w, scheme, live); err != nil {
		return nil, nil, err
	}
	if err := recreateStrategy(ctx, w, desired, live); err != nil {
		return nil, nil, err
	}
	if liveFields, err = runtime.DefaultUnstructuredConverter.ToUnstructured(live); err != nil {
		return nil, nil, err
	}
	kept = keepImmutable(desired, liveFields)
	kept = append(kept, keepLiveSelector(desired, liveFields)...)
	keepUserSet(desired, live)
	return liveFields, kept, nil
}

// handOver hands the fields the upstream operator owns on live over to hpp's
// field manager. Server-side apply removes only fields its own manager
// stops setting: without this, whatever upstream set and hpp does not
// (its node-driver-registrar and livenessprobe sidecars, env vars, labels,
// volumes) would stay forever, owned by a manager that no longer runs. After
// it, hpp's next apply removes them. client-go's csaupgrade does the
// managedFields surgery (the documented client-side to server-side apply
// migration); the patch carries the resourceVersion, so a concurrent change
// fails it with a conflict and the reconcile retries.
func handOver(ctx context.Context, w client.Writer, scheme *runtime.Scheme, live client.Object) error {
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(live, upstreamManagers, FieldOwner)
	if err != nil {
		return fmt.Errorf("take over the fields of %s %s from %s: %w", KindOf(scheme, live), live.GetName(), UpstreamFieldManager, err)
	}
	if patch == nil {
		return nil
	}
	if err := w.Patch(ctx, live, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		return fmt.Errorf("take over the fields of %s %s from %s: %w", KindOf(scheme, live), live.GetName(), UpstreamFieldManager, err)
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
// exist keep working; the applier reports what was kept (an event) and
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

// KindOf is obj's kind, from the scheme (typed objects carry none).
func KindOf(s *runtime.Scheme, obj client.Object) string {
	if gvks, _, err := s.ObjectKinds(obj); err == nil {
		return gvks[0].Kind
	}
	return fmt.Sprintf("%T", obj)
}

// keepLiveSelector keeps the live selector of a DaemonSet or Deployment
// that another installation (upstream's operator, an earlier hpp) made with
// another one: a selector is immutable, and deleting the object to change
// it stops every pod at once (issue 21: every node's CSI plugin gone, a
// pool's mounter replaced). The pods' template gets the selector's labels,
// as it must to match; the pods then roll as any template change rolls
// them, one node at a time.
func keepLiveSelector(desired *unstructured.Unstructured, live map[string]any) []string {
	if desired.GroupVersionKind().Group != "apps" || (desired.GetKind() != "DaemonSet" && desired.GetKind() != "Deployment") {
		return nil
	}
	ls, found, err := unstructured.NestedMap(live, "spec", "selector")
	if err != nil || !found {
		return nil
	}
	ds, _, _ := unstructured.NestedMap(desired.Object, "spec", "selector")
	if reflect.DeepEqual(ls, ds) {
		return nil
	}
	if err := unstructured.SetNestedMap(desired.Object, ls, "spec", "selector"); err != nil {
		return nil
	}
	match, _, _ := unstructured.NestedStringMap(ls, "matchLabels")
	labels, _, _ := unstructured.NestedStringMap(desired.Object, "spec", "template", "metadata", "labels")
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range match {
		labels[k] = v
	}
	_ = unstructured.SetNestedStringMap(desired.Object, labels, "spec", "template", "metadata", "labels")
	return []string{"spec.selector"}
}

// userFields are fields hpp sets but leaves to a user who changed them on
// the live object: how many nodes a node DaemonSet may roll at once.
var userFields = map[schema.GroupKind][][]string{
	{Group: "apps", Kind: "DaemonSet"}: {{"spec", "updateStrategy", "rollingUpdate", "maxUnavailable"}},
}

// keepUserSet sets in desired the live value of every userFields field
// that a field manager other than hpp's and upstream's operator owns: a
// user's kubectl edit or patch.
func keepUserSet(desired *unstructured.Unstructured, live client.Object) {
	for _, f := range userFields[desired.GroupVersionKind().GroupKind()] {
		if !setByUser(live.GetManagedFields(), f) {
			continue
		}
		liveMap, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
		if err != nil {
			return
		}
		if v, found, err := unstructured.NestedFieldCopy(liveMap, f...); err == nil && found {
			_ = unstructured.SetNestedField(desired.Object, v, f...)
		}
	}
}

// setByUser reports whether a manager other than hpp's and upstream's
// operator owns the field.
func setByUser(managed []metav1.ManagedFieldsEntry, field []string) bool {
	for _, m := range managed {
		if m.Manager == FieldOwner || upstreamManagers.Has(m.Manager) || m.FieldsV1 == nil || m.Subresource != "" {
			continue
		}
		var tree map[string]any
		if json.Unmarshal(m.FieldsV1.GetRawBytes(), &tree) != nil {
			continue
		}
		node, ok := any(tree), true
		for _, k := range field {
			var next map[string]any
			if next, ok = node.(map[string]any); !ok {
				break
			}
			node, ok = next["f:"+k]
			if !ok {
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// LastAppliedAnnotation is where upstream's operator keeps the object it
// last wrote; it three-way merges against it and refuses an object that
// has none ("missing last applied config"). hpp writes it too, with the
// object it applies, so that upstream's operator can take the cluster back
// (issue 21) and moves each object from hpp's values to its own.
const LastAppliedAnnotation = "hostpathprovisioner.kubevirt.io/lastAppliedConfiguration"

// SetLastApplied records desired, as it is applied, in its
// LastAppliedAnnotation.
func SetLastApplied(desired *unstructured.Unstructured) error {
	ann := desired.GetAnnotations() // a copy
	delete(ann, LastAppliedAnnotation)
	desired.SetAnnotations(ann)
	b, err := json.Marshal(desired.Object)
	if err != nil {
		return err
	}
	if ann == nil {
		ann = map[string]string{}
	}
	ann[LastAppliedAnnotation] = string(b)
	desired.SetAnnotations(ann)
	return nil
}

// recreateStrategy moves a live Deployment to the Recreate strategy when
// desired asks for it. Server-side apply cannot: the live rollingUpdate
// parameters (defaulted when another installation created it) belong to
// that installation's field manager, stay, and make Recreate invalid. One
// JSON patch, once, with the resourceVersion (a concurrent change fails it
// and the reconcile retries); the pods are not restarted by it.
func recreateStrategy(ctx context.Context, w client.Writer, desired *unstructured.Unstructured, live client.Object) error {
	d, ok := live.(*appsv1.Deployment)
	if !ok || d.Spec.Strategy.RollingUpdate == nil {
		return nil
	}
	if typ, _, _ := unstructured.NestedString(desired.Object, "spec", "strategy", "type"); typ != string(appsv1.RecreateDeploymentStrategyType) {
		return nil
	}
	patch := fmt.Sprintf(`[{"op":"test","path":"/metadata/resourceVersion","value":%q},{"op":"replace","path":"/spec/strategy","value":{"type":"Recreate"}}]`, d.ResourceVersion)
	if err := w.Patch(ctx, d, client.RawPatch(types.JSONPatchType, []byte(patch))); err != nil {
		return fmt.Errorf("deployment %s: strategy Recreate: %w", d.Name, err)
	}
	return nil
}
