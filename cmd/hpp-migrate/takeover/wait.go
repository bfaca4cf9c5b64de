package takeover

import (
	"context"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

func condition(o *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return fmt.Sprint(m["status"])
		}
	}
	return ""
}

func (r *Runner) waitEstablished(ctx context.Context, name string) error {
	return r.poll(ctx, "CRD "+name+" established", func() (bool, string, error) {
		o, err := r.get(rCRD, name)
		if err != nil || o == nil {
			return false, "absent", err
		}
		return condition(o, "Established") == "True", "not established", nil
	})
}

// waitAvailable waits for an operator Deployment; the operator may begin
// to roll the node pods before it reports Available, so the wait hurries
// their stop already.
func (r *Runner) waitAvailable(ctx context.Context, name string) error {
	return r.pollRoll(ctx, "Deployment "+name+" Available", func() (bool, string, error) {
		o, err := r.get(rDeployment, name)
		if err != nil || o == nil {
			return false, "absent", err
		}
		gen, _, _ := unstructured.NestedInt64(o.Object, "status", "observedGeneration")
		updated, _, _ := unstructured.NestedInt64(o.Object, "status", "updatedReplicas")
		avail, _, _ := unstructured.NestedInt64(o.Object, "status", "availableReplicas")
		want, _, _ := unstructured.NestedInt64(o.Object, "spec", "replicas")
		state := fmt.Sprintf("%d/%d updated, %d available", updated, want, avail)
		return gen >= o.GetGeneration() && updated == want && avail == want && condition(o, "Available") == "True", state, nil
	})
}

// waitUpstreamOperatorGone waits until no pod of upstream's operator is
// left. hpp's operator pods carry upstream's `name` label too (deploy/
// keeps it for upstream's NetworkPolicies and metrics Service), so the
// label alone also counts hpp's own pod once a switch has got that far
// and is run again; what tells them apart is the selector of hpp's
// operator Deployment, which upstream's pods do not match.
func (r *Runner) waitUpstreamOperatorGone(ctx context.Context, hpps *unstructured.Unstructured) error {
	hppPods := labels.Nothing()
	if m, found, _ := unstructured.NestedMap(hpps.Object, "spec", "selector"); found {
		var sel metav1.LabelSelector
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &sel); err != nil {
			return fmt.Errorf("the selector of hpp's Deployment %s: %w", OperatorName, err)
		}
		s, err := metav1.LabelSelectorAsSelector(&sel)
		if err != nil {
			return fmt.Errorf("the selector of hpp's Deployment %s: %w", OperatorName, err)
		}
		if !s.Empty() {
			hppPods = s
		}
	}
	return r.poll(ctx, "upstream's operator pods gone", func() (bool, string, error) {
		l, err := r.res(rPod).List(ctx, metav1.ListOptions{LabelSelector: "name=" + OperatorName})
		if err != nil {
			return false, "", err
		}
		var upstreams []string
		for i := range l.Items {
			if !hppPods.Matches(labels.Set(l.Items[i].GetLabels())) {
				upstreams = append(upstreams, l.Items[i].GetName())
			}
		}
		return len(upstreams) == 0, fmt.Sprintf("%d pods %v", len(upstreams), upstreams), nil
	})
}

// envOf is the value of an env var of the Deployment's first container.
func envOf(dep *unstructured.Unstructured, name string) string {
	ctrs, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	for _, c := range ctrs {
		cm, _ := c.(map[string]any)
		env, _, _ := unstructured.NestedSlice(cm, "env")
		for _, e := range env {
			em, _ := e.(map[string]any)
			if em["name"] == name {
				v, _ := em["value"].(string)
				return v
			}
		}
	}
	return ""
}

func images(o *unstructured.Unstructured) []string {
	ctrs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	var out []string
	for _, c := range ctrs {
		cm, _ := c.(map[string]any)
		out = append(out, fmt.Sprint(cm["image"]))
	}
	return out
}

// waitRolled waits until the CSI DaemonSet and every pool mounter
// Deployment run the operator's images on all their pods, and the CR is
// Available: the operator has taken over the node pods.
func (r *Runner) waitRolled(ctx context.Context, driverImage, mounterImage string) error {
	return r.pollRoll(ctx, "node pods rolled and the CR Available", func() (bool, string, error) {
		var pending []string
		ds, err := r.get(rDaemonSet, CSIDaemonSetName)
		if err != nil {
			return false, "", err
		}
		switch {
		case ds == nil:
			pending = append(pending, "DaemonSet "+CSIDaemonSetName+" absent")
		case driverImage != "" && !slices.Contains(images(ds), driverImage):
			pending = append(pending, "DaemonSet "+CSIDaemonSetName+" not on "+driverImage+" yet")
		default:
			gen, _, _ := unstructured.NestedInt64(ds.Object, "status", "observedGeneration")
			desired, _, _ := unstructured.NestedInt64(ds.Object, "status", "desiredNumberScheduled")
			updated, _, _ := unstructured.NestedInt64(ds.Object, "status", "updatedNumberScheduled")
			avail, _, _ := unstructured.NestedInt64(ds.Object, "status", "numberAvailable")
			if gen < ds.GetGeneration() || updated != desired || avail != desired {
				pending = append(pending, fmt.Sprintf("DaemonSet %s: %d/%d nodes updated, %d available", CSIDaemonSetName, updated, desired, avail))
			}
		}
		deps, err := r.res(rDeployment).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		for i := range deps.Items {
			d := &deps.Items[i]
			if !strings.HasPrefix(d.GetName(), mounterPrefix) {
				continue
			}
			updated, _, _ := unstructured.NestedInt64(d.Object, "status", "updatedReplicas")
			avail, _, _ := unstructured.NestedInt64(d.Object, "status", "availableReplicas")
			replicas, _, _ := unstructured.NestedInt64(d.Object, "status", "replicas")
			if (mounterImage != "" && !slices.Contains(images(d), mounterImage)) || updated < 1 || avail < 1 || replicas != updated {
				pending = append(pending, "mounter "+d.GetName()+" rolling")
			}
		}
		crs, err := r.Client.Resource(rCR.GVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		for i := range crs.Items {
			if c := condition(&crs.Items[i], "Available"); c != "True" {
				pending = append(pending, "HostPathProvisioner "+crs.Items[i].GetName()+" Available="+c)
			}
		}
		return len(pending) == 0, strings.Join(pending, "; "), nil
	})
}
