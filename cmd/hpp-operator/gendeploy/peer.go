package main

import (
	"fmt"
	"path"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
)

// peerDir is the component that turns the peer transport of cross-node
// clones on in the csi-only overlays.
const peerDir = "components/cross-node-clones/"

// peerComponent renders components/cross-node-clones: what the operator's
// render adds with the peer transport (PeerTransport on against off, for
// the same pool), as patches over any csi-only overlay, and the peer
// NetworkPolicy. Lists without a merge key (hpp-csi's args, a
// ClusterRole's rules, an SCC's volumes) take JSON patches that append, so
// the component composes with the sidecars' args patch and the snapshots'
// containers; the rest is a strategic merge patch (merged by port, mount
// path and volume name).
func peerComponent(off render.Config) (map[string][]byte, error) {
	on := off
	on.PeerTransport = true
	offDS, err := off.CSIDaemonSet(exampleSpec())
	if err != nil {
		return nil, err
	}
	onDS, err := on.CSIDaemonSet(exampleSpec())
	if err != nil {
		return nil, err
	}
	offC, onC, err := driverContainers(offDS, onDS)
	if err != nil {
		return nil, err
	}
	merge := &appsv1.DaemonSet{TypeMeta: onDS.TypeMeta}
	merge.Name, merge.Namespace = onDS.Name, onDS.Namespace
	merge.Spec.Template.Spec.Containers = []corev1.Container{{Name: onC.Name,
		Ports: added(offC.Ports, onC.Ports), VolumeMounts: added(offC.VolumeMounts, onC.VolumeMounts)}}
	merge.Spec.Template.Spec.Volumes = added(offDS.Spec.Template.Spec.Volumes, onDS.Spec.Template.Spec.Volumes)

	// A JSON patch addresses a list item by index: hpp-csi is the first
	// container where args.yaml applies (render puts it first, and
	// kustomize's strategic merge of daemonset.yaml, applied just before,
	// puts the containers it names first even where another component
	// added one before it), and the test operation makes kustomize fail
	// rather than give the flags to another container.
	args := append([]map[string]any{{"op": "test", "path": "/spec/template/spec/containers/0/name", "value": onC.Name}},
		appendOps("/spec/template/spec/containers/0/args", added(offC.Args, onC.Args))...)
	rules, err := addedRules(off, on)
	if err != nil {
		return nil, err
	}
	offSCC, onSCC := off.CSISCC(), on.CSISCC()
	scc := append([]map[string]any{{"op": "add", "path": "/allowHostPorts", "value": onSCC.AllowHostPorts}},
		appendOps("/volumes", added(offSCC.Volumes, onSCC.Volumes))...)

	out := map[string][]byte{}
	np, err := render.YAML(header, on.PeerNetworkPolicy())
	if err != nil {
		return nil, err
	}
	out[peerDir+"generated.yaml"] = np
	if out[peerDir+"daemonset.yaml"], err = render.YAML(header, merge); err != nil {
		return nil, err
	}
	for name, ops := range map[string][]map[string]any{"args.yaml": args, "clusterrole.yaml": rules, "scc.yaml": scc} {
		b, err := yaml.Marshal(ops)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[peerDir+name] = append([]byte(header), b...)
	}
	return out, nil
}

// driverContainers are hpp-csi's containers of the two DaemonSets, which
// must differ in nothing but what the component patches.
func driverContainers(off, on *appsv1.DaemonSet) (offC, onC corev1.Container, err error) {
	find := func(ds *appsv1.DaemonSet) (corev1.Container, error) {
		cs := ds.Spec.Template.Spec.Containers
		if len(cs) == 0 || cs[0].Name != render.CSIContainerName {
			return corev1.Container{}, fmt.Errorf("the DaemonSet's first container is not %s: the component's JSON patch would miss it", render.CSIContainerName)
		}
		return cs[0], nil
	}
	if offC, err = find(off); err != nil {
		return offC, onC, err
	}
	if onC, err = find(on); err != nil {
		return offC, onC, err
	}
	return offC, onC, nil
}

// addedRules are the node plugin ClusterRole's rules that the peer
// transport adds, as JSON patch operations on that ClusterRole.
func addedRules(off, on render.Config) ([]map[string]any, error) {
	role := func(c render.Config) ([]rbacv1.PolicyRule, error) {
		objs, err := c.CSIObjects(exampleSpec())
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if cr, ok := o.(*rbacv1.ClusterRole); ok && cr.Name == render.CSIServiceAccount {
				return cr.Rules, nil
			}
		}
		return nil, fmt.Errorf("no ClusterRole %s among the CSI objects", render.CSIServiceAccount)
	}
	offRules, err := role(off)
	if err != nil {
		return nil, err
	}
	onRules, err := role(on)
	if err != nil {
		return nil, err
	}
	if len(onRules) < len(offRules) || !equality.Semantic.DeepEqual(offRules, onRules[:len(offRules)]) {
		return nil, fmt.Errorf("ClusterRole %s: the peer transport changes its rules, not only appends: a JSON patch that appends cannot say so", render.CSIServiceAccount)
	}
	return appendOps("/rules", onRules[len(offRules):]), nil
}

// added are the items of on that off lacks, in on's order.
func added[T any](off, on []T) []T {
	var out []T
	for _, v := range on {
		if !slices.ContainsFunc(off, func(o T) bool { return equality.Semantic.DeepEqual(o, v) }) {
			out = append(out, v)
		}
	}
	return out
}

// appendOps are JSON patch operations appending items to the list at p.
func appendOps[T any](p string, items []T) []map[string]any {
	ops := make([]map[string]any, 0, len(items))
	for _, v := range items {
		ops = append(ops, map[string]any{"op": "add", "path": path.Join(p, "-"), "value": v})
	}
	return ops
}
