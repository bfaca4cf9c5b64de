package takeover

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
)

// simCluster is the API server the kill-point tests run the takeover
// against: a fake dynamic client (its tracker holds the objects) plus
// what the cluster's controllers do that the takeover waits for. Reads
// show every Deployment, DaemonSet and CR rolled out and Available and
// every CRD established; the operator Deployment's pod exists exactly
// while the Deployment does, with its template's labels (hpp's operator
// pods carry upstream's `name` label too, as deploy/ writes them).
// Server-side apply creates or merges. Every write is recorded, and the
// killAt-th one panics with killed after it is done, as a process
// killed right after its request reached the API server.
type simCluster struct {
	t      *testing.T
	client *dynamicfake.FakeDynamicClient
	writes []string
	killAt int
}

// killed is what a simulated kill panics with.
type killed struct{ write string }

func newSimCluster(t *testing.T, objs ...runtime.Object) *simCluster {
	s := &simCluster{t: t, client: fakeClient(objs...)}
	s.client.PrependReactor("*", "*", s.react)
	return s
}

func (s *simCluster) react(action clienttesting.Action) (bool, runtime.Object, error) {
	switch action.GetVerb() {
	case "get", "list":
		return s.read(action)
	case "create", "update", "patch", "delete":
		obj, err := s.write(action)
		s.writes = append(s.writes, describeWrite(action, err))
		if s.killAt > 0 && len(s.writes) == s.killAt {
			panic(killed{s.writes[len(s.writes)-1]})
		}
		return true, obj, err
	}
	return false, nil, nil
}

// describeWrite names a write as the golden lists spell it.
func describeWrite(action clienttesting.Action, err error) string {
	name := ""
	switch a := action.(type) {
	case clienttesting.CreateActionImpl:
		if o, ok := a.GetObject().(*unstructured.Unstructured); ok {
			name = o.GetName()
		}
	case clienttesting.UpdateActionImpl:
		if o, ok := a.GetObject().(*unstructured.Unstructured); ok {
			name = o.GetName()
		}
	case clienttesting.PatchActionImpl:
		name = a.GetName() + " (" + patchKind(a.GetPatchType()) + ")"
	case clienttesting.DeleteActionImpl:
		name = a.GetName()
	}
	res := action.GetResource().Resource
	if sub := action.GetSubresource(); sub != "" {
		res += "/" + sub
	}
	d := fmt.Sprintf("%s %s %s", action.GetVerb(), res, name)
	if err != nil {
		d += ": " + string(apierrors.ReasonForError(err))
	}
	return d
}

func patchKind(pt types.PatchType) string {
	switch pt {
	case types.ApplyPatchType:
		return "apply"
	case types.JSONPatchType:
		return "json"
	case types.MergePatchType:
		return "merge"
	}
	return string(pt)
}

func (s *simCluster) tracker() clienttesting.ObjectTracker { return s.client.Tracker() }

func (s *simCluster) write(action clienttesting.Action) (runtime.Object, error) {
	switch a := action.(type) {
	case clienttesting.PatchActionImpl:
		if a.GetPatchType() == types.ApplyPatchType {
			return s.apply(a)
		}
	case clienttesting.CreateActionImpl:
		recordManager(a.GetObject(), a.CreateOptions.FieldManager)
	case clienttesting.UpdateActionImpl:
		recordManager(a.GetObject(), a.UpdateOptions.FieldManager)
	}
	_, obj, err := clienttesting.ObjectReaction(s.tracker())(action)
	return obj, err
}

// recordManager keeps managedFields as the API server does on a create or
// update: [{}] resets them to the request's manager alone, and a manager
// not yet listed is added.
func recordManager(obj runtime.Object, manager string) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	mfs := u.GetManagedFields()
	entry := metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: u.GetAPIVersion()}
	switch {
	case len(mfs) == 1 && mfs[0].Manager == "":
		mfs = nil
	case manager == "":
		return
	}
	for _, mf := range mfs {
		if mf.Manager == manager && mf.Operation == entry.Operation {
			return
		}
	}
	if manager == "" {
		entry.Manager = "unknown"
	}
	u.SetManagedFields(append(mfs, entry))
}

