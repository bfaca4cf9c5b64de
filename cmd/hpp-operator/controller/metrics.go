package controller

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// crReady is upstream's readiness gauge: 1 while the CR is Available.
// Reconcile counts and latency come from controller-runtime's own
// controller_runtime_reconcile_* metrics.
var crReady = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "kubevirt_hpp_cr_ready",
	Help: "1 when the HostPathProvisioner CR is Available, 0 otherwise",
})

// registerMetrics adds the operator's metrics to controller-runtime's
// registry (served on --metrics-address); a second registration (tests
// start several managers in one process) is not an error.
func registerMetrics() error {
	err := metrics.Registry.Register(crReady)
	if are := (prometheus.AlreadyRegisteredError{}); errors.As(err, &are) {
		return nil
	}
	return err
}
