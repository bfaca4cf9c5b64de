package peercerts

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// PeerCABundle is the ConfigMap (operator's namespace) whose
// render.PeerCABundleKey holds the peer CA bundle that every hpp-csi
// trusts; the node DaemonSet mounts it under that name (render/peer.go).
const PeerCABundle = render.PeerCABundleName

// Reconciler approves and signs hpp-csi's peer certificate requests, and
// keeps the CA and its bundle (doc.go).
type Reconciler struct {
	// Client reads CertificateSigningRequests (cached) and writes.
	Client client.Client
	// APIReader reads the CA Secret and the bundle directly: the manager
	// does not cache Secrets.
	APIReader client.Reader
	// Namespace holds the CA Secret and the bundle.
	Namespace string
	// ServiceAccount is the user hpp-csi's requests come from
	// (system:serviceaccount:<namespace>:<CSI service account>).
	ServiceAccount string
	// Labels go on the Secret and the ConfigMap.
	Labels map[string]string
	Log    logr.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Reasons of the conditions this signer sets.
const (
	reasonApproved = "PeerCertificateApproved"
	reasonDenied   = "PeerRequestRefused"
)

// SetupWithManager watches the requests of the peer signer only, and
// publishes the CA bundle from the start (publish.go); both run only
// while the operator leads.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if err := mgr.Add(manager.RunnableFunc(r.publish)); err != nil {
		return err
	}
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool {
		csr, ok := o.(*certv1.CertificateSigningRequest)
		return ok && csr.Spec.SignerName == contract.PeerSignerName
	})
	return ctrl.NewControllerManagedBy(mgr).Named("peercerts").
		For(&certv1.CertificateSigningRequest{}, builder.WithPredicates(ours)).
		Complete(r)
}

// Reconcile decides one request: denied with the reason, or approved and
// signed. A decided or signed request is left as it is.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	csr := &certv1.CertificateSigningRequest{}
	if err := r.Client.Get(ctx, req.NamespacedName, csr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if csr.Spec.SignerName != contract.PeerSignerName || len(csr.Status.Certificate) > 0 ||
		hasCondition(csr, certv1.CertificateDenied) || hasCondition(csr, certv1.CertificateFailed) {
		return ctrl.Result{}, nil
	}
	log := r.Log.WithValues("csr", csr.Name, "user", csr.Spec.Username)
	node, parsed, err := Check(csr, r.ServiceAccount)
	if err != nil {
		log.Info("peer certificate request denied", "reason", err.Error())
		return ctrl.Result{}, r.decide(ctx, csr, certv1.CertificateDenied, reasonDenied, err.Error())
	}
	if !hasCondition(csr, certv1.CertificateApproved) {
		if err := r.decide(ctx, csr, certv1.CertificateApproved, reasonApproved,
			fmt.Sprintf("the request names node %s, the node of the requesting hpp-csi pod", node)); err != nil {
			return ctrl.Result{}, err
		}
	}
	ca, err := r.ensureCA(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	var maxLife time.Duration
	if s := csr.Spec.ExpirationSeconds; s != nil {
		maxLife = time.Duration(*s) * time.Second
	}
	cert, err := ca.Sign(parsed, node, r.now(), maxLife)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("signing the peer certificate of node %s: %w", node, err)
	}
	csr.Status.Certificate = cert
	if err := r.Client.SubResource("status").Update(ctx, csr); err != nil {
		return ctrl.Result{}, fmt.Errorf("writing the certificate of %s: %w", csr.Name, err)
	}
	log.Info("peer certificate issued", "node", node)
	return ctrl.Result{}, nil
}

// decide sets an Approved or Denied condition through the approval
// subresource.
func (r *Reconciler) decide(ctx context.Context, csr *certv1.CertificateSigningRequest, t certv1.RequestConditionType, reason, msg string) error {
	csr.Status.Conditions = append(csr.Status.Conditions, certv1.CertificateSigningRequestCondition{
		Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: msg, LastUpdateTime: metav1.NewTime(r.now()),
	})
	if err := r.Client.SubResource("approval").Update(ctx, csr); err != nil {
		return fmt.Errorf("setting %s on %s: %w", t, csr.Name, err)
	}
	return nil
}

// ensureCA returns the CA, made or rotated (and the bundle brought up to
// date) when needed.
func (r *Reconciler) ensureCA(ctx context.Context) (*CA, error) {
	secret := &corev1.Secret{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: PeerCASecret}, secret)
	var ca *CA
	switch {
	case apierrors.IsNotFound(err):
		if ca, err = NewCA(r.now()); err != nil {
			return nil, err
		}
		if err := r.writeCA(ctx, ca, nil); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("reading Secret %s/%s: %w", r.Namespace, PeerCASecret, err)
	default:
		if ca, err = LoadCA(secret.Data); err != nil {
			return nil, fmt.Errorf("the Secret %s/%s: %w", r.Namespace, PeerCASecret, err)
		}
		next, changed, err := ca.Rotated(r.now())
		if err != nil {
			return nil, err
		}
		if changed {
			if err := r.writeCA(ctx, next, secret); err != nil {
				return nil, err
			}
			ca = next
		}
	}
	return ca, r.writeBundle(ctx, ca)
}

// writeCA creates the Secret, or updates the one read (a conflict means
// another writer got there first: the request is retried and reads it).
func (r *Reconciler) writeCA(ctx context.Context, ca *CA, live *corev1.Secret) error {
	data, err := ca.Data()
	if err != nil {
		return err
	}
	if live != nil {
		live.Data = data
		return r.Client.Update(ctx, live)
	}
	return r.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: PeerCASecret, Labels: r.Labels},
		Type:       corev1.SecretTypeTLS,
		Data:       data,
	})
}

// writeBundle keeps the bundle ConfigMap equal to the CA's bundle.
func (r *Reconciler) writeBundle(ctx context.Context, ca *CA) error {
	want := string(ca.Bundle())
	cm := &corev1.ConfigMap{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: PeerCABundle}, cm)
	switch {
	case apierrors.IsNotFound(err):
		return r.Client.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: PeerCABundle, Labels: r.Labels},
			Data:       map[string]string{render.PeerCABundleKey: want},
		})
	case err != nil:
		return fmt.Errorf("reading ConfigMap %s/%s: %w", r.Namespace, PeerCABundle, err)
	case cm.Data[render.PeerCABundleKey] == want:
		return nil
	}
	cm.Data = map[string]string{render.PeerCABundleKey: want}
	return r.Client.Update(ctx, cm)
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func hasCondition(csr *certv1.CertificateSigningRequest, t certv1.RequestConditionType) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == t {
			return true
		}
	}
	return false
}
