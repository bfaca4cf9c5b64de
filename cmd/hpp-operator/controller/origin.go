package controller

import (
	"context"
	"path"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// mounterOrigin tells which pool, pool path and node a mounter Deployment
// serves: from the annotations hpp writes, or, for a mounter the upstream
// operator made (taken over with its CR), from what upstream put in it:
// the pool in its pods' hpp-pool label, the node in its node affinity
// (hostname label or metadata.name), the path in the mounter's --mountPath.
// Without them, a retired upstream mounter would never get its cleanup Job.
func mounterOrigin(d *appsv1.Deployment) (pool, poolPath, node string) {
	a := d.Annotations
	if a[render.PoolNameAnnotation] != "" {
		return a[render.PoolNameAnnotation], a[render.PoolPathAnnotation], a[render.NodeAnnotation]
	}
	spec := d.Spec.Template.Spec
	pool = d.Spec.Template.Labels["hpp-pool"]
	if aff := spec.Affinity; aff != nil && aff.NodeAffinity != nil && aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, t := range aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, r := range append(t.MatchFields, t.MatchExpressions...) {
				if (r.Key == "metadata.name" || r.Key == "kubernetes.io/hostname") && len(r.Values) == 1 {
					node = r.Values[0]
				}
			}
		}
	}
	for _, c := range spec.Containers {
		args := append(append([]string{}, c.Command...), c.Args...)
		for i, arg := range args {
			v, ok := strings.CutPrefix(arg, "--mountPath=")
			if !ok && arg == "--mountPath" && i+1 < len(args) {
				v, ok = args[i+1], true
			}
			if ok && path.Base(v) == "csi" {
				poolPath = path.Dir(v)
			}
		}
	}
	return pool, poolPath, node
}

// poolDeployments lists the mounter Deployments the CR controls.
func (r *Reconciler) poolDeployments(ctx context.Context, cr *hppv1.HostPathProvisioner) ([]appsv1.Deployment, error) {
	list := &appsv1.DeploymentList{}
	err := r.Client.List(ctx, list, r.poolObjects()...)
	return controlledBy(list.Items, cr), err
}

// poolObjects selects the namespaced objects of pvcTemplate pools.
func (r *Reconciler) poolObjects() []client.ListOption {
	return []client.ListOption{client.InNamespace(r.Config.Namespace), client.HasLabels{contract.PoolLabel}}
}

// controlledBy keeps the items the owner controls.
func controlledBy[T any, P interface {
	*T
	metav1.Object
}](items []T, owner metav1.Object) []T {
	out := items[:0]
	for i := range items {
		if metav1.IsControlledBy(P(&items[i]), owner) {
			out = append(out, items[i])
		}
	}
	return out
}
