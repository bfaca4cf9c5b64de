package serve

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// handshake connects to a TLS server made from cfg and returns the
// certificate it served.
func handshake(t *testing.T, cfg *tls.Config, client *tls.Config) (*x509.Certificate, error) {
	t.Helper()
	lis, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	go func() {
		c, err := lis.Accept()
		if err == nil {
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
	}()
	conn, err := tls.Dial("tcp", lis.Addr().String(), client)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

func TestMetricsTLSSelfSigned(t *testing.T) {
	cfg, err := MetricsTLS{MinVersion: tls.VersionTLS13, Hosts: []string{"10.1.2.3", "hpp-metrics"}}.Config()
	if err != nil {
		t.Fatal(err)
	}
	cert, err := handshake(t, cfg, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test checks the served certificate itself
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, ip := range cert.IPAddresses {
		ips = append(ips, ip.String())
	}
	if !strings.Contains(strings.Join(ips, ","), "10.1.2.3") || !strings.Contains(strings.Join(cert.DNSNames, ","), "hpp-metrics") {
		t.Fatalf("self-signed certificate names %v %v; want the pod IP and service name", ips, cert.DNSNames)
	}
	// The minimum version is enforced.
	if _, err := handshake(t, cfg, &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12}); err == nil { //nolint:gosec // see above
		t.Fatal("a TLS 1.2 client got through a VersionTLS13 minimum")
	}
}

// writePair writes a self-signed certificate for name as PEM files.
func writePair(t *testing.T, dir, name string) (string, string) {
	t.Helper()
	c, _, err := selfSigned([]string{name}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	key, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for f, block := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: c.Certificate[0]}, keyFile: {Type: "PRIVATE KEY", Bytes: key}} {
		if err := os.WriteFile(f+".tmp", pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(f+".tmp", f); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}

func TestMetricsTLSFilesAreReloaded(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writePair(t, dir, "first.example")
	cfg, err := MetricsTLS{CertFile: certFile, KeyFile: keyFile, MinVersion: tls.VersionTLS12}.Config()
	if err != nil {
		t.Fatal(err)
	}
	client := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the test checks the served certificate itself
	if c, err := handshake(t, cfg, client); err != nil || !strings.Contains(strings.Join(c.DNSNames, ","), "first.example") {
		t.Fatalf("served %v, %v; want the first certificate", c, err)
	}
	// cert-manager rotates the pair in place.
	writePair(t, dir, "second.example")
	if c, err := handshake(t, cfg, client); err != nil || !strings.Contains(strings.Join(c.DNSNames, ","), "second.example") {
		t.Fatalf("served %v, %v; want the rotated certificate", c, err)
	}
}

func TestMetricsTLSRefusesBadFiles(t *testing.T) {
	_, err := MetricsTLS{CertFile: "/nonexistent/tls.crt", KeyFile: "/nonexistent/tls.key"}.Config()
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/tls.crt") {
		t.Fatalf("Config = %v, want an error naming the certificate file", err)
	}
	if _, err := (MetricsTLS{CertFile: "/x"}).Config(); err == nil || !strings.Contains(err.Error(), "must be given together") {
		t.Fatalf("Config with a certificate and no key = %v", err)
	}
	if _, err := ParseTLSVersion("VersionTLS14"); err == nil || !strings.Contains(err.Error(), `"VersionTLS14" is not one of`) {
		t.Fatalf("ParseTLSVersion = %v", err)
	}
}
