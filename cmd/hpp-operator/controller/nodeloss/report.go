package nodeloss

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

// newStrandedGauge counts, per lost node, the hpp volumes on it. The
// HPPVolumesStranded alert (render/monitoring.go) fires on it.
func newStrandedGauge() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubevirt_hpp_stranded_volumes",
		Help: "hpp volumes (CSI and legacy) whose node was deleted (reason NodeDeleted) or is NotReady past the grace period (reason NodeNotReady)",
	}, []string{"node", "reason"})
}

// registerStrandedGauge adds the gauge to controller-runtime's registry
// and returns the registered one: a second manager in the same process
// (tests start several) shares the first's, as registerReadyGauge does.
func registerStrandedGauge() (*prometheus.GaugeVec, error) {
	g := newStrandedGauge()
	err := metrics.Registry.Register(g)
	if are := (prometheus.AlreadyRegisteredError{}); errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(*prometheus.GaugeVec); ok {
			return existing, nil
		}
	}
	return g, err
}

// maxListedVolumes bounds a node's entry in the CR status (a node with
// thousands of volumes would make the CR too large to store); Count has
// the total.
const maxListedVolumes = 100

// report groups the stranded volumes by node, sorted.
func report(w *world) []hppv1.StrandedNode {
	byNode := map[string]*hppv1.StrandedNode{}
	for _, v := range w.volumes {
		if !v.decision.stranded {
			continue
		}
		n := byNode[v.node]
		if n == nil {
			reason := hppv1.StrandedNodeDeleted
			if v.state == nodeNotReady {
				reason = hppv1.StrandedNodeNotReady
			}
			n = &hppv1.StrandedNode{Node: v.node, Reason: reason, Since: metaTime(v.since)}
			byNode[v.node] = n
		}
		n.Count++
		sv := hppv1.StrandedVolume{PersistentVolume: v.pv.Name, Claim: v.claimName(), Pool: volumePool(v.pv), Action: v.decision.action}
		if !v.decision.releaseAt.IsZero() {
			sv.ReleaseAt = ptrTime(metaTime(v.decision.releaseAt))
		}
		n.Volumes = append(n.Volumes, sv)
	}
	out := make([]hppv1.StrandedNode, 0, len(byNode))
	for _, n := range byNode {
		sort.Slice(n.Volumes, func(i, j int) bool { return n.Volumes[i].PersistentVolume < n.Volumes[j].PersistentVolume })
		if len(n.Volumes) > maxListedVolumes {
			n.Volumes = n.Volumes[:maxListedVolumes]
		}
		out = append(out, *n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	if len(out) == 0 {
		return nil
	}
	return out
}

func ptrTime(t metav1.Time) *metav1.Time { return &t }

// metaTime is t in whole seconds, as the status stores it.
func metaTime(t time.Time) metav1.Time { return metav1.NewTime(t.Truncate(time.Second)) }

// setStrandedMetric sets the gauge (none without a manager: unit tests).
func (r *Reconciler) setStrandedMetric(w *world) {
	if r.stranded == nil {
		return
	}
	r.stranded.Reset()
	for _, n := range report(w) {
		r.stranded.WithLabelValues(n.Node, string(n.Reason)).Set(float64(n.Count))
	}
}

// writeReport puts the report in every CR's status (there is one), only
// when it changed. Without a CR (or its CRD: --controllers=node-loss
// beside a csi-only install) the events and the metric are the report.
func (r *Reconciler) writeReport(ctx context.Context, w *world) error {
	crs := &hppv1.HostPathProvisionerList{}
	if err := r.Client.List(ctx, crs); err != nil {
		if meta.IsNoMatchError(err) {
			return nil
		}
		return err
	}
	want := report(w)
	for i := range crs.Items {
		cr := &crs.Items[i]
		if equality.Semantic.DeepEqual(cr.Status.StrandedVolumes, want) {
			continue
		}
		patch := client.MergeFrom(cr.DeepCopy())
		cr.Status.StrandedVolumes = want
		if err := r.Client.Status().Patch(ctx, cr, patch); err != nil {
			return fmt.Errorf("write status.strandedVolumes of %s: %w", cr.Name, err)
		}
	}
	return nil
}
