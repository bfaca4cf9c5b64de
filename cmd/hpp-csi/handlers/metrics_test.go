package handlers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func TestMetricsExposePoolsAndOperations(t *testing.T) {
	var hostRoot string
	h := newHarness(t, func(c *Config) {
		// Stands for the host's root seen through a hostPath mount.
		hostRoot = filepath.Join(filepath.Dir(filepath.Dir(c.Pools.All()[0].Path)), "host-root")
		c.HostRootRef = hostRoot
	})
	if err := os.Mkdir(hostRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := h.d.CreateVolume(context.Background(), createReq("pvc-1", "fast", 1)); err != nil {
		t.Fatal(err)
	}
	h.d.deps.Metrics.observe("CreateVolume", 0, time.Millisecond)
	// "fast" is on the host's root filesystem, "slow" on a disk of its own.
	h.fs.Devices[hostRoot], h.fs.Devices[h.pools["fast"]], h.fs.Devices[h.pools["slow"]] = 7, 7, 8
	scrape := func() string {
		rec := httptest.NewRecorder()
		promhttp.HandlerFor(h.d.deps.Metrics.Registry, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		return rec.Body.String()
	}
	body := scrape()
	for _, want := range []string{
		`hpp_pool_capacity_bytes{pool="fast"} 1.073741824e+09`,
		`hpp_pool_available_bytes{pool="fast"} 5.36870912e+08`,
		`hpp_pool_shares_os_filesystem{pool="fast"} 1`,
		`hpp_pool_shares_os_filesystem{pool="slow"} 0`,
		"\nkubevirt_hpp_pool_path_shared_with_os 1\n",
		`hpp_csi_operations_total{code="OK",method="CreateVolume"} 1`,
		`hpp_csi_operation_duration_seconds_bucket{code="OK",method="CreateVolume"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	h.fs.Devices[h.pools["fast"]] = 9
	if body := scrape(); !strings.Contains(body, "\nkubevirt_hpp_pool_path_shared_with_os 0\n") {
		t.Errorf("no pool on the host's root, yet /metrics says:\n%s", body)
	}
}
