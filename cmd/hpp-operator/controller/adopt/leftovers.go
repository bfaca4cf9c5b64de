package adopt

import (
	"context"
	"fmt"

	secv1 "github.com/openshift/api/security/v1"
	promv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
)

// UpstreamManagedBy is the managed-by label value upstream's operator puts
// on everything it makes (util.GetRecommendedLabels).
const UpstreamManagedBy = "hostpath-provisioner-operator"

// Leftovers finds what upstream's operator made for a CR and hpp does not
// make: objects the CR controls that still carry upstream's managed-by
// label (everything hpp applies gets its own) and are not among the
// objects hpp wants. Without their removal they would stay, owned by a CR
// whose operator no longer renders them, until the CR goes. Pool claims,
// mounters and Jobs are not listed here: a claim holds data and is never
// deleted, and mounters are retired with their cleanup Job. Upstream's
// operator, taking the cluster back, makes again whatever it needs.
type Leftovers struct {
	// Cache lists the namespaced kinds.
	Cache client.Reader
	// Live lists the cluster-scoped kinds from the API server (the cache
	// holds them with hpp's label only); nil: they are not looked at.
	Live      client.Reader
	Scheme    *runtime.Scheme
	Namespace string
	// PrometheusOperator, OpenShift: render.Config's, the optional kinds.
	PrometheusOperator bool
	OpenShift          bool
}

// leftoverList is one kind to look for upstream's leftovers in.
type leftoverList struct {
	list   client.ObjectList
	reader client.Reader
	opts   []client.ListOption
}

// Find returns the leftovers of cr: what it controls with upstream's label
// and is not in want.
func (l Leftovers) Find(ctx context.Context, cr metav1.Object, want []client.Object) ([]client.Object, error) {
	wanted := map[string]bool{}
	for _, o := range want {
		wanted[KindOf(l.Scheme, o)+"/"+o.GetName()] = true
	}
	upstream := client.MatchingLabels{render.ManagedByLabel: UpstreamManagedBy}
	ns := client.InNamespace(l.Namespace)
	lists := []leftoverList{
		{&appsv1.DaemonSetList{}, l.Cache, []client.ListOption{ns, upstream}},
		{&corev1.ServiceAccountList{}, l.Cache, []client.ListOption{ns, upstream}},
		{&corev1.ServiceList{}, l.Cache, []client.ListOption{ns, upstream}},
		{&rbacv1.RoleList{}, l.Cache, []client.ListOption{ns, upstream}},
		{&rbacv1.RoleBindingList{}, l.Cache, []client.ListOption{ns, upstream}},
	}
	if l.Live != nil {
		lists = append(lists,
			leftoverList{&rbacv1.ClusterRoleList{}, l.Live, []client.ListOption{upstream}},
			leftoverList{&rbacv1.ClusterRoleBindingList{}, l.Live, []client.ListOption{upstream}})
	}
	if l.PrometheusOperator {
		lists = append(lists,
			leftoverList{&promv1.ServiceMonitorList{}, l.Cache, []client.ListOption{ns, upstream}},
			leftoverList{&promv1.PrometheusRuleList{}, l.Cache, []client.ListOption{ns, upstream}})
	}
	if l.OpenShift && l.Live != nil {
		lists = append(lists, leftoverList{&secv1.SecurityContextConstraintsList{}, l.Live, []client.ListOption{upstream}})
	}
	var out []client.Object
	for _, ll := range lists {
		if err := ll.reader.List(ctx, ll.list, ll.opts...); err != nil {
			return nil, fmt.Errorf("list what upstream's operator left: %w", err)
		}
		items, err := meta.ExtractList(ll.list)
		if err != nil {
			return nil, err
		}
		for _, item := range items {
			obj, ok := item.(client.Object)
			if !ok || !metav1.IsControlledBy(obj, cr) || wanted[KindOf(l.Scheme, obj)+"/"+obj.GetName()] {
				continue
			}
			out = append(out, obj)
		}
	}
	return out, nil
}
