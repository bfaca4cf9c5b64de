package hostpathprovisioner

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/controller/adopt"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/controller/driverpv"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// retireMounters removes the mounter Deployments render did not build,
// each after its cleanup Job exists. A node that left the CR's placement
// but still exists and holds volumes of the pool keeps its mounter
// (untouched, so it is not rescheduled away): unmounting would strand
// those volumes, so it is reported instead (derive).
func (r *Reconciler) retireMounters(ctx context.Context, p *pass) error {
	deps, err := r.poolDeployments(ctx, p.cr)
	if err != nil {
		return err
	}
	wanted := p.wantedMounters()
	for i := range deps {
		d := &deps[i]
		if wanted[d.Name] {
			continue
		}
		pool, _, node := adopt.MounterOrigin(d)
		if p.inSpec(pool) && p.holds(node, pool) {
			continue
		}
		if p.inSpec(pool) {
			// Retiring unmounts the pool: confirm from the API server that
			// no volume is there, since the cache may not hold a PV just
			// created.
			n, err := r.poolVolumesOnNodeLive(ctx, pool, node)
			if err != nil {
				return err
			}
			if n > 0 {
				continue // reported once the cache holds it (the PV's creation reconciles again)
			}
		}
		if err := r.retireMounter(ctx, p.log, p.cfg, p.cr, d); err != nil {
			return err
		}
	}
	return r.tidyCleanupJobs(ctx, p.log, p.cr, p.st)
}

// poolVolumesOnNodeLive counts, from the API server, the PVs of the pool
// pinned to the node.
func (r *Reconciler) poolVolumesOnNodeLive(ctx context.Context, pool, node string) (int, error) {
	pvs := &corev1.PersistentVolumeList{}
	if err := r.liveReader().List(ctx, pvs); err != nil {
		return 0, fmt.Errorf("list PVs before unmounting pool %q on node %s: %w", pool, node, err)
	}
	n := 0
	for i := range pvs.Items {
		pv := &pvs.Items[i]
		if slices.Contains(driverpv.PinnedNodes(pv), node) && pv.Spec.CSI.VolumeAttributes[contract.ParamStoragePool] == pool {
			n++
		}
	}
	return n, nil
}

// retireMounter creates the cleanup Job of a mounter Deployment, then
// deletes the Deployment. In that order, so a crash in between leaves a
// Deployment to retire again, never a pool nobody unmounts. The mounter
// unmounts on SIGTERM too; the Job covers a pod that never got the signal
// (node rebooted, pod force-deleted) and mounts stacked by older mounters.
// A node that no longer exists gets no Job: nothing is mounted there.
func (r *Reconciler) retireMounter(ctx context.Context, log logr.Logger, cfg render.Config, cr *hppv1.HostPathProvisioner, d *appsv1.Deployment) error {
	pool, poolPath, node := adopt.MounterOrigin(d)
	how := fmt.Sprintf("cleanup Job %s unmounts %s/csi", render.CleanupJobName(pool, node), poolPath)
	err := r.Client.Get(ctx, client.ObjectKey{Name: node}, &corev1.Node{})
	switch {
	case apierrors.IsNotFound(err) || node == "" || poolPath == "":
		how = "no cleanup Job: the node is gone (or the mounter does not say which node and path)"
		log.Info("no cleanup job: node gone or mounter not annotated", "deployment", d.Name, "node", node)
	case err != nil:
		return err
	default:
		if err := r.ensureCleanupJob(ctx, log, cfg, cr, pool, poolPath, node); err != nil {
			return err
		}
	}
	if err := r.Client.Delete(ctx, d, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete mounter Deployment %s: %w", d.Name, err)
	}
	log.Info("retired pool mounter", "deployment", d.Name, "pool", pool, "node", node)
	r.Recorder.Eventf(cr, nil, corev1.EventTypeNormal, "PoolRetired", reconcileAction, "storage pool %q leaves node %s: mounter %s deleted, %s; its claim is kept",
		pool, node, d.Name, how)
	return nil
}

