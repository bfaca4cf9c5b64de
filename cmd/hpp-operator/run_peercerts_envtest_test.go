package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/internal/testenv"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

// nodeNameExtra is the user extra a pod-bound service account token
// carries: the pod's node (what the signer checks).
const nodeNameExtra = "authentication.kubernetes.io/node-name"

// The manager the operator runs signs hpp-csi's peer certificates: the
// operator, as its ServiceAccount with exactly deploy/base/operator's
// RBAC, publishes the CA bundle before any request (hpp-csi asks only once
// it has the bundle), and a request made as hpp-csi's ServiceAccount with
// the rules the operator renders for it, from a pod on node-a, is approved
// and signed for node-a; no request of either side is refused.
func TestManagerSignsPeerCertificates(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	_, restCfg := testenv.Start(t, envtest.WebhookInstallOptions{})
	ctx := t.Context()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	cfg := render.DefaultConfig() // its namespace is the one rbac.yaml names
	cfg.PeerTransport = true
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cfg.Namespace}}); err != nil {
		t.Fatal(err)
	}
	for _, u := range testenv.ReadManifests(t, filepath.Join(testenv.RepoRoot(), "deploy", "base", "operator", "rbac.yaml")) {
		if err := admin.Create(ctx, u); err != nil {
			t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	csi, err := cfg.CSIObjects(&hppv1.HostPathProvisionerSpec{StoragePools: []hppv1.StoragePool{{Name: "local", Path: "/var/hpp"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range csi[:3] { // the node plugin's ServiceAccount, ClusterRole and binding
		if err := admin.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}

	var operator, plugin testenv.Counter
	asOperator := rest.CopyConfig(restCfg)
	asOperator.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + cfg.Namespace + ":" + render.OperatorDeploymentName}
	mgr, err := ctrl.NewManager(operator.Wrap(asOperator), ctrl.Options{
		Scheme:     scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := addPeerSigner(mgr, cfg, testr.New(t)); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	bundle := &corev1.ConfigMap{}
	eventually(t, "the bundle published before any request", func() error {
		return admin.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: render.PeerCABundleName}, bundle)
	})
	if bundle.Labels[render.AppLabel] != render.PeerCABundleName {
		t.Errorf("bundle labels %v", bundle.Labels)
	}

	asPlugin := rest.CopyConfig(restCfg)
	asPlugin.Impersonate = rest.ImpersonationConfig{UserName: cfg.PeerServiceAccountUser(), Extra: map[string][]string{nodeNameExtra: {"node-a"}}}
	pc, err := client.New(plugin.Wrap(asPlugin), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "node-a"}, DNSNames: []string{"node-a"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Create(ctx, &certv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "hpp-peer-node-a"},
		Spec: certv1.CertificateSigningRequestSpec{
			SignerName: contract.PeerSignerName,
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			Usages:     []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageServerAuth, certv1.UsageClientAuth},
		}}); err != nil {
		t.Fatalf("hpp-csi's request: %v", err)
	}
	csr := &certv1.CertificateSigningRequest{}
	eventually(t, "the request signed", func() error {
		if err := pc.Get(ctx, client.ObjectKey{Name: "hpp-peer-node-a"}, csr); err != nil {
			return err
		}
		if len(csr.Status.Certificate) == 0 {
			return fmt.Errorf("conditions %+v, no certificate yet", csr.Status.Conditions)
		}
		return nil
	})
	block, _ := pem.Decode(csr.Status.Certificate)
	if block == nil {
		t.Fatalf("status.certificate is not PEM: %q", csr.Status.Certificate)
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: render.PeerCABundleName}, bundle); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(bundle.Data[render.PeerCABundleKey]))
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "node-a",
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the certificate does not verify against %s as node-a: %v", render.PeerCABundleName, err)
	}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: render.PeerCASecretName}, &corev1.Secret{}); err != nil {
		t.Errorf("the CA Secret in the operator's namespace: %v", err)
	}
	if f := operator.Forbidden(); len(f) > 0 {
		t.Errorf("deploy/base/operator/rbac.yaml refused the signer %d request(s): %v", len(f), f)
	}
	if f := plugin.Forbidden(); len(f) > 0 {
		t.Errorf("the rendered node plugin ClusterRole refused %d request(s): %v", len(f), f)
	}
}

func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, what, f)
}
