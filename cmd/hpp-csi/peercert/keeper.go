package peercert

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/kubeapi"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// API is the part of kubeapi.CSRs the keeper uses.
type API interface {
	Create(ctx context.Context, name string, spec kubeapi.CSRSpec) error
	Status(ctx context.Context, name string) (*kubeapi.CSRStatus, error)
}

// Keeper keeps Dir's certificate for Node valid.
type Keeper struct {
	Node string
	// Dir receives tls.key, tls.crt and ca.crt.
	Dir string
	// BundleFile is the CA bundle the operator publishes (its ConfigMap
	// mounted); copied to Dir/ca.crt whenever it changes.
	BundleFile string
	API        API
	Log        *zap.Logger
	// Lifetime asked of the signer (expirationSeconds); 0 lets it choose.
	Lifetime time.Duration
	// Poll is how often a pending request is read again (2 s when 0).
	Poll time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Run keeps the certificate until ctx ends. Failures are logged and retried
// after a backoff (the last good certificate stays in use meanwhile).
func (k *Keeper) Run(ctx context.Context) {
	backoff := 5 * time.Second
	for {
		next, err := k.Step(ctx)
		if err != nil {
			k.Log.Warn("peer certificate not renewed", zap.Error(err), zap.Duration("retryIn", backoff))
			next, backoff = backoff, min(2*backoff, 5*time.Minute)
		} else {
			backoff = 5 * time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
	}
}

// Step brings the bundle up to date and renews the certificate when it is
// missing, does not match its key, names another node, or is past two
// thirds of its life. It returns when to look again.
func (k *Keeper) Step(ctx context.Context) (time.Duration, error) {
	if err := k.copyBundle(); err != nil {
		return 0, err
	}
	now := k.now()
	renewAt, err := k.renewTime()
	if err != nil || !now.Before(renewAt) {
		if err != nil {
			k.Log.Info("peer certificate to be requested", zap.String("why", err.Error()))
		}
		if err := k.renew(ctx); err != nil {
			return 0, err
		}
		if renewAt, err = k.renewTime(); err != nil {
			return 0, fmt.Errorf("the issued certificate: %w", err)
		}
	}
	// Look again at least hourly: the bundle may change.
	return min(max(renewAt.Sub(now), time.Second), time.Hour), nil
}

// renewTime is two thirds into the life of the certificate in Dir, or an
// error saying why there is none usable.
func (k *Keeper) renewTime() (time.Time, error) {
	pair, err := tls.LoadX509KeyPair(k.path("tls.crt"), k.path("tls.key"))
	if err != nil {
		return time.Time{}, err
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return time.Time{}, err
	}
	if err := leaf.VerifyHostname(k.Node); err != nil {
		return time.Time{}, fmt.Errorf("the certificate in %s is not for node %s: %w", k.Dir, k.Node, err)
	}
	life := leaf.NotAfter.Sub(leaf.NotBefore)
	return leaf.NotBefore.Add(life * 2 / 3), nil
}

// renew requests a certificate for a new key and waits for the answer.
func (k *Keeper) renew(ctx context.Context) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: k.Node}, DNSNames: []string{k.Node}}, key)
	if err != nil {
		return err
	}
	spec := kubeapi.CSRSpec{
		Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
		SignerName: contract.PeerSignerName,
		Usages:     []string{"digital signature", "server auth", "client auth"},
	}
	if k.Lifetime > 0 {
		s := int32(k.Lifetime / time.Second)
		spec.ExpirationSeconds = &s
	}
	name := "hpp-peer-" + k.Node + "-" + strconv.FormatInt(k.now().Unix(), 36)
	if err := k.API.Create(ctx, name, spec); err != nil {
		return fmt.Errorf("requesting the peer certificate: %w", err)
	}
	k.Log.Info("peer certificate requested", zap.String("csr", name))
	cert, err := k.await(ctx, name)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writeFile(k.path("tls.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	if err := writeFile(k.path("tls.crt"), cert, 0o644); err != nil {
		return err
	}
	k.Log.Info("peer certificate installed", zap.String("csr", name), zap.String("dir", k.Dir))
	return nil
}

// await polls the request until it is signed, denied or failed.
func (k *Keeper) await(ctx context.Context, name string) ([]byte, error) {
	poll := k.Poll
	if poll == 0 {
		poll = 2 * time.Second
	}
	for {
		st, err := k.API.Status(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("reading CertificateSigningRequest %s: %w", name, err)
		}
		for _, c := range st.Conditions {
			if c.Type == "Denied" || c.Type == "Failed" {
				return nil, fmt.Errorf("CertificateSigningRequest %s %s (%s): %s", name, c.Type, c.Reason, c.Message)
			}
		}
		if len(st.Certificate) > 0 {
			return st.Certificate, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for CertificateSigningRequest %s to be signed (is hpp-operator running?): %w", name, ctx.Err())
		case <-time.After(poll):
		}
	}
}

// copyBundle makes Dir/ca.crt equal to the bundle file.
func (k *Keeper) copyBundle() error {
	want, err := os.ReadFile(k.BundleFile)
	if err != nil {
		return fmt.Errorf("the peer CA bundle: %w", err)
	}
	if !bytes.Contains(want, []byte("-----BEGIN CERTIFICATE-----")) {
		return fmt.Errorf("the peer CA bundle %s holds no certificate", k.BundleFile)
	}
	have, err := os.ReadFile(k.path("ca.crt"))
	if err == nil && bytes.Equal(have, want) {
		return nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return writeFile(k.path("ca.crt"), want, 0o644)
}

func (k *Keeper) path(name string) string { return filepath.Join(k.Dir, name) }

func (k *Keeper) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

// writeFile replaces path with data by rename, synced first.
func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
