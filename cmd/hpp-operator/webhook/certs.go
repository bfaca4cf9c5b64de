package webhook

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// File names in the certificate directory (controller-runtime's webhook
// server reads tls.crt/tls.key and reloads them when they change).
const (
	CAFile   = "ca.crt"
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
)

// SelfSigned makes the webhook's serving certificate with its own CA, renews
// it when a third of its validity is left, and keeps the CA bundle of the
// webhook configuration in step, so a cluster without cert-manager is never
// stuck. One operator replica serves the webhook in this mode (each replica
// would make its own CA); with more, use the cert-manager component.
type SelfSigned struct {
	Dir       string
	Service   string
	Namespace string
	// ConfigName is the ValidatingWebhookConfiguration to patch.
	ConfigName string
	// Client writes the webhook configuration (a direct client: the
	// configuration is read once an hour, not worth a cache).
	Client   client.Client
	Validity time.Duration
	Now      func() time.Time
	Log      logr.Logger
}

func (s *SelfSigned) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *SelfSigned) validity() time.Duration {
	if s.Validity > 0 {
		return s.Validity
	}
	return 365 * 24 * time.Hour
}

// DNSName is the name the API server calls the webhook by.
func (s *SelfSigned) DNSName() string { return s.Service + "." + s.Namespace + ".svc" }

// Ensure makes sure the directory holds a CA and a serving certificate that
// is not due for renewal, and returns the CA in PEM. It is idempotent.
func (s *SelfSigned) Ensure() ([]byte, error) {
	caPEM, err := os.ReadFile(filepath.Join(s.Dir, CAFile))
	if err == nil && s.current() {
		return caPEM, nil
	}
	return s.generate()
}

// current reports whether tls.crt exists, names the service and has more
// than a third of its validity left.
func (s *SelfSigned) current() bool {
	b, err := os.ReadFile(filepath.Join(s.Dir, CertFile))
	if err != nil {
		return false
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return false
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil || cert.VerifyHostname(s.DNSName()) != nil {
		return false
	}
	left := cert.NotAfter.Sub(s.now())
	return left > cert.NotAfter.Sub(cert.NotBefore)/3
}

func (s *SelfSigned) generate() ([]byte, error) {
	now := s.now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "hpp-operator-webhook-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(s.validity()),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: s.DNSName()},
		DNSNames:     []string{s.DNSName(), s.DNSName() + ".cluster.local", s.Service + "." + s.Namespace},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(s.validity()),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, err
	}
	// The key before the certificate: the server reloads on the
	// certificate's change and must find the matching key.
	for _, f := range []struct {
		name string
		data []byte
	}{
		{KeyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})},
		{CAFile, caPEM},
		{CertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})},
	} {
		if err := writeAtomic(filepath.Join(s.Dir, f.name), f.data); err != nil {
			return nil, err
		}
	}
	s.Log.Info("webhook serving certificate made", "dnsName", s.DNSName(), "notAfter", tmpl.NotAfter)
	return caPEM, nil
}

// PatchCABundle sets caBundle on every webhook of the configuration that
// calls our Service; it writes only when something differs.
func (s *SelfSigned) PatchCABundle(ctx context.Context, caPEM []byte) error {
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := s.Client.Get(ctx, client.ObjectKey{Name: s.ConfigName}, cfg); err != nil {
		return fmt.Errorf("read ValidatingWebhookConfiguration %s: %w", s.ConfigName, err)
	}
	orig := cfg.DeepCopy()
	changed := false
	for i := range cfg.Webhooks {
		svc := cfg.Webhooks[i].ClientConfig.Service
		if svc == nil || svc.Name != s.Service || svc.Namespace != s.Namespace {
			continue
		}
		if !bytes.Equal(cfg.Webhooks[i].ClientConfig.CABundle, caPEM) {
			cfg.Webhooks[i].ClientConfig.CABundle = caPEM
			changed = true
		}
	}
	if !changed {
		return nil
	}
	if err := s.Client.Patch(ctx, cfg, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("patch caBundle of %s: %w", s.ConfigName, err)
	}
	s.Log.Info("webhook CA bundle patched", "configuration", s.ConfigName)
	return nil
}

// Start keeps certificate and CA bundle current until ctx ends: at once,
// then every check interval (a missing configuration is retried sooner).
func (s *SelfSigned) Start(ctx context.Context) error {
	for {
		wait := time.Hour
		caPEM, err := s.Ensure()
		if err == nil {
			err = s.PatchCABundle(ctx, caPEM)
		}
		if err != nil {
			s.Log.Error(err, "webhook certificate upkeep failed; retrying")
			wait = 10 * time.Second
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// NeedLeaderElection: every replica serves the webhook.
func (s *SelfSigned) NeedLeaderElection() bool { return false }

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(errors.New("crypto/rand failed")) // crypto/rand does not fail on Linux
	}
	return n
}

func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
