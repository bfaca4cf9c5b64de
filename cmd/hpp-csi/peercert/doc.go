// Package peercert keeps this node's peer certificate (cross-node clones,
// cmd/hpp-csi/peer) in a directory that peer.LoadCredentials reads: tls.key,
// tls.crt and ca.crt.
//
// The certificate comes from the operator's signer
// (cmd/hpp-operator/controller/peercerts) through a CertificateSigningRequest
// of signerName contract.PeerSignerName, made with the pod's bound service
// account token, so that the API server records the pod's node in the
// request and the signer can check the certificate names that node only.
// A new key is made for every request; the key never leaves the node.
// The certificate is renewed at two thirds of its life, and ca.crt follows
// the bundle file the operator's ConfigMap mounts (a CA rotation keeps the
// old CA in it until every certificate it signed has been renewed).
//
// Files are replaced by rename, key before certificate: a reader that sees
// a new key with the old certificate finds them mismatched and keeps the
// last good pair (peer.LoadCredentials), and sees the new pair next time.
package peercert
