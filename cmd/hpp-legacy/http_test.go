package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-legacy/provisioner"
)

func TestHTTPServesHealthAndMetrics(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(provisioner.NewMetrics().Collectors()...)
	served := prometheus.NewCounter(prometheus.CounterOpts{Name: "served_total", Help: "a sample"})
	served.Inc()
	reg.MustRegister(served)
	var ready atomic.Bool
	srv := serveHTTP(lis, reg, func() error {
		if !ready.Load() {
			return errors.New("informer caches are not synced yet")
		}
		return nil
	}, zap.NewNop())
	defer srv.shutdown(context.Background())
	base := "http://" + lis.Addr().String()

	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != http.StatusServiceUnavailable || body != "informer caches are not synced yet\n" {
		t.Errorf("/healthz before ready = %d %q", code, body)
	}
	ready.Store(true)
	if code, body := get("/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz when ready = %d %q", code, body)
	}
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "\nserved_total 1\n") {
		t.Errorf("/metrics = %d, without the registry's sample:\n%s", code, body)
	}
}
