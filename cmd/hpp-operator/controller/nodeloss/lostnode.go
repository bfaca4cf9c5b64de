package nodeloss

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

// lostNode is what the controller remembers of one lost node.
type lostNode struct {
	since    time.Time
	reported map[string]bool // PV names
}

// lostSince is when the node was first seen gone.
func (r *Reconciler) lostSince(node string, now time.Time) time.Time {
	if l := r.lost[node]; l != nil {
		return l.since
	}
	// Whole seconds: the status keeps no more.
	l := &lostNode{since: now.Truncate(time.Second), reported: map[string]bool{}}
	r.lost[node] = l
	return l.since
}

// seed restores, once, what a previous run remembered: the CR status
// holds when each deleted node was first seen gone.
func (r *Reconciler) seed(ctx context.Context) error {
	if r.lost == nil {
		r.lost = map[string]*lostNode{}
	}
	if r.seeded {
		return nil
	}
	crs := &hppv1.HostPathProvisionerList{}
	if err := r.Client.List(ctx, crs); err != nil && !meta.IsNoMatchError(err) {
		return err
	}
	for _, cr := range crs.Items {
		for _, n := range cr.Status.StrandedVolumes {
			if n.Reason != hppv1.StrandedNodeDeleted || r.lost[n.Node] != nil {
				continue
			}
			l := &lostNode{since: n.Since.Time, reported: map[string]bool{}}
			for _, v := range n.Volumes {
				l.reported[v.PersistentVolume] = true
			}
			r.lost[n.Node] = l
		}
	}
	r.seeded = true
	return nil
}

// forgetReturned drops the nodes that are back (or hold no hpp volume any
// more), with an event on the CR for a node that came back.
func (r *Reconciler) forgetReturned(ctx context.Context, w *world) {
	still := map[string]bool{}
	for _, v := range w.volumes {
		if v.decision.stranded || v.state == nodeGone {
			still[v.node] = true
		}
	}
	var crs hppv1.HostPathProvisionerList
	for node, l := range r.lost {
		if still[node] {
			continue
		}
		delete(r.lost, node)
		n := w.nodes[node]
		if n == nil || len(l.reported) == 0 {
			continue
		}
		if crs.Items == nil {
			if err := r.Client.List(ctx, &crs); err != nil {
				r.Log.Error(err, "list HostPathProvisioners")
			}
		}
		for i := range crs.Items {
			r.event(&crs.Items[i], corev1.EventTypeNormal, "NodeBack", "Report", fmt.Sprintf(
				"node %s is back: its %d volume(s) are no longer stranded; nothing was released", node, len(l.reported)))
		}
		r.Log.Info("node back", "node", node, "volumes", len(l.reported))
	}
}
