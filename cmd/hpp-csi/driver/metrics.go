package driver

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc/codes"

	"github.com/hostpath-provisioner/hpp/internal/treecopy"
)

// Metrics is the driver's Prometheus registry. It is not the global one, so
// tests and several drivers in one process never collide.
type Metrics struct {
	Registry   *prometheus.Registry
	operations *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	registered prometheus.Gauge
	reflink    *prometheus.GaugeVec
}

func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		operations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hpp_csi_operations_total", Help: "CSI calls served, by method and gRPC code.",
		}, []string{"method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hpp_csi_operation_duration_seconds",
			Help:    "CSI call latency, by method and gRPC code.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 1, 5, 30},
		}, []string{"method", "code"}),
		registered: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hpp_csi_kubelet_registered", Help: "1 when kubelet confirmed the plugin registration, 0 when it refused or has not asked yet.",
		}),
		reflink: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hpp_pool_reflink", Help: "1 when clones and snapshots in the pool share data by reflink, 0 when they copy it (probed when the pool is opened).",
		}, []string{"pool"}),
	}
	m.Registry.MustRegister(m.operations, m.latency, m.registered, m.reflink,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *Metrics) observe(method string, code codes.Code, took time.Duration) {
	m.operations.WithLabelValues(method, code.String()).Inc()
	m.latency.WithLabelValues(method, code.String()).Observe(took.Seconds())
}

// SetRegistered records kubelet's answer to the plugin registration.
func (m *Metrics) SetRegistered(ok bool) {
	if ok {
		m.registered.Set(1)
		return
	}
	m.registered.Set(0)
}

func (m *Metrics) setCopyMode(pool string, mode treecopy.Mode) {
	v := 0.0
	if mode == treecopy.Reflink {
		v = 1
	}
	m.reflink.WithLabelValues(pool).Set(v)
}
