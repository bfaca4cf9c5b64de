package webhook

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

func TestSelfSignedCertificateVerifiesAndRenews(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &SelfSigned{Dir: t.TempDir(), Service: "hpp-webhook", Namespace: "hpp", Validity: 90 * 24 * time.Hour,
		Now: func() time.Time { return now }, Log: logr.Discard()}
	caPEM, err := s.Ensure()
	if err != nil {
		t.Fatal(err)
	}
	verify := func(at time.Time) *x509.Certificate {
		t.Helper()
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			t.Fatal("CA PEM does not parse")
		}
		b, err := os.ReadFile(filepath.Join(s.Dir, CertFile))
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		cert, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "hpp-webhook.hpp.svc", CurrentTime: at}); err != nil {
			t.Fatalf("serving certificate does not verify for hpp-webhook.hpp.svc: %v", err)
		}
		return cert
	}
	first := verify(now)

	// Ensure is idempotent while the certificate is fresh.
	now = now.Add(30 * 24 * time.Hour)
	again, err := s.Ensure()
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(caPEM) || verify(now).SerialNumber.Cmp(first.SerialNumber) != 0 {
		t.Fatal("certificate replaced while two thirds of its validity were left")
	}
	// With less than a third left it is renewed, with a new CA.
	now = now.Add(31 * 24 * time.Hour)
	caPEM, err = s.Ensure()
	if err != nil {
		t.Fatal(err)
	}
	if renewed := verify(now); renewed.SerialNumber.Cmp(first.SerialNumber) == 0 {
		t.Fatal("certificate not renewed with less than a third of its validity left")
	}
}
