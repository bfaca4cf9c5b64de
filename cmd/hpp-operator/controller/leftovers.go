package controller

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
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
)

// UpstreamManagedBy is the managed-by label value upstream's operator puts
// on everything it makes (util.GetRecommendedLabels).
const UpstreamManagedBy = "hostpath-provisioner-operator"

// removeUpstreamLeftovers deletes what upstream's operator made for the CR
// and hpp does not make: objects the CR controls that still carry
// upstream's managed-by label (everything hpp applies gets its own) and
// are not among the objects of this pass. Without this they would stay,
// owned by a CR whose operator no longer renders them, until the CR goes.
// Pool claims, mounters and Jobs are not listed here: a claim holds data
// and is never deleted, and mounters are retired with their cleanup Job
// (pools.go). Upstream's operator, taking the cluster back, makes again
// whatever it needs.
func (r *Reconciler) removeUpstreamLeftovers(ctx context.Context, p *pass) error {
	wanted := map[string]bool{}
	for _, o := range p.want {
		wanted[kindOf(r.Scheme, o)+"/"+o.GetName()] = true
	}
	upstream := client.MatchingLabels{render.ManagedByLabel: UpstreamManagedBy}
	ns := client.InNamespace(r.Config.Namespace)
	lists := []leftoverList{
		{&appsv1.DaemonSetList{}, r.Client, []client.ListOption{ns, upstream}},
		{&corev1.ServiceAccountList{}, r.Client, []client.ListOption{ns, upstream}},
		{&corev1.ServiceList{}, r.Client, []client.ListOption{ns, upstream}},
		{&rbacv1.RoleList{}, r.Client, []client.ListOption{ns, upstream}},
		{&rbacv1.RoleBindingList{}, r.Client, []client.ListOption{ns, upstream}},
	}
	// The cache holds cluster-scoped objects with hpp's label only: they
	// are listed from the API server, once per CR and operator start (a
	// takeover leaves them once; the steady state reads only the cache).
	sweepCluster := !r.clusterSwept(p.cr.UID)
	if sweepCluster {
		lists = append(lists,
			leftoverList{&rbacv1.ClusterRoleList{}, r.liveReader(), []client.ListOption{upstream}},
			leftoverList{&rbacv1.ClusterRoleBindingList{}, r.liveReader(), []client.ListOption{upstream}})
	}
	if r.Config.PrometheusOperator {
		lists = append(lists,
			leftoverList{&promv1.ServiceMonitorList{}, r.Client, []client.ListOption{ns, upstream}},
			leftoverList{&promv1.PrometheusRuleList{}, r.Client, []client.ListOption{ns, upstream}})
	}
	if r.Config.OpenShift && sweepCluster {
		lists = append(lists, leftoverList{&secv1.SecurityContextConstraintsList{}, r.liveReader(), []client.ListOption{upstream}})
	}
	for _, l := range lists {
		if err := l.reader.List(ctx, l.list, l.opts...); err != nil {
			return fmt.Errorf("list what upstream's operator left: %w", err)
		}
		items, err := meta.ExtractList(l.list)
		if err != nil {
			return err
		}
		for _, item := range items {
			obj, ok := item.(client.Object)
			if !ok || !metav1.IsControlledBy(obj, p.cr) || wanted[kindOf(r.Scheme, obj)+"/"+obj.GetName()] {
				continue
			}
			if err := r.deleteIfPresent(ctx, p.log, obj); err != nil {
				return err
			}
			r.eventf(p.cr, corev1.EventTypeNormal, "UpstreamObjectRemoved",
				"%s %s was made by upstream's operator and has no counterpart in hpp: deleted", kindOf(r.Scheme, obj), obj.GetName())
		}
	}
	if sweepCluster && r.swept != nil {
		r.swept.Store(p.cr.UID, true)
	}
	return nil
}

func (r *Reconciler) clusterSwept(uid types.UID) bool {
	if r.swept == nil {
		return false
	}
	_, ok := r.swept.Load(uid)
	return ok
}

// leftoverList is one kind to look for upstream's leftovers in.
type leftoverList struct {
	list   client.ObjectList
	reader client.Reader
	opts   []client.ListOption
}

// liveReader reads from the API server (the cache where there is no
// manager: unit tests).
func (r *Reconciler) liveReader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}
