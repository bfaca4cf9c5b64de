package hostpathprovisioner

import (
	"fmt"
	"slices"

	configv1 "github.com/openshift/api/config/v1"
	secv1 "github.com/openshift/api/security/v1"
	promv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// servesKinds asks the API server's discovery, once, whether it serves
// every kind of gv. Optional APIs (prometheus-operator's, OpenShift's) are
// found this way at the operator's start: only then are they cached,
// watched and written. Asking at every reconcile would cost discovery
// requests each time, and a cache cannot be set up for kinds the server
// does not serve yet; a cluster that gains the API later gets the objects
// at the operator's next start.
func servesKinds(cfg *rest.Config, gv schema.GroupVersion, kinds ...string) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, err
	}
	list, err := dc.ServerResourcesForGroupVersion(gv.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", gv, err)
	}
	for _, k := range kinds {
		if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Kind == k }) {
			return false, nil
		}
	}
	return true, nil
}

// ServesSCC tells an OpenShift cluster by its SecurityContextConstraints
// API (render.Config's OpenShift): there, pods are admitted by SCC, and the
// node pods need SCCs of their own.
func ServesSCC(cfg *rest.Config) (bool, error) {
	return servesKinds(cfg, secv1.GroupVersion, "SecurityContextConstraints")
}

// ServesAPIServerConfig tells whether OpenShift's cluster configuration
// (config.openshift.io/v1 APIServer, which holds the cluster's TLS
// profile) is served.
func ServesAPIServerConfig(cfg *rest.Config) (bool, error) {
	return servesKinds(cfg, configv1.GroupVersion, "APIServer")
}

// ServesPrometheusOperator asks the API server, once at start, whether it
// serves prometheus-operator's ServiceMonitor and PrometheusRule. Only then
// does the operator make, cache and watch them (render.Config's
// PrometheusOperator); without them it skips them and nothing is degraded:
// the metrics Service is there for any other scraper. A cluster that
// installs prometheus-operator later gets them at the operator's next start
// (asking at every reconcile would cost discovery requests each time, and a
// cache cannot be set up for kinds the server does not serve yet).
func ServesPrometheusOperator(cfg *rest.Config) (bool, error) {
	return servesKinds(cfg, promv1.SchemeGroupVersion, promv1.ServiceMonitorsKind, promv1.PrometheusRuleKind)
}
