package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

type httpServer struct {
	srv *http.Server
	log *zap.Logger
}

// serveHTTP serves /metrics from registry and /healthz from healthy on lis.
// A private mux: the library would otherwise register on the global one.
func serveHTTP(lis net.Listener, registry *prometheus.Registry, healthy func() error, log *zap.Logger) *httpServer {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := healthy(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	s := &httpServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, log: log}
	go func() {
		if err := s.srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server stopped", zap.Error(err))
		}
	}()
	return s
}

func (s *httpServer) shutdown(ctx context.Context) {
	if err := s.srv.Shutdown(ctx); err != nil {
		s.log.Warn("http server shutdown", zap.Error(err))
	}
}
