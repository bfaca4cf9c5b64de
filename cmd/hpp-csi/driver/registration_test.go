package driver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// The registrar is driven the way kubelet drives it: over its socket.
func TestRegistrarAnswersKubeletAndReportsRefusal(t *testing.T) {
	dir := t.TempDir()
	m := NewMetrics()
	reg := &Registrar{DriverName: contract.DriverName, CSISocket: "/var/lib/kubelet/plugins/x/csi.sock", RegistryDir: dir, Log: zap.NewNop(), Metrics: m}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- reg.Run(ctx) }()
	sock := filepath.Join(dir, contract.DriverName+"-reg.sock")
	var conn *grpc.ClientConn
	var info *registerapi.PluginInfo
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		conn, err = grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err == nil {
			info, err = registerapi.NewRegistrationClient(conn).GetInfo(ctx, &registerapi.InfoRequest{})
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("registration socket never answered: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer conn.Close()
	if info.GetType() != registerapi.CSIPlugin || info.GetName() != contract.DriverName || info.GetEndpoint() != reg.CSISocket ||
		len(info.GetSupportedVersions()) != 1 || info.GetSupportedVersions()[0] != "1.0.0" {
		t.Fatalf("GetInfo = %v", info)
	}
	client := registerapi.NewRegistrationClient(conn)
	if _, err := client.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: false, Error: "version mismatch"}); err != nil {
		t.Fatal(err)
	}
	if err := reg.Healthy(); err == nil || !strings.Contains(err.Error(), "version mismatch") {
		t.Fatalf("Healthy() = %v after a refusal, want the kubelet error", err)
	}
	h := newHarness(t)
	rec := httptest.NewRecorder()
	HealthHandler(h.d, reg).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "refused the plugin registration") {
		t.Fatalf("/healthz = %d %q, want 503 naming the refusal", rec.Code, rec.Body.String())
	}
	if _, err := client.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
	rec = httptest.NewRecorder()
	HealthHandler(h.d, reg).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/healthz = %d %q after registration, want 200", rec.Code, rec.Body.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

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
	h.fs.devices[hostRoot], h.fs.devices[h.pools["fast"]], h.fs.devices[h.pools["slow"]] = 7, 7, 8
	scrape := func() string {
		rec := httptest.NewRecorder()
		MetricsHandler(h.d.deps.Metrics).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
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
	h.fs.devices[h.pools["fast"]] = 9
	if body := scrape(); !strings.Contains(body, "\nkubevirt_hpp_pool_path_shared_with_os 0\n") {
		t.Errorf("no pool on the host's root, yet /metrics says:\n%s", body)
	}
}
