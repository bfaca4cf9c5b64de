package cluster

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
)

// PeerPort is the port every node's hpp-csi listens on for its peers
// (cross-node clones): the peers dial a node's InternalIP on the port of
// their own --peer-address, so it is one port for all.
const PeerPort = 9447

// PeerArgs are hpp-csi's flags for the peer transport on node n listening
// on ip: a certificate for n (one DNS name, the node's) from the cluster's
// peer CA, written with the CA into <node dir>/peer.
func (c *Cluster) PeerArgs(n *Node, ip net.IP) ([]string, error) {
	c.mu.Lock()
	if c.peerCA == nil {
		ca, err := newCA("hpp peer CA (test)")
		if err != nil {
			c.mu.Unlock()
			return nil, err
		}
		c.peerCA = ca
	}
	ca := c.peerCA
	c.mu.Unlock()
	kp, err := ca.issue(certRequest{CommonName: n.Name, DNSNames: []string{n.Name}, Client: true, Server: true})
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(n.dir, "peer")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	for name, data := range map[string][]byte{"tls.crt": kp.CertPEM, "tls.key": kp.KeyPEM, "ca.crt": ca.certPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, fmt.Errorf("peer credentials of %s: %w", n.Name, err)
		}
	}
	return []string{"--peer-address=" + net.JoinHostPort(ip.String(), strconv.Itoa(PeerPort)), "--peer-cert-dir=" + dir}, nil
}
