package handlers

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc/codes"
)

// Metrics is the driver's Prometheus registry. It is not the global one, so
// tests and several drivers in one process never collide. The pool runtime
// registers its pool figures in it too (pools.Deps.Metrics).
type Metrics struct {
	Registry   *prometheus.Registry
	operations *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	registered prometheus.Gauge
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
	}
	m.Registry.MustRegister(m.operations, m.latency, m.registered,
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