// apply is server-side apply as far as the takeover relies on it: the
// object made when absent, else the applied fields merged over it, and
// the manager recorded as an Apply manager.
func (s *simCluster) apply(p clienttesting.PatchActionImpl) (runtime.Object, error) {
	gvr, ns, name := p.GetResource(), p.GetNamespace(), p.GetName()
	var applied unstructured.Unstructured
	if err := json.Unmarshal(p.GetPatch(), &applied.Object); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	entry := metav1.ManagedFieldsEntry{Manager: p.GetPatchOptions().FieldManager, Operation: metav1.ManagedFieldsOperationApply, APIVersion: applied.GetAPIVersion(),
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:name":{}}}`)}
	live, err := s.tracker().Get(gvr, ns, name)
	if apierrors.IsNotFound(err) {
		applied.SetManagedFields([]metav1.ManagedFieldsEntry{entry})
		if err := s.tracker().Create(gvr, &applied, ns); err != nil {
			return nil, err
		}
		return s.tracker().Get(gvr, ns, name)
	}
	if err != nil {
		return nil, err
	}
	liveJSON, err := json.Marshal(live)
	if err != nil {
		return nil, err
	}
	merged, err := jsonpatch.MergePatch(liveJSON, p.GetPatch())
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	var out unstructured.Unstructured
	if err := json.Unmarshal(merged, &out.Object); err != nil {
		return nil, err
	}
	mfs := out.GetManagedFields()
	found := false
	for _, mf := range mfs {
		found = found || mf.Manager == entry.Manager && mf.Operation == entry.Operation
	}
	if !found {
		out.SetManagedFields(append(mfs, entry))
	}
	if err := s.tracker().Update(gvr, &out, ns); err != nil {
		return nil, err
	}
	return s.tracker().Get(gvr, ns, name)
}

// read answers from the tracker, with the status the cluster's
// controllers would have written by now, and the operator's pods.
func (s *simCluster) read(action clienttesting.Action) (bool, runtime.Object, error) {
	if action.GetResource() == rPod.GVR {
		return true, s.operatorPods(), nil
	}
	_, obj, err := clienttesting.ObjectReaction(s.tracker())(action)
	if err != nil {
		return true, obj, err
	}
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		settled(o)
	case *unstructured.UnstructuredList:
		for i := range o.Items {
			settled(&o.Items[i])
		}
	}
	return true, obj, nil
}

// settled fills in the status of a rolled-out, Available object.
func settled(o *unstructured.Unstructured) {
	available := []any{map[string]any{"type": "Available", "status": "True"}}
	set := func(v any, path ...string) { _ = unstructured.SetNestedField(o.Object, v, path...) }
	switch o.GetKind() {
	case "Deployment":
		replicas, found, _ := unstructured.NestedInt64(o.Object, "spec", "replicas")
		if !found { // the API server's default
			replicas = 1
			set(replicas, "spec", "replicas")
		}
		set(o.GetGeneration(), "status", "observedGeneration")
		for _, f := range []string{"replicas", "updatedReplicas", "availableReplicas"} {
			set(replicas, "status", f)
		}
		set(available, "status", "conditions")
	case "DaemonSet":
		set(o.GetGeneration(), "status", "observedGeneration")
		for _, f := range []string{"desiredNumberScheduled", "currentNumberScheduled", "updatedNumberScheduled", "numberAvailable"} {
			set(int64(1), "status", f)
		}
	case "HostPathProvisioner":
		set(available, "status", "conditions")
	case "CustomResourceDefinition":
		set([]any{map[string]any{"type": "Established", "status": "True"}}, "status", "conditions")
	}
}

// operatorPods: one pod of the operator Deployment, upstream's or hpp's,
// while it exists.
func (s *simCluster) operatorPods() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "PodList"}}
	dep, err := s.tracker().Get(rDeployment.GVR, ns, OperatorName)
	if err != nil {
		return l
	}
	u := dep.(*unstructured.Unstructured)
	labels, _, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "labels")
	pod := unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod"}}
	pod.SetNamespace(ns)
	pod.SetName(OperatorName + "-pod")
	pod.SetLabels(labels)
	l.Items = append(l.Items, pod)
	return l
}

// state is every object the fake holds, as comparable text: what the
// API server would return, less what it alone sets.
func (s *simCluster) state() map[string]string {
	out := map[string]string{}
	for _, r := range append(Resources, manifestResources...) {
		l, err := s.tracker().List(r.GVR, schema.GroupVersionKind{Group: r.GVR.Group, Version: r.GVR.Version, Kind: r.Kind}, "")
		if err != nil {
			s.t.Fatalf("list %s: %v", r.GVR.Resource, err)
		}
		items, _ := l.(*unstructured.UnstructuredList)
		if items == nil {
			continue
		}
		for i := range items.Items {
			o := items.Items[i].DeepCopy()
			unstructured.RemoveNestedField(o.Object, "metadata", "resourceVersion")
			b, err := json.Marshal(o.Object)
			if err != nil {
				s.t.Fatal(err)
			}
			out[r.Kind+" "+o.GetNamespace()+"/"+o.GetName()] = string(b)
		}
	}
	return out
}

// diffStates lists what differs between two states, one line each.
func diffStates(want, got map[string]string) []string {
	var out []string
	for k, w := range want {
		switch g, ok := got[k]; {
		case !ok:
			out = append(out, k+": missing")
		case g != w:
			out = append(out, fmt.Sprintf("%s:\n      got  %s\n      want %s", k, g, w))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			out = append(out, k+": there, and not after an uninterrupted run")
		}
	}
	sort.Strings(out)
	return out
}

func joinLines(l []string) string { return "\n  " + strings.Join(l, "\n  ") }
