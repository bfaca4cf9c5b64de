package webhook_test

import (
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hppwebhook "github.com/hostpath-provisioner/hpp/cmd/hpp-operator/webhook"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

// A CR stored under upstream's CRD and webhook (a pool name that is no DNS
// label, an unknown feature gate: both refused in a new CR by hpp; a
// trailing '/' in its path, which hpp accepts too) stays editable through hpp's CRD and webhook: an update that
// leaves those values alone passes, one that brings new ones is refused
// with hpp's rule.
func TestWebhookRatchetsAnUpstreamCR(t *testing.T) {
	opts, cfg := startEnv(t)
	s := testScheme(t)
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	// Store the CR as upstream's operator ran it: without hpp's webhook.
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: "hostpathprovisioner.kubevirt.io"}, vwc); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, vwc); err != nil {
		t.Fatal(err)
	}
	stored := &hppv1.HostPathProvisioner{ObjectMeta: metav1.ObjectMeta{Name: "hostpath-provisioner"},
		Spec: hppv1.HostPathProvisionerSpec{
			StoragePools: []hppv1.StoragePool{{Name: "Fast_Pool", Path: "/var/hpp/"}},
			FeatureGates: []string{"SomeUpstreamGate"},
		}}
	if err := c.Create(ctx, stored); err != nil {
		t.Fatalf("hpp's CRD refuses a CR upstream's CRD accepts: %v", err)
	}
	if errs := hppv1.ValidateSpec(&stored.Spec); len(errs) != 2 {
		t.Fatalf("the fixture should break 2 of hpp's rules for new CRs, breaks %v", errs)
	}
	vwc.ResourceVersion = ""
	if err := c.Create(ctx, vwc); err != nil {
		t.Fatal(err)
	}
	policy, err := hppwebhook.NewTLSPolicy("", "")
	if err != nil {
		t.Fatal(err)
	}
	startWebhook(t, cfg, opts, s, policy, nil)

	update := func(f func(*hppv1.HostPathProvisionerSpec)) error {
		cur := &hppv1.HostPathProvisioner{}
		if err := c.Get(ctx, client.ObjectKey{Name: stored.Name}, cur); err != nil {
			return err
		}
		f(&cur.Spec)
		return c.Update(ctx, cur)
	}
	waitFor(t, "an update leaving upstream's values alone accepted", func() error {
		return update(func(s *hppv1.HostPathProvisionerSpec) {
			s.Workload.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
		})
	})
	if err := update(func(s *hppv1.HostPathProvisionerSpec) {
		s.StoragePools = append(s.StoragePools, hppv1.StoragePool{Name: "fast", Path: "/mnt/fast"})
	}); err != nil {
		t.Errorf("adding a valid pool beside upstream's: %v", err)
	}
	for what, c := range map[string]struct {
		edit func(*hppv1.HostPathProvisionerSpec)
		want string
	}{
		"a new pool named as upstream allowed": {
			edit: func(s *hppv1.HostPathProvisionerSpec) {
				s.StoragePools = append(s.StoragePools, hppv1.StoragePool{Name: "New_Pool", Path: "/mnt/new"})
			},
			want: `spec.storagePools[2].name: Invalid value: "New_Pool": a lowercase RFC 1123 label`,
		},
		"another unknown gate": {
			edit: func(s *hppv1.HostPathProvisionerSpec) { s.FeatureGates = append(s.FeatureGates, "Other") },
			want: `spec.featureGates[1]: Unsupported value: "Other": supported values: "Snapshotting"`,
		},
		"the upstream pool's path changed": {
			edit: func(s *hppv1.HostPathProvisionerSpec) { s.StoragePools[0].Path = "/srv/hpp" },
			want: `spec.storagePools[0].name: Invalid value: "Fast_Pool"`,
		},
	} {
		err := update(c.edit)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v\n want an error with %q", what, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "SomeUpstreamGate") {
			t.Errorf("%s: the stored gate is refused again: %v", what, err)
		}
	}
	cur := &hppv1.HostPathProvisioner{}
	if err := c.Get(ctx, client.ObjectKey{Name: stored.Name}, cur); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%v %s %s", cur.Spec.FeatureGates, cur.Spec.StoragePools[0].Name, cur.Spec.StoragePools[0].Path); got != "[SomeUpstreamGate] Fast_Pool /var/hpp/" {
		t.Errorf("stored values changed: %s", got)
	}
}
