package peercerts

import (
	"context"
	"crypto/elliptic"
	"crypto/x509"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"
	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/internal/testenv"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// On a real kube-apiserver: requests made as hpp-csi's service account
// with a pod-bound token's node (impersonated: the API server records the
// impersonated user and extra in the request, as it does for a real token)
// are approved and signed for their own node and denied for another; the
// CA Secret and the bundle are made once and the certificate verifies
// against the bundle.
func TestSignerOnAPIServer(t *testing.T) {
	_, cfg := testenv.Start(t, envtest.WebhookInstallOptions{})
	ctx := context.Background()
	admin, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "hpp"}}); err != nil {
		t.Fatal(err)
	}
	// What hpp-csi's service account needs to ask (and read its answer).
	rules := []rbacv1.PolicyRule{{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"create", "get"}}}
	if err := admin.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "peer-requester"}, Rules: rules}); err != nil {
		t.Fatal(err)
	}
	if err := admin.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "peer-requester"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "peer-requester"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "hpp", Name: "hostpath-provisioner-admin-csi"}}}); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: admin, APIReader: admin, Namespace: "hpp", ServiceAccount: testSA, Log: testr.New(t)}

	submit := func(name, node, asks string) *certv1.CertificateSigningRequest {
		t.Helper()
		as := rest.CopyConfig(cfg)
		as.Impersonate = rest.ImpersonationConfig{UserName: testSA, Extra: map[string][]string{nodeNameKey: {node}}}
		c, err := client.New(as, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		csr := &certv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: certv1.CertificateSigningRequestSpec{
			SignerName: contract.PeerSignerName,
			Request:    requestPEM(t, ecKey(t, elliptic.P256()), asks, []string{asks}, nil),
			Usages:     []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageServerAuth, certv1.UsageClientAuth},
		}}
		if err := c.Create(ctx, csr); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}); err != nil {
			t.Fatalf("reconcile %s: %v", name, err)
		}
		got := &certv1.CertificateSigningRequest{}
		if err := admin.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
			t.Fatal(err)
		}
		return got
	}

	own := submit("node-a-peer", "node-a", "node-a")
	if !hasCondition(own, certv1.CertificateApproved) || len(own.Status.Certificate) == 0 {
		t.Fatalf("own node's request: conditions %+v, %d certificate bytes; want approved and signed", own.Status.Conditions, len(own.Status.Certificate))
	}
	bundle := &corev1.ConfigMap{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: "hpp", Name: PeerCABundle}, bundle); err != nil {
		t.Fatalf("bundle ConfigMap: %v", err)
	}
	leaf, err := parseCert(own.Status.Certificate, "status.certificate")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(bundle.Data["ca.crt"]))
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "node-a", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("the issued certificate does not verify against %s as node-a: %v", PeerCABundle, err)
	}

	stolen := submit("node-b-asks-for-a", "node-b", "node-a")
	if len(stolen.Status.Certificate) != 0 || !hasCondition(stolen, certv1.CertificateDenied) {
		t.Fatalf("node-b asking for node-a's name: conditions %+v; want denied, unsigned", stolen.Status.Conditions)
	}
	for _, c := range stolen.Status.Conditions {
		if c.Type == certv1.CertificateDenied && (c.Reason != reasonDenied || !strings.Contains(c.Message, `names its node "node-b" alone`)) {
			t.Errorf("Denied condition %s: %q; want the reason naming node-b", c.Reason, c.Message)
		}
	}

	// A second request reuses the CA: one Secret, same CA certificate.
	again := submit("node-c-peer", "node-c", "node-c")
	second, err := parseCert(again.Status.Certificate, "status.certificate")
	if err != nil {
		t.Fatal(err)
	}
	if string(second.RawIssuer) != string(leaf.RawIssuer) || second.CheckSignatureFrom(mustCA(t, admin)) != nil {
		t.Errorf("the second certificate is not signed by the same CA")
	}
}

func mustCA(t *testing.T, c client.Client) *x509.Certificate {
	t.Helper()
	s := &corev1.Secret{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "hpp", Name: PeerCASecret}, s); err != nil {
		t.Fatal(err)
	}
	ca, err := LoadCA(s.Data)
	if err != nil {
		t.Fatal(err)
	}
	return ca.Cert
}
