package serve

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
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

// gauge records what the registrar reports, as the driver's metric would.
type gauge struct{ got []bool }

func (g *gauge) SetRegistered(ok bool) { g.got = append(g.got, ok) }

// The registrar is driven the way kubelet drives it: over its socket.
func TestRegistrarAnswersKubeletAndReportsRefusal(t *testing.T) {
	dir := t.TempDir()
	g := &gauge{}
	reg := &Registrar{DriverName: contract.DriverName, CSISocket: "/var/lib/kubelet/plugins/x/csi.sock", RegistryDir: dir, Log: zap.NewNop(), Gauge: g}
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
	ready := func(context.Context) error { return nil }
	rec := httptest.NewRecorder()
	HealthHandler(ready, reg).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "refused the plugin registration") {
		t.Fatalf("/healthz = %d %q, want 503 naming the refusal", rec.Code, rec.Body.String())
	}
	if _, err := client.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
	rec = httptest.NewRecorder()
	HealthHandler(ready, reg).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/healthz = %d %q after registration, want 200", rec.Code, rec.Body.String())
	}
	if len(g.got) != 2 || g.got[0] || !g.got[1] {
		t.Fatalf("gauge heard %v, want [false true]", g.got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// /healthz says why the plugin is not ready, and stays 200-free until it is.
func TestHealthHandlerReportsNotReady(t *testing.T) {
	notReady := func(context.Context) error { return errors.New(`storage pool "fast": not opened yet`) }
	rec := httptest.NewRecorder()
	HealthHandler(notReady, nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusServiceUnavailable || rec.Body.String() != "not healthy: storage pool \"fast\": not opened yet\n" {
		t.Fatalf("/healthz = %d %q, want 503 with the reason", rec.Code, rec.Body.String())
	}
	rec = httptest.NewRecorder()
	HealthHandler(func(context.Context) error { return nil }, nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != "ok\n" {
		t.Fatalf("/healthz = %d %q, want 200 ok", rec.Code, rec.Body.String())
	}
}
