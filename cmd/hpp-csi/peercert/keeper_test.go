package peercert

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/kubeapi"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/peer"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// fakeSigner answers requests as the operator's signer would: signed by
// its CA for the node the request names, or denied.
type fakeSigner struct {
	t      *testing.T
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	now    func() time.Time
	life   time.Duration
	deny   string
	mu     sync.Mutex
	issued map[string][]byte
	asked  []kubeapi.CSRSpec
}

func newFakeSigner(t *testing.T, now func() time.Time) *fakeSigner {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test peer CA"},
		NotBefore: now().Add(-time.Hour), NotAfter: now().Add(365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	return &fakeSigner{t: t, ca: ca, caKey: key, now: now, life: 30 * 24 * time.Hour, issued: map[string][]byte{}}
}

func (f *fakeSigner) bundle() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.ca.Raw})
}

func (f *fakeSigner) Create(_ context.Context, name string, spec kubeapi.CSRSpec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, spec)
	if f.deny != "" || spec.SignerName != contract.PeerSignerName {
		return nil
	}
	block, _ := pem.Decode(spec.Request)
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		f.t.Fatal(err)
	}
	now := f.now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(now.UnixNano()), Subject: req.Subject, DNSNames: req.DNSNames,
		NotBefore: now, NotAfter: now.Add(f.life), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, f.ca, req.PublicKey, f.caKey)
	if err != nil {
		f.t.Fatal(err)
	}
	f.issued[name] = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return nil
}

func (f *fakeSigner) Status(_ context.Context, name string) (*kubeapi.CSRStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := &kubeapi.CSRStatus{Certificate: f.issued[name]}
	if f.deny != "" {
		st.Conditions = append(st.Conditions, struct {
			Type    string `json:"type"`
			Reason  string `json:"reason"`
			Message string `json:"message"`
		}{"Denied", "PeerRequestRefused", f.deny})
	}
	return st, nil
}

func (f *fakeSigner) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.asked)
}

func setup(t *testing.T) (*Keeper, *fakeSigner, *time.Time) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	clock := &now
	f := newFakeSigner(t, func() time.Time { return *clock })
	dir := t.TempDir()
	bundle := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(bundle, f.bundle(), 0o644); err != nil {
		t.Fatal(err)
	}
	k := &Keeper{Node: "node-a", Dir: dir, BundleFile: bundle, API: f, Log: zap.NewNop(), Poll: time.Millisecond, Now: func() time.Time { return *clock }}
	return k, f, clock
}

func leafOf(t *testing.T, dir string) *x509.Certificate {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

// No certificate: one request, and the directory then holds what the peer
// transport loads, for this node.
func TestFirstCertificate(t *testing.T) {
	k, f, _ := setup(t)
	next, err := k.Step(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if f.requests() != 1 || f.asked[0].SignerName != contract.PeerSignerName {
		t.Fatalf("requests %+v; want one of signer %s", f.asked, contract.PeerSignerName)
	}
	if next <= 0 || next > time.Hour {
		t.Errorf("next look in %v; want within the hour", next)
	}
	if _, err := peer.LoadCredentials(k.Dir); err != nil {
		t.Fatalf("the peer transport cannot load %s: %v", k.Dir, err)
	}
	if err := leafOf(t, k.Dir).VerifyHostname("node-a"); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(k.Dir, "tls.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("tls.key mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
}

// A valid certificate is kept until two thirds of its life, then replaced
// with a new key.
func TestRenewsAtTwoThirds(t *testing.T) {
	k, f, clock := setup(t)
	if _, err := k.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	first := leafOf(t, k.Dir)
	*clock = clock.Add(19 * 24 * time.Hour) // before 20 days of 30
	if _, err := k.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f.requests() != 1 {
		t.Fatalf("%d requests at day 19; want the certificate kept", f.requests())
	}
	*clock = clock.Add(2 * 24 * time.Hour) // day 21
	if _, err := k.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	second := leafOf(t, k.Dir)
	if f.requests() != 2 || second.SerialNumber.Cmp(first.SerialNumber) == 0 {
		t.Fatalf("%d requests at day 21, serial %v then %v; want a new certificate", f.requests(), first.SerialNumber, second.SerialNumber)
	}
	if first.PublicKey.(*ecdsa.PublicKey).Equal(second.PublicKey) {
		t.Error("the renewal kept the old key; each request has a new one")
	}
}

// A denied request is an error naming the reason, and the last good
// certificate stays.
func TestDeniedKeepsTheOldCertificate(t *testing.T) {
	k, f, clock := setup(t)
	if _, err := k.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(k.Dir, "tls.crt"))
	f.deny = `a peer certificate names its node "node-b" alone`
	*clock = clock.Add(25 * 24 * time.Hour)
	_, err := k.Step(context.Background())
	if err == nil || !strings.Contains(err.Error(), "Denied") || !strings.Contains(err.Error(), f.deny) {
		t.Fatalf("Step error %v; want Denied with the signer's reason", err)
	}
	after, _ := os.ReadFile(filepath.Join(k.Dir, "tls.crt"))
	if string(before) != string(after) {
		t.Error("a denied renewal replaced the certificate")
	}
}

// A certificate for another node (a directory moved between nodes) is
// replaced; a changed bundle is copied.
func TestOtherNodeAndBundle(t *testing.T) {
	k, f, _ := setup(t)
	k.Node = "node-b"
	if _, err := k.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	k.Node = "node-a"
	if _, err := k.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f.requests() != 2 || leafOf(t, k.Dir).VerifyHostname("node-a") != nil {
		t.Fatalf("%d requests; want the node-b certificate replaced by node-a's", f.requests())
	}
	other := newFakeSigner(t, time.Now)
	if err := os.WriteFile(k.BundleFile, append(f.bundle(), other.bundle()...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(k.Dir, "ca.crt"))
	if !strings.Contains(string(got), string(other.bundle())) {
		t.Error("ca.crt did not follow the bundle file")
	}
}
