package peer

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// The files of a Kubernetes TLS Secret (with the CA added), as a Secret
// volume mounts them.
const (
	certFile = "tls.crt"
	keyFile  = "tls.key"
	caFile   = "ca.crt"
)

// Credentials are this node's certificate and key and the CA that signs
// every node's, read from a directory. They are read again at each
// handshake and parsed again when the files' bytes changed: a Secret
// volume swaps its files atomically when the Secret is rotated, and the
// next connection uses the new ones. A set that cannot be used (a file
// missing or a key that does not match, in the middle of a rotation done by
// hand) keeps the last good one; the first read must succeed.
type Credentials struct {
	dir string

	mu   sync.Mutex
	raw  [3][]byte // the bytes of cert, key and CA last parsed
	cert *tls.Certificate
	pool *x509.CertPool
}

// LoadCredentials reads dir/tls.crt, dir/tls.key and dir/ca.crt.
func LoadCredentials(dir string) (*Credentials, error) {
	c := &Credentials{dir: dir}
	if _, _, err := c.current(); err != nil {
		return nil, err
	}
	return c, nil
}

// PendingCredentials reads dir like LoadCredentials, but the files may
// come later: until they do, every handshake fails with the reason (a
// certificate still being issued, cmd/hpp-csi/peercert).
func PendingCredentials(dir string) *Credentials { return &Credentials{dir: dir} }

// current returns the certificate and CA pool to use now.
func (c *Credentials) current() (*tls.Certificate, *x509.CertPool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	raw, err := c.read()
	if err == nil && c.cert != nil && bytes.Equal(raw[0], c.raw[0]) && bytes.Equal(raw[1], c.raw[1]) && bytes.Equal(raw[2], c.raw[2]) {
		return c.cert, c.pool, nil
	}
	var cert tls.Certificate
	var pool *x509.CertPool
	if err == nil {
		cert, pool, err = parse(raw)
	}
	if err != nil {
		if c.cert != nil {
			return c.cert, c.pool, nil // keep the last good set
		}
		return nil, nil, fmt.Errorf("peer credentials in %s: %w", c.dir, err)
	}
	c.raw, c.cert, c.pool = raw, &cert, pool
	return c.cert, c.pool, nil
}

func (c *Credentials) read() ([3][]byte, error) {
	var raw [3][]byte
	for i, name := range []string{certFile, keyFile, caFile} {
		data, err := os.ReadFile(filepath.Join(c.dir, name))
		if err != nil {
			return raw, err
		}
		raw[i] = data
	}
	return raw, nil
}

func parse(raw [3][]byte) (tls.Certificate, *x509.CertPool, error) {
	cert, err := tls.X509KeyPair(raw[0], raw[1])
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("%s and %s: %w", certFile, keyFile, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(raw[2]) {
		return tls.Certificate{}, nil, fmt.Errorf("%s: %w", caFile, errors.New("no PEM certificate in it"))
	}
	return cert, pool, nil
}

// nodeOf is the node a verified certificate names: its one DNS subject
// alternative name.
func nodeOf(cert *x509.Certificate) (string, error) {
	switch n := len(cert.DNSNames); n {
	case 1:
		return cert.DNSNames[0], nil
	case 0:
		return "", fmt.Errorf("the client certificate (subject %q) has no DNS name; a node certificate names its node by exactly one", cert.Subject)
	default:
		return "", fmt.Errorf("the client certificate (subject %q) has %d DNS names; a node certificate names its node by exactly one", cert.Subject, n)
	}
}
