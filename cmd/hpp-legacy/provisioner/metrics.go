package provisioner

import "github.com/prometheus/client_golang/prometheus"

// Result labels of the provisioning and deletion counters.
const (
	ResultProvisioned = "provisioned"
	ResultDeleted     = "deleted"
	ResultRefused     = "refused"  // the claim or PV asks for what this provisioner will not do
	ResultNoSpace     = "no_space" // the request is larger than PV_DIR offers now
	ResultFailed      = "failed"   // an error a retry may fix
	ResultIgnored     = "ignored"  // another node's volume or claim
)

// Metrics counts this node's provisioning and deletion outcomes; the
// library's own metrics (durations, failures per class) are registered next
// to them by main.
type Metrics struct {
	provisions *prometheus.CounterVec
	deletes    *prometheus.CounterVec
}

// NewMetrics returns unregistered counters; register Collectors().
func NewMetrics() *Metrics {
	return &Metrics{
		provisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hpp_legacy",
			Name:      "provision_total",
			Help:      "Provision calls on this node by result: provisioned, refused, no_space, failed, ignored.",
		}, []string{"result"}),
		deletes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hpp_legacy",
			Name:      "delete_total",
			Help:      "Delete calls on this node by result: deleted, refused, failed, ignored.",
		}, []string{"result"}),
	}
}

// Collectors returns the counters for registration.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.provisions, m.deletes}
}

func (m *Metrics) provision(result string) { m.provisions.WithLabelValues(result).Inc() }
func (m *Metrics) delete(result string)    { m.deletes.WithLabelValues(result).Inc() }
