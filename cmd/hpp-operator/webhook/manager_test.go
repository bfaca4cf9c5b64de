package webhook_test

import (
	"context"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/internal/testenv"
	hppwebhook "github.com/hostpath-provisioner/hpp/cmd/hpp-operator/webhook"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

// startEnv starts envtest with the webhook configuration of
// deploy/base/operator pointed at a local server.
func startEnv(t *testing.T) (envtest.WebhookInstallOptions, *rest.Config) {
	t.Helper()
	ctrl.SetLogger(logr.Discard())
	env, cfg := testenv.Start(t, envtest.WebhookInstallOptions{
		Paths: []string{filepath.Join(testenv.RepoRoot(), "deploy", "base", "operator", "webhook.yaml")},
	})
	return env.WebhookInstallOptions, cfg
}

// startWebhook runs a manager with the webhook server (envtest's serving
// address and certificate, the policy's TLS) and the validator, plus what
// setup adds, until the test ends or stop is called; it returns the
// server's address.
func startWebhook(t *testing.T, cfg *rest.Config, opts envtest.WebhookInstallOptions, s *runtime.Scheme,
	policy *hppwebhook.TLSPolicy, setup func(ctrl.Manager) error) (addr string, stop func() error) {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:        s,
		Metrics:       metricsserver.Options{BindAddress: "0"},
		Controller:    config.Controller{SkipNameValidation: ptr.To(true)},
		WebhookServer: hppwebhook.NewServer(opts.LocalServingHost, opts.LocalServingPort, opts.LocalServingCertDir, policy),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := hppwebhook.Register(mgr); err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		if err := setup(mgr); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stop = sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return net.JoinHostPort(opts.LocalServingHost, strconv.Itoa(opts.LocalServingPort)), stop
}

// testScheme holds client-go's kinds and hpp's CRD, for the tests' clients.
func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := hppv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}
