package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// Readiness is what /healthz asks: nil when the plugin can serve (the
// driver's Ready, the same answer Probe gives).
type Readiness func(ctx context.Context) error

// HealthHandler serves /healthz like the livenessprobe sidecar: 200 when
// ready says so (and kubelet has not refused the registration), else 503
// with the reason. reg may be nil (no registration served).
func HealthHandler(ready Readiness, reg *Registrar) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		err := ready(ctx)
		if err == nil && reg != nil {
			err = reg.Healthy()
		}
		if err != nil {
			http.Error(w, "not healthy: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// MetricsHandler serves /metrics from a registry (the driver's).
func MetricsHandler(g prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	return mux
}

// HTTP serves h on addr until ctx ends, over TLS when tlsConfig is set;
// what names the server in errors and logs.
func HTTP(ctx context.Context, log *zap.Logger, what, addr string, h http.Handler, tlsConfig *tls.Config) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s address %q: %w", what, addr, err)
	}
	if tlsConfig != nil {
		lis = tls.NewListener(lis, tlsConfig)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("serving HTTP", zap.String("what", what), zap.String("address", lis.Addr().String()), zap.Bool("tls", tlsConfig != nil))
	if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s server: %w", what, err)
	}
	return nil
}