// ensureCleanupJob creates the cleanup Job. A finished Job of the same name
// is from an earlier retirement: it is deleted first and the reconcile
// retried, so this retirement gets an unmount of its own.
func (r *Reconciler) ensureCleanupJob(ctx context.Context, log logr.Logger, cfg render.Config, cr *hppv1.HostPathProvisioner, pool, poolPath, node string) error {
	job := cfg.CleanupJob(&cr.Spec, pool, poolPath, node)
	live := &batchv1.Job{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(job), live)
	if err == nil {
		if _, done := jobFinished(live); !done {
			return nil
		}
		if err := r.Client.Delete(ctx, live, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return fmt.Errorf("cleanup Job %s of an earlier retirement deleted: %w", job.Name, errRetry)
	}
	if !apierrors.IsNotFound(err) {
		return err
	}
	if err := controllerutil.SetControllerReference(cr, job, r.Scheme); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create cleanup Job %s: %w", job.Name, err)
	}
	log.Info("created cleanup job", "job", job.Name, "pool", pool, "node", node)
	return nil
}

// jobFinished returns whether the Job succeeded, and whether it finished.
func jobFinished(j *batchv1.Job) (succeeded, finished bool) {
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return true, true
		case batchv1.JobFailed:
			return false, true
		}
	}
	return false, false
}

// cleanupJobs lists the cleanup Jobs the CR controls.
func (r *Reconciler) cleanupJobs(ctx context.Context, cr *hppv1.HostPathProvisioner) ([]batchv1.Job, error) {
	list := &batchv1.JobList{}
	err := r.Client.List(ctx, list, r.poolObjects()...)
	return controlledBy(list.Items, cr), err
}

// tidyCleanupJobs deletes succeeded cleanup Jobs (their work is done) and
// reports failed ones in Degraded, kept for their logs until deleted.
func (r *Reconciler) tidyCleanupJobs(ctx context.Context, log logr.Logger, cr *hppv1.HostPathProvisioner, st *status) error {
	jobs, err := r.cleanupJobs(ctx, cr)
	if err != nil {
		return err
	}
	var failed []string
	for i := range jobs {
		j := &jobs[i]
		ok, done := jobFinished(j)
		switch {
		case !done:
			// Its status changes trigger a reconcile (the CR owns it).
		case ok:
			if err := r.deleteIfPresent(ctx, log, j); err != nil {
				return err
			}
		default:
			failed = append(failed, describeJob(j))
		}
	}
	if len(failed) > 0 {
		st.degrade("PoolCleanupFailed", fmt.Sprintf("cleanup Job(s) failed, the pool may still be mounted: %s; see kubectl logs -n %s job/<name>, unmount by hand, then delete the Job",
			strings.Join(failed, "; "), r.Config.Namespace))
	}
	return nil
}

func describeJob(j *batchv1.Job) string {
	return fmt.Sprintf("%s (pool %q on node %s, %s/csi)", j.Name, j.Annotations[render.PoolNameAnnotation],
		j.Annotations[render.NodeAnnotation], j.Annotations[render.PoolPathAnnotation])
}

// teardownPools is the finalizer's first step: every mounter retired, then
// wait until every cleanup Job has finished (each is bounded by its
// activeDeadlineSeconds, so the wait is too). It returns the Jobs still
// running, and the failed ones for the caller to report.
func (r *Reconciler) teardownPools(ctx context.Context, log logr.Logger, cr *hppv1.HostPathProvisioner) (running, failed []string, err error) {
	// The Jobs' pods must be admitted: without the PriorityClass they go
	// without one, as the node pods do.
	cfg, err := r.passConfig(ctx, &cr.Spec, newStatus(cr, r.Config.Version))
	if err != nil {
		return nil, nil, err
	}
	deps, err := r.poolDeployments(ctx, cr)
	if err != nil {
		return nil, nil, err
	}
	for i := range deps {
		if err := r.retireMounter(ctx, log, cfg, cr, &deps[i]); err != nil {
			return nil, nil, err
		}
	}
	jobs, err := r.cleanupJobs(ctx, cr)
	if err != nil {
		return nil, nil, err
	}
	for i := range jobs {
		switch ok, done := jobFinished(&jobs[i]); {
		case !done:
			running = append(running, describeJob(&jobs[i]))
		case !ok:
			failed = append(failed, describeJob(&jobs[i]))
		}
	}
	return running, failed, nil
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

// wantedMounters are the names of the mounter Deployments render built.
func (p *pass) wantedMounters() map[string]bool {
	out := map[string]bool{}
	for _, m := range p.mounters {
		out[m.deployment.Name] = true
	}
	return out
}
