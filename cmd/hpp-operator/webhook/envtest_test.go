package webhook_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/internal/testenv"
	hppwebhook "github.com/hostpath-provisioner/hpp/cmd/hpp-operator/webhook"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

// TestWebhookCalledByRealAPIServer installs the webhook configuration of
// deploy/base/operator (envtest points it at a local server) and checks the
// rules only the webhook enforces, as the real kube-apiserver reports them.
func TestWebhookCalledByRealAPIServer(t *testing.T) {
	opts, cfg := startEnv(t)
	s := testScheme(t)
	policy, err := hppwebhook.NewTLSPolicy("", "")
	if err != nil {
		t.Fatal(err)
	}
	addr, stop := startWebhook(t, cfg, opts, s, policy, nil)
	ctx := t.Context()
	var state tls.ConnectionState
	waitFor(t, "webhook server up", func() error {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}}) //nolint:gosec // only the protocol is checked
		if err != nil {
			return err
		}
		state = conn.ConnectionState()
		return conn.Close()
	})
	if state.NegotiatedProtocol == "h2" {
		t.Errorf("webhook server speaks HTTP/2")
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}

	first := &hppv1.HostPathProvisioner{ObjectMeta: metav1.ObjectMeta{Name: "first"},
		Spec: hppv1.HostPathProvisionerSpec{StoragePools: []hppv1.StoragePool{{Name: "local", Path: "/var/hpp"}}}}
	if err := c.Create(ctx, first); err != nil {
		t.Fatalf("valid CR refused: %v", err)
	}
	// The manager's cache must see the first CR before a second is judged.
	waitFor(t, "second CR refused", func() error {
		second := &hppv1.HostPathProvisioner{ObjectMeta: metav1.ObjectMeta{Name: "second"},
			Spec: hppv1.HostPathProvisionerSpec{PathConfig: &hppv1.PathConfig{Path: "/var/other"}}}
		err := c.Create(ctx, second)
		if err == nil {
			_ = c.Delete(ctx, second)
			return fmt.Errorf("second CR accepted")
		}
		want := `admission webhook "validate.hostpathprovisioner.kubevirt.io" denied the request: HostPathProvisioner.hostpathprovisioner.kubevirt.io "second" is invalid: metadata.name: Forbidden: HostPathProvisioner "first" already exists and hpp runs from exactly one; edit that one instead`
		if err.Error() != want {
			t.Fatalf("second CR:\n got  %v\n want %s", err, want)
		}
		return nil
	})

	// A volume in pool local: re-pathing or renaming the pool is refused.
	pv := testenv.DriverPV("pvc-0001", "local", "")
	if err := c.Create(ctx, pv); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "re-pathing refused", func() error {
		cur := &hppv1.HostPathProvisioner{}
		if err := c.Get(ctx, client.ObjectKey{Name: "first"}, cur); err != nil {
			return err
		}
		cur.Spec.StoragePools[0].Path = "/mnt/elsewhere"
		err := c.Update(ctx, cur)
		if err == nil {
			t.Fatal("re-pathing a pool with a volume was accepted")
		}
		if !strings.Contains(err.Error(), `spec.storagePools[0].path: Forbidden: pool "local" holds 1 volume(s) in /var/hpp; moving it to /mnt/elsewhere would orphan them. To move a pool safely: add a new pool at the new path`) {
			return fmt.Errorf("not yet the orphan rule (cache may lag): %w", err)
		}
		return nil
	})
	cur := &hppv1.HostPathProvisioner{}
	if err := c.Get(ctx, client.ObjectKey{Name: "first"}, cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.StoragePools[0].Name = "renamed"
	if err := c.Update(ctx, cur); err == nil || !strings.Contains(err.Error(), `pool "local" (path /var/hpp) holds 1 volume(s) and is missing from the new spec`) {
		t.Fatalf("renaming a pool with a volume: %v", err)
	}
	// Metadata-only updates pass; deletion is never intercepted.
	if err := c.Get(ctx, client.ObjectKey{Name: "first"}, cur); err != nil {
		t.Fatal(err)
	}
	cur.Labels = map[string]string{"touched": "yes"}
	if err := c.Update(ctx, cur); err != nil {
		t.Fatalf("metadata update refused: %v", err)
	}
	if err := stop(); err != nil { // webhook server gone: DELETE must still work
		t.Fatalf("manager: %v", err)
	}
	if err := c.Delete(context.Background(), cur); err != nil {
		t.Fatalf("delete with the webhook down: %v", err)
	}
	if err := c.Create(context.Background(), &hppv1.HostPathProvisioner{ObjectMeta: metav1.ObjectMeta{Name: "third"},
		Spec: hppv1.HostPathProvisionerSpec{PathConfig: &hppv1.PathConfig{Path: "/x"}}}); err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Fatalf("create with the webhook down should fail closed (failurePolicy Fail): %v", err)
	}

	testPatchCABundle(t, cfg, s)
}

// testPatchCABundle: the self-signed mode sets the CA bundle of the
// webhooks that call its Service, and writes nothing when it is current.
func testPatchCABundle(t *testing.T, cfg *rest.Config, s *runtime.Scheme) {
	t.Helper()
	var counter testenv.Counter
	c, err := client.New(counter.Wrap(cfg), client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "hpp-ca-test"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "validate.hpp-ca-test.example.com",
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
				Name: "hpp-webhook", Namespace: "hpp", Path: ptr.To("/x")}},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"CREATE"},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"example.com"}, APIVersions: []string{"v1"}, Resources: []string{"nothings"}}}},
		}},
	}
	if err := c.Create(ctx, vwc); err != nil {
		t.Fatal(err)
	}
	ss := &hppwebhook.SelfSigned{Dir: t.TempDir(), Service: "hpp-webhook", Namespace: "hpp", ConfigName: "hpp-ca-test",
		Client: c, Log: logr.Discard()}
	ca, err := ss.Ensure()
	if err != nil {
		t.Fatal(err)
	}
	if err := ss.PatchCABundle(ctx, ca); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(vwc), vwc); err != nil {
		t.Fatal(err)
	}
	if string(vwc.Webhooks[0].ClientConfig.CABundle) != string(ca) {
		t.Fatal("caBundle not patched")
	}
	counter.Reset()
	if err := ss.PatchCABundle(ctx, ca); err != nil {
		t.Fatal(err)
	}
	if n, w := counter.Writes(); n != 0 {
		t.Errorf("PatchCABundle with a current bundle wrote: %v", w)
	}
}

func waitFor(t *testing.T, what string, f func() error) {
	t.Helper()
	testutil.Eventually(t, 60*time.Second, what, f)
}
