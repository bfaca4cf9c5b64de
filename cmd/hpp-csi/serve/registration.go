package serve

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// Registrar does what the node-driver-registrar sidecar does: it serves
// kubelet's plugin Registration service on <registry dir>/<driver>-reg.sock,
// pointing kubelet at the CSI socket. kubelet watches the registry directory
// and calls GetInfo, then NotifyRegistrationStatus with its verdict.
type Registrar struct {
	registerapi.UnimplementedRegistrationServer

	DriverName string
	// CSISocket is the CSI socket path as kubelet (on the host) sees it.
	CSISocket string
	// RegistryDir is kubelet's plugins_registry directory.
	RegistryDir string
	Log         *zap.Logger
	// Gauge, when set, hears kubelet's answer (the driver's
	// hpp_csi_kubelet_registered).
	Gauge RegistrationGauge

	mu     sync.Mutex
	status error // nil once kubelet confirmed
	asked  bool
}

// RegistrationGauge records kubelet's verdict on the registration.
type RegistrationGauge interface {
	SetRegistered(ok bool)
}

// SocketPath is where kubelet finds the registration socket.
func (r *Registrar) SocketPath() string {
	return filepath.Join(r.RegistryDir, r.DriverName+"-reg.sock")
}

func (r *Registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	r.Log.Info("kubelet asked for plugin info", zap.String("csiSocket", r.CSISocket))
	r.mu.Lock()
	r.asked = true
	r.mu.Unlock()
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              r.DriverName,
		Endpoint:          r.CSISocket,
		SupportedVersions: []string{"1.0.0"},
	}, nil
}

func (r *Registrar) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st.GetPluginRegistered() {
		r.status = nil
		r.Log.Info("kubelet registered the plugin", zap.String("driver", r.DriverName))
	} else {
		r.status = fmt.Errorf("kubelet refused the plugin registration: %s", st.GetError())
		// Loud on purpose: pods cannot mount hpp volumes on this node
		// until this is fixed, and /healthz now fails so it is noticed.
		r.Log.Error("kubelet refused the plugin registration", zap.String("driver", r.DriverName), zap.String("error", st.GetError()))
	}
	if r.Gauge != nil {
		r.Gauge.SetRegistered(st.GetPluginRegistered())
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// Healthy is nil unless kubelet refused the registration.
func (r *Registrar) Healthy() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// Run serves until ctx ends. kubelet loses track of the plugin when the
// socket disappears (someone cleaned the directory, kubelet's dir was
// recreated), so the socket is re-created whenever it is gone.
func (r *Registrar) Run(ctx context.Context) error {
	for {
		if err := r.serveOnce(ctx); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil //nolint:nilerr // cancellation is the normal way to stop
		}
		r.Log.Warn("registration socket disappeared; re-creating it", zap.String("socket", r.SocketPath()))
	}
}

func (r *Registrar) serveOnce(ctx context.Context) error {
	lis, err := listenUnix(r.SocketPath())
	if err != nil {
		return fmt.Errorf("--kubelet-registration-path: serving the registration socket: %w", err)
	}
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, r)
	go func() { _ = srv.Serve(lis) }()
	r.Log.Info("serving kubelet plugin registration", zap.String("socket", r.SocketPath()), zap.String("csiSocket", r.CSISocket))
	defer srv.Stop()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	warned := false
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			srv.Stop()
			_ = os.Remove(r.SocketPath())
			return nil
		case <-tick.C:
		}
		if _, err := os.Lstat(r.SocketPath()); err != nil {
			return nil
		}
		r.mu.Lock()
		asked := r.asked
		r.mu.Unlock()
		if !asked && !warned && time.Since(start) > 2*time.Minute {
			warned = true
			r.Log.Error("kubelet has not asked for plugin info; is the registry directory kubelet's plugins_registry?",
				zap.String("registryDir", r.RegistryDir))
		}
	}
}
