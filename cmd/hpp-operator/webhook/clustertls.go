package webhook

import (
	"context"
	"crypto/tls"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// ClusterAPIServerName is OpenShift's one APIServer configuration object.
const ClusterAPIServerName = "cluster"

// ClusterTLSProfile follows the TLS profile of OpenShift's APIServer
// "cluster" into the webhook's TLSPolicy, so the webhook speaks the
// cluster's crypto policy and a change applies to the next handshakes
// without a restart.
type ClusterTLSProfile struct {
	Reader client.Reader
	Policy *TLSPolicy
	Log    logr.Logger
}

// SetupWithManager watches the APIServer on every replica, leader or not:
// each one serves the webhook. From then on the profile is read from the
// manager's cache.
func (w *ClusterTLSProfile) SetupWithManager(mgr ctrl.Manager) error {
	w.Reader = mgr.GetClient()
	return ctrl.NewControllerManagedBy(mgr).
		Named("tls-profile").
		For(&configv1.APIServer{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetName() == ClusterAPIServerName
		}))).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		Complete(w)
}

// Reconcile reads the APIServer and swaps the policy's profile. A profile
// that cannot be used keeps the one in force, with the reason logged: a
// webhook that stopped serving would block every change of the CR.
func (w *ClusterTLSProfile) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	return ctrl.Result{}, w.Load(ctx)
}

// Load applies the APIServer's current profile (Intermediate without the
// object); the operator calls it once before the webhook serves.
func (w *ClusterTLSProfile) Load(ctx context.Context) error {
	obj := &configv1.APIServer{}
	err := w.Reader.Get(ctx, client.ObjectKey{Name: ClusterAPIServerName}, obj)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	profile, skipped, perr := ProfileFromOpenShift(obj.Spec.TLSSecurityProfile)
	if perr != nil {
		w.Log.Error(perr, "cluster TLS profile unusable, keeping the current one", "apiserver", ClusterAPIServerName)
		return nil
	}
	if len(skipped) > 0 {
		w.Log.Info("cluster TLS profile lists ciphers Go does not implement, skipped", "ciphers", skipped)
	}
	if err := w.Policy.SetClusterProfile(profile); err != nil {
		// The overrides and this profile can clash (a lower minimum
		// under a TLS 1.3-only profile, a cipher list that leaves TLS 1.2
		// without a cipher): the profile in force stays.
		w.Log.Error(err, "cluster TLS profile under the overrides unusable, keeping the current one")
		return nil
	}
	inForce := w.Policy.Profile() // the overrides may change it
	w.Log.Info("TLS profile applied", "type", profileType(obj.Spec.TLSSecurityProfile),
		"minVersion", tls.VersionName(inForce.MinVersion), "ciphers", len(inForce.Ciphers))
	return nil
}
