package webhook_test

import (
	"crypto/tls"
	"errors"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr/testr"
	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/controller/hostpathprovisioner"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/internal/testenv"
	hppwebhook "github.com/hostpath-provisioner/hpp/cmd/hpp-operator/webhook"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

// TestWebhookFollowsOpenShiftTLSProfile runs the webhook server with the
// real APIServer CRD of OpenShift installed: the "cluster" object's
// profile is in force from the first handshake, a change applies to the
// next handshakes without a restart, and the environment overrides win.
func TestWebhookFollowsOpenShiftTLSProfile(t *testing.T) {
	opts, cfg := startEnv(t)
	paths, err := testenv.OpenShiftCRDPaths()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true}); err != nil {
		t.Fatalf("install OpenShift's CRDs: %v", err)
	}
	if served, err := hostpathprovisioner.ServesAPIServerConfig(cfg); err != nil || !served {
		t.Fatalf("APIServer config served: %v, %v", served, err)
	}
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, hppv1.AddToScheme, configv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	admin, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	apiServer := &configv1.APIServer{ObjectMeta: metav1.ObjectMeta{Name: hppwebhook.ClusterAPIServerName},
		Spec: configv1.APIServerSpec{TLSSecurityProfile: &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType,
			Modern: &configv1.ModernTLSProfile{}}}}
	if err := admin.Create(ctx, apiServer); err != nil {
		t.Fatal(err)
	}

	// As the operator starts (run.go): the profile is read before the
	// webhook serves, then watched.
	policy, err := hppwebhook.NewTLSPolicy("", "")
	if err != nil {
		t.Fatal(err)
	}
	watcher := &hppwebhook.ClusterTLSProfile{Reader: admin, Policy: policy, Log: testr.New(t)}
	if err := watcher.Load(ctx); err != nil {
		t.Fatal(err)
	}
	addr, _ := startWebhook(t, cfg, opts, s, policy, watcher.SetupWithManager)
	waitFor(t, "webhook server up (TLS 1.3)", func() error { return handshake(addr, tls.VersionTLS13) })

	// Modern: TLS 1.3 only.
	if err := handshake(addr, tls.VersionTLS12); err == nil {
		t.Errorf("Modern profile: a TLS 1.2 handshake succeeded")
	} else {
		t.Logf("Modern profile: TLS 1.2 refused (%v), TLS 1.3 accepted", err)
	}
	// The real kube-apiserver still reaches the webhook (failurePolicy
	// Fail: a failed handshake would refuse the create).
	cr := &hppv1.HostPathProvisioner{ObjectMeta: metav1.ObjectMeta{Name: "hpp"},
		Spec: hppv1.HostPathProvisionerSpec{PathConfig: &hppv1.PathConfig{Path: "/var/hpvolumes"}}}
	if err := admin.Create(ctx, cr, client.DryRunAll); err != nil {
		t.Errorf("kube-apiserver through the webhook under the Modern profile: %v", err)
	}

	// Old, without a restart: TLS 1.2 with a CBC suite that neither
	// Modern nor Intermediate allows.
	cbc := []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA}
	setProfile(t, admin, &configv1.TLSSecurityProfile{Type: configv1.TLSProfileOldType, Old: &configv1.OldTLSProfile{}})
	waitFor(t, "Old profile in force: TLS 1.2 with ECDHE-*-AES128-SHA", func() error { return handshake(addr, tls.VersionTLS12, cbc...) })

	// Custom: TLS 1.2 with the AES-256-GCM suites only.
	setProfile(t, admin, &configv1.TLSSecurityProfile{Type: configv1.TLSProfileCustomType, Custom: &configv1.CustomTLSProfile{
		TLSProfileSpec: configv1.TLSProfileSpec{MinTLSVersion: configv1.VersionTLS12,
			Ciphers: []string{"ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-GCM-SHA384"}}}})
	aes128 := []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}
	waitFor(t, "Custom profile in force: AES-128 refused", func() error {
		if handshake(addr, tls.VersionTLS12, aes128...) == nil {
			return errors.New("a TLS 1.2 handshake with AES-128-GCM only still succeeds")
		}
		return nil
	})
	aes256 := []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384}
	if err := handshake(addr, tls.VersionTLS12, aes256...); err != nil {
		t.Errorf("Custom profile: TLS 1.2 with AES-256-GCM: %v", err)
	}
	if err := handshake(addr, tls.VersionTLS12, cbc...); err == nil {
		t.Errorf("Custom profile: the Old profile's CBC suite still accepted")
	}

	// The overrides win over the cluster's profile: back to Modern, a
	// policy with TLS_MIN_VERSION_OVERRIDE=VersionTLS12 and one cipher.
	setProfile(t, admin, &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType, Modern: &configv1.ModernTLSProfile{}})
	overridden, err := hppwebhook.NewTLSPolicy("VersionTLS12", "ECDHE-ECDSA-CHACHA20-POLY1305,ECDHE-RSA-CHACHA20-POLY1305")
	if err != nil {
		t.Fatal(err)
	}
	w2 := &hppwebhook.ClusterTLSProfile{Reader: admin, Policy: overridden, Log: testr.New(t)}
	if err := w2.Load(ctx); err != nil {
		t.Fatal(err)
	}
	addr2 := serveTLS(t, overridden, opts.LocalServingCertDir)
	chacha := []uint16{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256}
	if err := handshake(addr2, tls.VersionTLS12, chacha...); err != nil {
		t.Errorf("overrides over Modern: TLS 1.2 with the override's cipher: %v", err)
	}
	if err := handshake(addr2, tls.VersionTLS12, aes256...); err == nil {
		t.Errorf("overrides over Modern: a cipher outside TLS_CIPHERS_OVERRIDE accepted")
	}
}

func setProfile(t *testing.T, admin client.Client, p *configv1.TLSSecurityProfile) {
	t.Helper()
	waitFor(t, "update APIServer "+string(p.Type), func() error {
		cur := &configv1.APIServer{}
		if err := admin.Get(t.Context(), client.ObjectKey{Name: hppwebhook.ClusterAPIServerName}, cur); err != nil {
			return err
		}
		cur.Spec.TLSSecurityProfile = p
		return admin.Update(t.Context(), cur)
	})
}

// handshake completes a TLS handshake of at most version max, offering
// only ciphers (TLS 1.2 and older; none: Go's defaults).
func handshake(addr string, maxVersion uint16, ciphers ...uint16) error {
	conn, err := tls.Dial("tcp", addr, &tls.Config{ //nolint:gosec // only the protocol is checked, not the peer
		InsecureSkipVerify: true, MinVersion: tls.VersionTLS10, MaxVersion: maxVersion, CipherSuites: ciphers})
	if err != nil {
		return err
	}
	return conn.Close()
}

// serveTLS serves bare TLS handshakes with the policy and the certificate
// in dir, as the webhook server does.
func serveTLS(t *testing.T, policy *hppwebhook.TLSPolicy, dir string) string {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}} //nolint:gosec // the policy sets the minimum version
	policy.Apply(c)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_ = conn.(*tls.Conn).Handshake()
			_ = conn.Close()
		}
	}()
	return ln.Addr().String()
}
