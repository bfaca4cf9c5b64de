// Package peercerts is the signer of hpp-csi's peer certificates: the
// mutual TLS that nodes use to stream a clone's or a restore's source to
// each other (cmd/hpp-csi/peer).
//
// Each hpp-csi asks for its own certificate with a CertificateSigningRequest
// of signerName contract.PeerSignerName, made with its pod's bound service
// account token. The API server records who asked in the request
// (spec.username, spec.extra): the CSI driver's service account and, since
// the token is bound to a pod, the node that pod runs on
// (authentication.kubernetes.io/node-name). This controller approves and
// signs a request only when the certificate it asks for names exactly that
// node, so a node plugin can only ever get a certificate for its own node,
// and a peer's certificate is proof of the node it serves from. Anything
// else is denied with the reason in the Denied condition; requests of other
// signers are not touched.
//
// The CA is the operator's own (ca.go): a key and certificate in the
// Secret PeerCASecret of the operator's namespace, made at first need and
// replaced before it expires. Its certificates (the current one and, for a
// rotation's overlap, the previous) are what peers trust (Bundle).
package peercerts
