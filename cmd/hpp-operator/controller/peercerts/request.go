package peercerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"

	certv1 "k8s.io/api/certificates/v1"
)

// nodeNameKey is the user extra that the API server sets from a service
// account token bound to a pod: the pod's node (k8s.io/apiserver's
// serviceaccount.NodeNameKey; written out so the operator does not link
// the API server's packages for one string).
const nodeNameKey = "authentication.kubernetes.io/node-name"

// allowedUsages are what a peer certificate is for: serving its node's
// sources and fetching from other nodes. Key encipherment is tolerated
// (RSA key exchange clients add it), nothing else.
var allowedUsages = []certv1.KeyUsage{
	certv1.UsageDigitalSignature, certv1.UsageKeyEncipherment,
	certv1.UsageServerAuth, certv1.UsageClientAuth,
}

// Check decides whether csr may be signed: it comes from serviceAccount
// (system:serviceaccount:<namespace>:<name>) with a token bound to a pod on
// node N, and asks for a certificate naming N alone (CommonName N and one
// DNS name N), with a P-256/P-384 ECDSA or a 2048+ bit RSA key, for the
// usages above. It returns N and the parsed request, or why not.
func Check(csr *certv1.CertificateSigningRequest, serviceAccount string) (string, *x509.CertificateRequest, error) {
	spec := &csr.Spec
	if spec.Username != serviceAccount {
		return "", nil, fmt.Errorf("spec.username: %q is not hpp-csi's service account %q", spec.Username, serviceAccount)
	}
	nodes := spec.Extra[nodeNameKey]
	if len(nodes) != 1 || nodes[0] == "" {
		return "", nil, fmt.Errorf("spec.extra[%s]: %v: the request must be made with a service account token bound to a pod, which names its node", nodeNameKey, nodes)
	}
	node := nodes[0]
	for _, u := range spec.Usages {
		if !slices.Contains(allowedUsages, u) {
			return "", nil, fmt.Errorf("spec.usages: %q is not a peer certificate's usage (allowed: %v)", u, allowedUsages)
		}
	}
	if !slices.Contains(spec.Usages, certv1.UsageServerAuth) || !slices.Contains(spec.Usages, certv1.UsageClientAuth) {
		return "", nil, fmt.Errorf("spec.usages: %v must include %q and %q", spec.Usages, certv1.UsageServerAuth, certv1.UsageClientAuth)
	}
	req, err := parseRequest(spec.Request)
	if err != nil {
		return "", nil, err
	}
	if req.Subject.CommonName != node || !slices.Equal(req.DNSNames, []string{node}) {
		return "", nil, fmt.Errorf("spec.request: names CN %q and DNS %v; a peer certificate names its node %q alone", req.Subject.CommonName, req.DNSNames, node)
	}
	if len(req.IPAddresses)+len(req.URIs)+len(req.EmailAddresses) > 0 {
		return "", nil, fmt.Errorf("spec.request: IP, URI and email names are not allowed in a peer certificate")
	}
	if err := checkKey(req.PublicKey); err != nil {
		return "", nil, err
	}
	return node, req, nil
}

func parseRequest(data []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, fmt.Errorf("spec.request: not a PEM CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("spec.request: %w", err)
	}
	if err := req.CheckSignature(); err != nil {
		return nil, fmt.Errorf("spec.request: its signature does not verify: %w", err)
	}
	return req, nil
}

func checkKey(key any) error {
	switch k := key.(type) {
	case *ecdsa.PublicKey:
		if k.Curve == elliptic.P256() || k.Curve == elliptic.P384() {
			return nil
		}
		return fmt.Errorf("spec.request: ECDSA curve %s; P-256 or P-384 is required", k.Curve.Params().Name)
	case *rsa.PublicKey:
		if k.N.BitLen() >= 2048 {
			return nil
		}
		return fmt.Errorf("spec.request: RSA key of %d bits; at least 2048 are required", k.N.BitLen())
	}
	return fmt.Errorf("spec.request: key type %T; ECDSA or RSA is required", key)
}
