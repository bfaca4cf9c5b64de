package adopt

import (
	"encoding/json"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func workload(kind string, selector, podLabels map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": kind,
		"spec": map[string]any{
			"selector": map[string]any{"matchLabels": selector},
			"template": map[string]any{"metadata": map[string]any{"labels": podLabels}},
		},
	}}
}

// A live workload's selector is kept and its labels added to the pods'
// (they must match it); a workload with hpp's selector is left alone.
func TestKeepLiveSelector(t *testing.T) {
	desired := workload("DaemonSet", map[string]any{"k8s-app": "hostpath-provisioner-csi"},
		map[string]any{"k8s-app": "hostpath-provisioner-csi", "app.kubernetes.io/part-of": "hostpath-provisioner"})
	live := workload("DaemonSet", map[string]any{"k8s-app": "hostpath-provisioner"}, nil).Object
	if kept := keepLiveSelector(desired, live); !reflect.DeepEqual(kept, []string{"spec.selector"}) {
		t.Fatalf("kept %v", kept)
	}
	sel, _, _ := unstructured.NestedStringMap(desired.Object, "spec", "selector", "matchLabels")
	pods, _, _ := unstructured.NestedStringMap(desired.Object, "spec", "template", "metadata", "labels")
	if !reflect.DeepEqual(sel, map[string]string{"k8s-app": "hostpath-provisioner"}) ||
		!reflect.DeepEqual(pods, map[string]string{"k8s-app": "hostpath-provisioner", "app.kubernetes.io/part-of": "hostpath-provisioner"}) {
		t.Errorf("selector %v pod labels %v", sel, pods)
	}
	same := workload("Deployment", map[string]any{"hpp-pool": "fast"}, map[string]any{"hpp-pool": "fast"})
	if kept := keepLiveSelector(same, workload("Deployment", map[string]any{"hpp-pool": "fast"}, nil).Object); kept != nil {
		t.Errorf("same selector: kept %v", kept)
	}
	other := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service",
		"spec": map[string]any{"selector": map[string]any{"a": "b"}}}}
	if kept := keepLiveSelector(other, map[string]any{"spec": map[string]any{"selector": map[string]any{"c": "d"}}}); kept != nil {
		t.Errorf("a Service's selector is not immutable: kept %v", kept)
	}
}

// maxUnavailable is the user's when a manager other than hpp's and
// upstream's operator set it.
func TestSetByUser(t *testing.T) {
	field := []string{"spec", "updateStrategy", "rollingUpdate", "maxUnavailable"}
	owns := func(manager string) metav1.ManagedFieldsEntry {
		raw, _ := json.Marshal(map[string]any{"f:spec": map[string]any{"f:updateStrategy": map[string]any{
			"f:rollingUpdate": map[string]any{"f:maxUnavailable": map[string]any{}}}}})
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: metav1.NewFieldsV1(string(raw))}
	}
	for _, c := range []struct {
		managers []metav1.ManagedFieldsEntry
		want     bool
	}{
		{[]metav1.ManagedFieldsEntry{owns(FieldOwner)}, false},
		{[]metav1.ManagedFieldsEntry{owns(UpstreamFieldManager)}, false},
		{[]metav1.ManagedFieldsEntry{owns(FieldOwner), owns("kubectl-edit")}, true},
		{nil, false},
	} {
		if got := setByUser(c.managers, field); got != c.want {
			t.Errorf("managers %v: setByUser %v, want %v", c.managers, got, c.want)
		}
	}
}

// The last-applied annotation holds the object applied, without itself.
func TestSetLastApplied(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ServiceAccount",
		"metadata": map[string]any{"name": "sa", "annotations": map[string]any{LastAppliedAnnotation: "stale"}}}}
	if err := SetLastApplied(u); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(u.GetAnnotations()[LastAppliedAnnotation]), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "sa", "annotations": map[string]any{}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("last applied %v, want %v", got, want)
	}
}
