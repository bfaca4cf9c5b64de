package peercerts

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
)

// PeerCASecret is the Secret (in the operator's namespace) holding the peer
// CA: tls.crt and tls.key, and previous.crt, the CA it replaced, which peers
// keep trusting until it expires so that no certificate signed before a
// rotation stops working.
const PeerCASecret = render.PeerCASecretName

// Secret keys.
const (
	keyCert     = corev1.TLSCertKey
	keyKey      = corev1.TLSPrivateKeyKey
	keyPrevious = "previous.crt"
)

// Lifetimes. A CA is replaced when less than caRenewBefore of it is left,
// which is more than a leaf lives: every leaf it signed is expired or
// renewed (hpp-csi renews at two thirds of a leaf's life) before the old CA
// leaves the bundle.
const (
	caLifetime    = 365 * 24 * time.Hour
	caRenewBefore = 90 * 24 * time.Hour
	leafLifetime  = 30 * 24 * time.Hour
)

// CA is the peer CA: its certificate and key, and the previous CA's
// certificate while a rotation's overlap lasts.
type CA struct {
	Cert     *x509.Certificate
	Key      crypto.Signer
	Previous *x509.Certificate
}

// NewCA makes a CA valid from now (ECDSA P-256).
func NewCA(now time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "hpp peer CA"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key}, nil
}

// LoadCA reads the CA from its Secret's data.
func LoadCA(data map[string][]byte) (*CA, error) {
	cert, err := parseCert(data[keyCert], keyCert)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data[keyKey])
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM block", keyKey)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyKey, err)
	}
	key, ok := parsed.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: a %T cannot sign", keyKey, parsed)
	}
	ca := &CA{Cert: cert, Key: key}
	if len(data[keyPrevious]) > 0 {
		if ca.Previous, err = parseCert(data[keyPrevious], keyPrevious); err != nil {
			return nil, err
		}
	}
	return ca, nil
}

// Data is the CA as its Secret holds it.
func (ca *CA) Data() (map[string][]byte, error) {
	key, err := x509.MarshalPKCS8PrivateKey(ca.Key)
	if err != nil {
		return nil, err
	}
	data := map[string][]byte{
		keyCert: certPEM(ca.Cert),
		keyKey:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}),
	}
	if ca.Previous != nil {
		data[keyPrevious] = certPEM(ca.Previous)
	}
	return data, nil
}

// Rotated returns the CA to use at now: ca itself, or a new one (keeping
// ca's certificate as Previous) when less than caRenewBefore of it is
// left. A previous CA that has expired leaves the bundle.
func (ca *CA) Rotated(now time.Time) (*CA, bool, error) {
	if ca.Cert.NotAfter.Sub(now) >= caRenewBefore {
		if ca.Previous != nil && now.After(ca.Previous.NotAfter) {
			return &CA{Cert: ca.Cert, Key: ca.Key}, true, nil
		}
		return ca, false, nil
	}
	next, err := NewCA(now)
	if err != nil {
		return nil, false, err
	}
	next.Previous = ca.Cert
	return next, true, nil
}

// Bundle is what peers trust: the CA's certificate and the previous one's.
func (ca *CA) Bundle() []byte {
	out := certPEM(ca.Cert)
	if ca.Previous != nil {
		out = append(out, certPEM(ca.Previous)...)
	}
	return out
}

// Sign issues the certificate req asks for, for node, from now for the
// leaf lifetime, or less when the request asks for less (its
// expirationSeconds) or the CA ends sooner. The usages are fixed: a peer
// serves and fetches.
func (ca *CA) Sign(req *x509.CertificateRequest, node string, now time.Time, maxLife time.Duration) ([]byte, error) {
	life := leafLifetime
	if maxLife > 0 && maxLife < life {
		life = maxLife
	}
	notAfter := now.Add(life)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	if !notAfter.After(now) {
		return nil, errors.New("the peer CA has expired")
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: node},
		DNSNames:     []string{node},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, req.PublicKey, ca.Key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

func serialNumber() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func certPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func parseCert(data []byte, field string) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: not a PEM CERTIFICATE", field)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	return c, nil
}
