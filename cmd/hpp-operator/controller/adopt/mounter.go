package adopt

import (
	"path"
	"strings"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
)

// MounterOrigin tells which pool, pool path and node a mounter Deployment
// serves: from the annotations hpp writes, or, for a mounter the upstream
// operator made (taken over with its CR), from what upstream put in it:
// the pool in its pods' hpp-pool label, the node in its node affinity
// (hostname label or metadata.name), the path in the mounter's --mountPath.
// Without them, a retired upstream mounter would never get its cleanup Job.
func MounterOrigin(d *appsv1.Deployment) (pool, poolPath, node string) {
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
