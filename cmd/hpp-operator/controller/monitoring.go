package controller

import (
	"fmt"
	"slices"

	promv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// ServesPrometheusOperator asks the API server, once at start, whether it
// serves prometheus-operator's ServiceMonitor and PrometheusRule. Only then
// does the operator make, cache and watch them (render.Config's
// PrometheusOperator); without them it skips them and nothing is degraded:
// the metrics Service is there for any other scraper. A cluster that
// installs prometheus-operator later gets them at the operator's next start
// (asking at every reconcile would cost discovery requests each time, and a
// cache cannot be set up for kinds the server does not serve yet).
func ServesPrometheusOperator(cfg *rest.Config) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, err
	}
	list, err := dc.ServerResourcesForGroupVersion(promv1.SchemeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", promv1.SchemeGroupVersion, err)
	}
	var kinds []string
	for _, r := range list.APIResources {
		kinds = append(kinds, r.Kind)
	}
	return slices.Contains(kinds, promv1.ServiceMonitorsKind) && slices.Contains(kinds, promv1.PrometheusRuleKind), nil
}
