package controller

import (
	promv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
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
	return servesKinds(cfg, promv1.SchemeGroupVersion, promv1.ServiceMonitorsKind, promv1.PrometheusRuleKind)
}
