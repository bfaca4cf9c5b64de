package controller

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

// retireMounter creates the cleanup Job of a mounter Deployment, then
// deletes the Deployment. In that order, so a crash in between leaves a
// Deployment to retire again, never a pool nobody unmounts. The mounter
// unmounts on SIGTERM too; the Job covers a pod that never got the signal
// (node rebooted, pod force-deleted) and mounts stacked by older mounters.
// A node that no longer exists gets no Job: nothing is mounted there.
func (r *Reconciler) retireMounter(ctx context.Context, log logr.Logger, cfg render.Config, cr *hppv1.HostPathProvisioner, d *appsv1.Deployment) error {
	pool, poolPath, node := mounterOrigin(d)
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
	r.eventf(cr, corev1.EventTypeNormal, "PoolRetired", "storage pool %q leaves node %s: mounter %s deleted, %s; its claim is kept",
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
	cfg, err := r.checkPriorityClass(ctx, newStatus(cr, r.Config.Version))
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
