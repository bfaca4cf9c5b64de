package serve

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"sync"
	"time"
)

// MetricsTLS serves /metrics over TLS as the KubeVirt plugin does: with the
// given certificate and key, or, when none is given, a self-signed one made
// in memory at start (it only encrypts; a scraper that verifies needs a
// real certificate, or the pod's IP among Hosts).
type MetricsTLS struct {
	CertFile, KeyFile string
	// MinVersion is a tls.VersionTLS1x constant.
	MinVersion uint16
	// Hosts are the DNS names and IPs of the self-signed certificate.
	Hosts []string
	// Now is the clock for the self-signed certificate (nil: time.Now).
	Now func() time.Time
}

// tlsVersions are the KubeVirt plugin's --metrics-tls-version values.
var tlsVersions = map[string]uint16{
	"VersionTLS10": tls.VersionTLS10,
	"VersionTLS11": tls.VersionTLS11,
	"VersionTLS12": tls.VersionTLS12,
	"VersionTLS13": tls.VersionTLS13,
}

// ParseTLSVersion reads a --metrics-tls-version value.
func ParseTLSVersion(s string) (uint16, error) {
	if v, ok := tlsVersions[s]; ok {
		return v, nil
	}
	return 0, fmt.Errorf("%q is not one of VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13", s)
}

// selfSignedLifetime is how long a generated certificate is valid; it is
// made again when it is within selfSignedRenew of expiring, so a driver that
// runs for years never serves an expired one.
const (
	selfSignedLifetime = 365 * 24 * time.Hour
	selfSignedRenew    = 24 * time.Hour
)

// Config returns the server TLS configuration. Certificate files are read
// now (a bad pair fails the start) and again whenever they change on disk,
// so a rotated certificate is served without a restart.
func (m MetricsTLS) Config() (*tls.Config, error) {
	if (m.CertFile == "") != (m.KeyFile == "") {
		return nil, errors.New("--metrics-cert-file and --metrics-key-file must be given together")
	}
	if m.Now == nil {
		m.Now = time.Now
	}
	src := &certSource{m: m}
	if _, err := src.get(); err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: m.MinVersion,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return src.get()
		},
	}, nil
}

// certSource holds the certificate being served and what it was made from.
type certSource struct {
	m MetricsTLS

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string    // files' size and mtime when cert was read
	expires time.Time // of a self-signed cert
}

func (s *certSource) get() (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m.CertFile == "" {
		if s.cert == nil || s.m.Now().After(s.expires.Add(-selfSignedRenew)) {
			cert, expires, err := selfSigned(s.m.Hosts, s.m.Now())
			if err != nil {
				return nil, err
			}
			s.cert, s.expires = cert, expires
		}
		return s.cert, nil
	}
	stamp, err := fileStamp(s.m.CertFile, s.m.KeyFile)
	if err != nil {
		if s.cert != nil {
			return s.cert, nil // mid-rotation: keep serving the last good pair
		}
		return nil, err
	}
	if s.cert != nil && stamp == s.stamp {
		return s.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(s.m.CertFile, s.m.KeyFile)
	if err != nil {
		if s.cert != nil {
			return s.cert, nil
		}
		return nil, fmt.Errorf("--metrics-cert-file %s and --metrics-key-file %s: %w", s.m.CertFile, s.m.KeyFile, err)
	}
	s.cert, s.stamp = &cert, stamp
	return s.cert, nil
}

func fileStamp(paths ...string) (string, error) {
	var stamp string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return "", err
		}
		stamp += fmt.Sprintf("%s:%d:%d;", p, fi.Size(), fi.ModTime().UnixNano())
	}
	return stamp, nil
}

// selfSigned makes an ECDSA P-256 certificate for localhost, 127.0.0.1 and
// hosts.
func selfSigned(hosts []string, now time.Time) (*tls.Certificate, time.Time, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("self-signed metrics certificate: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("self-signed metrics certificate: %w", err)
	}
	expires := now.Add(selfSignedLifetime)
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "hpp-csi metrics"},
		NotBefore:             now.Add(-time.Hour), // tolerate a scraper's clock skew
		NotAfter:              expires,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("self-signed metrics certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("self-signed metrics certificate: %w", err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, expires, nil
}
