package peercerts

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"strings"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
)

const testSA = "system:serviceaccount:hpp:hostpath-provisioner-admin-csi"

// requestPEM is a CSR of key naming cn and dns.
func requestPEM(t *testing.T, key crypto.Signer, cn string, dns []string, ips []net.IP) []byte {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: cn}, DNSNames: dns, IPAddresses: ips}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func ecKey(t *testing.T, c elliptic.Curve) crypto.Signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(c, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func peerCSR(request []byte, user string, extra map[string]certv1.ExtraValue, usages ...certv1.KeyUsage) *certv1.CertificateSigningRequest {
	if usages == nil {
		usages = []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageServerAuth, certv1.UsageClientAuth}
	}
	return &certv1.CertificateSigningRequest{Spec: certv1.CertificateSigningRequestSpec{
		Request: request, Username: user, Extra: extra, Usages: usages}}
}

func onNode(n string) map[string]certv1.ExtraValue {
	return map[string]certv1.ExtraValue{nodeNameKey: {n}}
}

func TestCheck(t *testing.T) {
	key := ecKey(t, elliptic.P256())
	good := requestPEM(t, key, "node-a", []string{"node-a"}, nil)
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	tampered := append([]byte(nil), good...)
	tampered[len(tampered)/2] ^= 1
	for _, tt := range []struct {
		name string
		csr  *certv1.CertificateSigningRequest
		want string // "" = accepted; else a part of the refusal
	}{
		{"its own node", peerCSR(good, testSA, onNode("node-a")), ""},
		{"with key encipherment", peerCSR(good, testSA, onNode("node-a"), certv1.UsageDigitalSignature, certv1.UsageKeyEncipherment, certv1.UsageServerAuth, certv1.UsageClientAuth), ""},
		{"another node's name", peerCSR(good, testSA, onNode("node-b")), `a peer certificate names its node "node-b" alone`},
		{"another user", peerCSR(good, "system:serviceaccount:hpp:other", onNode("node-a")), "spec.username"},
		{"a token not bound to a pod", peerCSR(good, testSA, nil), "spec.extra[authentication.kubernetes.io/node-name]"},
		{"two nodes", peerCSR(good, testSA, map[string]certv1.ExtraValue{nodeNameKey: {"node-a", "node-b"}}), "spec.extra"},
		{"an extra DNS name", peerCSR(requestPEM(t, key, "node-a", []string{"node-a", "node-b"}, nil), testSA, onNode("node-a")), "alone"},
		{"another CN", peerCSR(requestPEM(t, key, "admin", []string{"node-a"}, nil), testSA, onNode("node-a")), "alone"},
		{"an IP name", peerCSR(requestPEM(t, key, "node-a", []string{"node-a"}, []net.IP{net.IPv4(10, 0, 0, 1)}), testSA, onNode("node-a")), "IP, URI and email"},
		{"a signing usage", peerCSR(good, testSA, onNode("node-a"), certv1.UsageServerAuth, certv1.UsageClientAuth, certv1.UsageCertSign), `"cert sign" is not a peer certificate's usage`},
		{"server auth only", peerCSR(good, testSA, onNode("node-a"), certv1.UsageServerAuth), "must include"},
		{"a weak key", peerCSR(requestPEM(t, small, "node-a", []string{"node-a"}, nil), testSA, onNode("node-a")), "RSA key of 1024 bits"},
		{"a P-224 key", peerCSR(requestPEM(t, ecKey(t, elliptic.P224()), "node-a", []string{"node-a"}, nil), testSA, onNode("node-a")), "ECDSA curve P-224"},
		{"not PEM", peerCSR([]byte("hello"), testSA, onNode("node-a")), "not a PEM CERTIFICATE REQUEST"},
		{"a broken signature", peerCSR(tampered, testSA, onNode("node-a")), "spec.request"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			node, req, err := Check(tt.csr, testSA)
			if tt.want == "" {
				if err != nil || node != "node-a" || req == nil {
					t.Fatalf("Check = %q, %v, %v; want node-a accepted", node, req, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Check error %v; want it to say %q", err, tt.want)
			}
		})
	}
}

// A signed certificate verifies against the bundle as node-a, for server
// and client use, and a rotation keeps it verifying until the old CA ends.
func TestSignAndRotate(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	ca, err := NewCA(now)
	if err != nil {
		t.Fatal(err)
	}
	data, err := ca.Data()
	if err != nil {
		t.Fatal(err)
	}
	if ca, err = LoadCA(data); err != nil {
		t.Fatal(err)
	}
	_, req, err := Check(peerCSR(requestPEM(t, ecKey(t, elliptic.P256()), "node-a", []string{"node-a"}, nil), testSA, onNode("node-a")), testSA)
	if err != nil {
		t.Fatal(err)
	}
	certPEMBytes, err := ca.Sign(req, "node-a", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := parseCert(certPEMBytes, "leaf")
	if err != nil {
		t.Fatal(err)
	}
	if got := leaf.NotAfter.Sub(now); got != time.Hour {
		t.Errorf("leaf lives %v; the request asked for 1h", got)
	}
	verify := func(bundle []byte, at time.Time) error {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(bundle)
		_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "node-a", CurrentTime: at,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}})
		return err
	}
	if err := verify(ca.Bundle(), now.Add(time.Minute)); err != nil {
		t.Fatalf("leaf does not verify against the bundle: %v", err)
	}

	// Not due: unchanged.
	if same, changed, err := ca.Rotated(now.Add(200 * 24 * time.Hour)); err != nil || changed || same != ca {
		t.Fatalf("Rotated at 200 days = changed %v, %v; want the same CA", changed, err)
	}
	// Due: a new CA, the old one still trusted.
	next, changed, err := ca.Rotated(now.Add(300 * 24 * time.Hour))
	if err != nil || !changed || next.Previous == nil || next.Cert.Equal(ca.Cert) {
		t.Fatalf("Rotated at 300 days = changed %v, %v; want a new CA keeping the old", changed, err)
	}
	if err := verify(next.Bundle(), now.Add(time.Minute)); err != nil {
		t.Fatalf("a leaf of the old CA no longer verifies after the rotation: %v", err)
	}
	// The old CA expired: it leaves the bundle.
	later, changed, err := next.Rotated(ca.Cert.NotAfter.Add(time.Hour))
	if err != nil || !changed || later.Previous != nil {
		t.Fatalf("Rotated past the old CA's end = changed %v, previous %v, %v; want it dropped", changed, later.Previous != nil, err)
	}
}
