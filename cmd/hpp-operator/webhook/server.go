package webhook

import (
	"crypto/tls"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

// NewServer is the webhook server with the TLS policy applied (HTTP/2 off).
func NewServer(host string, port int, certDir string, policy *TLSPolicy) webhook.Server {
	return webhook.NewServer(webhook.Options{
		Host:    host,
		Port:    port,
		CertDir: certDir,
		TLSOpts: []func(*tls.Config){policy.Apply},
	})
}

// Register serves the validator at Path on the manager's webhook server.
func Register(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &hppv1.HostPathProvisioner{}).
		WithValidator(&Validator{Reader: mgr.GetClient()}).
		Complete()
}
