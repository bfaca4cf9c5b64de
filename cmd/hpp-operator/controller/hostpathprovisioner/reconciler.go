// Package hostpathprovisioner is the HostPathProvisioner reconciler: from
// the one CR it applies the objects package render builds, reports status,
// and cleans up on deletion. Each reconcile is one pass (reconcile.go):
// observe.go, render.go, apply.go, derive.go, in that order.
package hostpathprovisioner

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
)

// Finalizer holds the CR until the operator has removed what it made. It
// is upstream's own finalizer name: either operator then releases a CR the
// other ran, so neither can leave a CR that nothing ever lets go (issue
// 21: the way back to upstream's operator).
const Finalizer = "finalizer.delete.hostpath-provisioner"

// oldFinalizer is the finalizer earlier hpp versions set; a CR that has it
// gets Finalizer instead.
const oldFinalizer = "hostpathprovisioner.kubevirt.io/cleanup"

// EventRecorder is the part of client-go's events.EventRecorder used here.
type EventRecorder interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Reconciler reconciles HostPathProvisioner objects.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server what the cache does not hold: an
	// object of another installation about to be taken over. Nil: the
	// manager's (SetupWithManager).
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Config    render.Config
	// Recorder records the CR's events. Nil: the manager's
	// (SetupWithManager).
	Recorder EventRecorder
	Log      logr.Logger
	// ready is the readiness gauge (metrics.go), set up with the manager.
	ready prometheus.Gauge
	// swept: the CRs (by uid) whose cluster-scoped leftovers of upstream's
	// operator were looked for (removeUpstreamLeftovers).
	swept *sync.Map
}

// errRetry marks a reconcile that made progress and must run again.
var errRetry = errors.New("retrying")

// reconcileAction is the action of every event the reconciler records on
// the CR (events.k8s.io/v1 requires one).
const reconcileAction = "Reconcile"

// deleteIfPresent deletes obj if the cache has it: a blind DELETE of an
// object that is not there would still be a write request per reconcile.
func (r *Reconciler) deleteIfPresent(ctx context.Context, log logr.Logger, obj client.Object) error {
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		return nil
	}
	if err := r.Client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %T %s: %w", obj, obj.GetName(), err)
	}
	log.Info("deleted", "kind", fmt.Sprintf("%T", obj), "name", obj.GetName())
	return nil
}

// liveReader reads from the API server (the cache where there is no
// manager: unit tests).
func (r *Reconciler) liveReader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

func objMeta(name, ns string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: ns} }
