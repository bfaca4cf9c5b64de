package hostpathprovisioner

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// newReadyGauge is upstream's readiness gauge: 1 while the CR is
// Available. Reconcile counts and latency come from controller-runtime's
// own controller_runtime_reconcile_* metrics.
func newReadyGauge() prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kubevirt_hpp_cr_ready",
		Help: "1 when the HostPathProvisioner CR is Available, 0 otherwise",
	})
}

// registerReadyGauge adds the gauge to controller-runtime's registry
// (served on --metrics-address) and returns the registered one: a second
// manager in the same process (tests start several) shares the first's.
func registerReadyGauge() (prometheus.Gauge, error) {
	g := newReadyGauge()
	err := metrics.Registry.Register(g)
	if are := (prometheus.AlreadyRegisteredError{}); errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(prometheus.Gauge); ok {
			return existing, nil
		}
	}
	return g, err
}

// setReady sets the readiness gauge (none without a manager: unit tests).
func (r *Reconciler) setReady(available bool) {
	if r.ready == nil {
		return
	}
	if available {
		r.ready.Set(1)
	} else {
		r.ready.Set(0)
	}
}
