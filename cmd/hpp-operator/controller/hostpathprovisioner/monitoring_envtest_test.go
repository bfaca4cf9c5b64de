package hostpathprovisioner_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	promv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/controller/hostpathprovisioner"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/internal/testenv"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

// Without prometheus-operator the operator finds no monitoring API and makes
// only the metrics Service; once its CRDs are served, an operator started
// then makes upstream's ServiceMonitor, PrometheusRule and Prometheus RBAC,
// restores a deleted one, and writes nothing in the steady state.
func TestPrometheusObjectsFollowPrometheusOperator(t *testing.T) {
	needUnserved(t, "before its CRDs", hostpathprovisioner.ServesPrometheusOperator)
	h := startWith(t, "hpp-monitoring", options{
		setup: func(admin client.Client) { servePrometheusOperator(t, admin) },
		config: func(cfg *render.Config) {
			cfg.PrometheusOperator = true
			cfg.MonitoringNamespace = "openshift-monitoring"
			cfg.RunbookURLTemplate = "https://runbooks.example/hpp/%s.md"
		},
	})
	ns := h.cfg.Namespace
	h.create(poolsCR("hpp", hppv1.StoragePool{Name: "local", Path: "/var/hpp"}))
	setDaemonSetReady(t, h, ns, render.CSIDaemonSetName, 1)
	waitAvailable(t, h, "hpp")

	svc := &corev1.Service{}
	if err := h.get(client.ObjectKey{Namespace: ns, Name: render.MetricsServiceName}, svc); err != nil {
		t.Fatal(err)
	}
	// Upstream's literal values: the Service, the TLS port, the labels.
	if p := svc.Spec.Ports; svc.Spec.Selector["prometheus.hostpathprovisioner.kubevirt.io"] != "true" || len(p) != 1 ||
		p[0].Name != "metrics" || p[0].Port != 8443 || p[0].TargetPort.StrVal != "metrics" {
		t.Errorf("metrics Service spec %+v; want port metrics 8443 -> metrics on the pods labelled prometheus.hostpathprovisioner.kubevirt.io=true", svc.Spec)
	}
	ds := &appsv1.DaemonSet{}
	if err := h.get(client.ObjectKey{Namespace: ns, Name: render.CSIDaemonSetName}, ds); err != nil {
		t.Fatal(err)
	}
	if ds.Spec.Template.Labels["prometheus.hostpathprovisioner.kubevirt.io"] != "true" || ds.Spec.Selector.MatchLabels[render.PrometheusLabel] != "" ||
		ds.Spec.Template.Labels["app.kubernetes.io/component"] != "storage" {
		t.Errorf("node pods: template labels %v, selector %v; want the metrics label and component storage on the pods only", ds.Spec.Template.Labels, ds.Spec.Selector.MatchLabels)
	}
	if !slices.Contains(ds.Spec.Template.Spec.Containers[0].Args, "--metrics-address=:8443") ||
		!slices.Contains(ds.Spec.Template.Spec.Containers[0].Args, "--metrics-tls-version=VersionTLS12") {
		t.Errorf("hpp-csi args %v; want upstream's TLS metrics on :8443 at the Intermediate profile's VersionTLS12", ds.Spec.Template.Spec.Containers[0].Args)
	}

	rule := &promv1.PrometheusRule{}
	if err := h.get(client.ObjectKey{Namespace: ns, Name: render.PrometheusRuleName}, rule); err != nil {
		t.Fatal(err)
	}
	alerts := map[string]promv1.Rule{}
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts[r.Alert] = r
			}
		}
	}
	for _, name := range []string{"HPPOperatorDown", "HPPNotReady", "HPPSharingPoolPathWithOS", "HPPPoolFullSoon", "HPPVolumesStranded"} {
		a, ok := alerts[name]
		if !ok {
			t.Errorf("PrometheusRule has no alert %s (has %v)", name, alerts)
			continue
		}
		if want := "https://runbooks.example/hpp/" + name + ".md"; a.Annotations["runbook_url"] != want || a.Labels["severity"] == "" {
			t.Errorf("alert %s: annotations %v labels %v; want runbook_url %s and a severity", name, a.Annotations, a.Labels, want)
		}
	}
	if g := rule.Spec.Groups; len(g) != 2 || g[0].Name != "recordingRules.rules" || g[1].Name != "alerts.rules" ||
		len(g[0].Rules) != 2 || g[0].Rules[1].Record != "kubevirt_hpp_operator_up" || g[0].Rules[1].Expr.String() != g[0].Rules[0].Expr.String() {
		t.Errorf("rule groups %+v; want upstream's recordingRules.rules (both records) and alerts.rules", g)
	}
	rec := rule.Spec.Groups[0].Rules[0]
	if want := "sum(up{namespace='" + ns + "', pod=~'hostpath-provisioner-operator-.*'} or vector(0))"; rec.Record != "cluster:kubevirt_hpp_operator_up:sum" || rec.Expr.String() != want {
		t.Errorf("recording rule %s: %q; want upstream's cluster:kubevirt_hpp_operator_up:sum: %q", rec.Record, rec.Expr.String(), want)
	}
	for name, want := range map[string]string{
		"HPPOperatorDown":          "cluster:kubevirt_hpp_operator_up:sum == 0",
		"HPPNotReady":              "kubevirt_hpp_cr_ready == 0",
		"HPPSharingPoolPathWithOS": "kubevirt_hpp_pool_path_shared_with_os == 1",
	} {
		if a := alerts[name]; a.Expr.String() != want {
			got := a.Expr.String()
			t.Errorf("alert %s: expr %q; want upstream's %q", name, got, want)
		}
	}
	binding := &rbacv1.RoleBinding{}
	if err := h.get(client.ObjectKey{Namespace: ns, Name: render.MonitoringRBACName}, binding); err != nil {
		t.Fatal(err)
	}
	if s := binding.Subjects; len(s) != 1 || s[0].Name != "prometheus-k8s" || s[0].Namespace != "openshift-monitoring" {
		t.Errorf("Prometheus RoleBinding subjects %+v; want prometheus-k8s of MONITORING_NAMESPACE", s)
	}
	mon := &promv1.ServiceMonitor{}
	if err := h.get(client.ObjectKey{Namespace: ns, Name: "service-monitor-hpp"}, mon); err != nil {
		t.Fatal(err)
	}
	// Upstream's (observed from its operator at 03d4d671): scheme "https",
	// insecureSkipVerify, minVersion the profile's minimum.
	if e := mon.Spec.Endpoints; len(e) != 1 || e[0].Port != "metrics" || e[0].Scheme == nil || string(*e[0].Scheme) != "https" ||
		e[0].TLSConfig == nil || e[0].TLSConfig.InsecureSkipVerify == nil || !*e[0].TLSConfig.InsecureSkipVerify ||
		e[0].TLSConfig.MinVersion == nil || *e[0].TLSConfig.MinVersion != "TLS12" {
		t.Errorf("ServiceMonitor endpoints %+v; want port metrics over https, insecureSkipVerify (self-signed pods), minVersion TLS12", e)
	}
	if err := h.admin.Delete(h.ctx, mon); err != nil {
		t.Fatal(err)
	}
	eventually(t, "deleted ServiceMonitor restored", func() error {
		return h.get(client.ObjectKey{Namespace: ns, Name: render.ServiceMonitorName}, &promv1.ServiceMonitor{})
	})
	assertSteadyStateWritesNothing(t, h, "hpp")

	h.deleteAllCRs()
	eventually(t, "PrometheusRule gone with the CR", func() error {
		err := h.get(client.ObjectKey{Namespace: ns, Name: render.PrometheusRuleName}, &promv1.PrometheusRule{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %w", err)
	})
}

// servePrometheusOperator installs stand-ins of prometheus-operator's CRDs
// until the test ends, and waits until discovery serves them.
func servePrometheusOperator(t *testing.T, admin client.Client) {
	crds := testenv.PrometheusOperatorCRDs()
	for _, crd := range crds {
		// An earlier test's copy may still be terminating.
		eventually(t, "create CRD "+crd.Name, func() error {
			return admin.Create(t.Context(), crd.DeepCopy())
		})
	}
	t.Cleanup(func() {
		for _, crd := range crds {
			_ = admin.Delete(context.Background(), crd)
		}
	})
	waitServed(t, "prometheus-operator's API served", hostpathprovisioner.ServesPrometheusOperator, true)
}
