package driver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-lib-utils/protosanitizer"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ParseEndpoint accepts unix:///abs/path, unix:/abs/path or a plain absolute
// path. TCP is refused: the CSI socket carries no authentication, and on a
// node it only ever needs to reach kubelet and the sidecars.
func ParseEndpoint(ep string) (string, error) {
	switch {
	case strings.HasPrefix(ep, "unix://"):
		ep = strings.TrimPrefix(ep, "unix://")
	case strings.HasPrefix(ep, "unix:"):
		ep = strings.TrimPrefix(ep, "unix:")
	case strings.Contains(ep, "://"):
		return "", fmt.Errorf("--endpoint: %q: only unix sockets are supported (unix:///path/csi.sock or /path/csi.sock); TCP would expose an unauthenticated storage API", ep)
	}
	if !filepath.IsAbs(ep) {
		return "", fmt.Errorf("--endpoint: %q must be an absolute socket path", ep)
	}
	return filepath.Clean(ep), nil
}

// listenUnix removes a stale socket (left by a killed process) before
// listening; anything else at the path is left alone and reported.
func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("creating socket directory: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket; refusing to replace it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("removing stale socket %s: %w", path, err)
		}
	}
	return net.Listen("unix", path)
}

// NewGRPCServer returns a server with the driver's interceptors and the three
// CSI services registered (with Config.ControllerOnly, Identity and the
// expansion-only Controller).
func (d *Driver) NewGRPCServer() *grpc.Server {
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(d.observeInterceptor, d.recoverInterceptor))
	if d.cfg.ControllerOnly {
		c := controllerOnly{d: d}
		csi.RegisterIdentityServer(srv, c)
		csi.RegisterControllerServer(srv, c)
		return srv
	}
	csi.RegisterIdentityServer(srv, d)
	csi.RegisterControllerServer(srv, d)
	csi.RegisterNodeServer(srv, d)
	return srv
}

// recoverInterceptor turns a panic in a handler into Internal: one bad call
// must not take down the node plugin and every pod mount with it.
func (d *Driver) recoverInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			d.log.Error("handler panicked", zap.String("method", info.FullMethod), zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
			resp, err = nil, errCode(codes.Internal, "%s: internal error (panic: %v); see the driver log", info.FullMethod, r)
		}
	}()
	resp, err = handler(ctx, req)
	return resp, toStatus(shortMethod(info.FullMethod), err)
}

// observeInterceptor logs every call once (secrets stripped) and records
// metrics by method and code.
func (d *Driver) observeInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := d.deps.Now()
	method := shortMethod(info.FullMethod)
	resp, err := handler(ctx, req)
	took := d.deps.Now().Sub(start)
	code := status.Code(err)
	d.deps.Metrics.observe(method, code, took)
	fields := []zap.Field{zap.String("method", method), zap.String("code", code.String()), zap.Duration("took", took)}
	if d.log.Core().Enabled(zap.DebugLevel) || err != nil {
		fields = append(fields, zap.Stringer("request", protosanitizer.StripSecrets(req)))
	}
	switch {
	case err == nil:
		d.log.Debug("csi call", fields...)
	case code == codes.Internal || code == codes.Unknown:
		d.log.Error("csi call failed", append(fields, zap.Error(err))...)
	default:
		d.log.Info("csi call refused", append(fields, zap.Error(err))...)
	}
	return resp, err
}

func shortMethod(full string) string {
	if i := strings.LastIndex(full, "/"); i >= 0 {
		return full[i+1:]
	}
	return full
}

// Serve listens on socketPath until ctx is cancelled, then stops gracefully:
// in-flight calls finish (up to grace), and the socket file is removed.
func (d *Driver) Serve(ctx context.Context, socketPath string, grace time.Duration) error {
	lis, err := listenUnix(socketPath)
	if err != nil {
		return fmt.Errorf("--endpoint: %w", err)
	}
	srv := d.NewGRPCServer()
	errCh := make(chan error, 1)
	go func() { errCh <- srv.Serve(lis) }()
	d.log.Info("serving CSI", zap.String("socket", socketPath), zap.String("driver", d.cfg.DriverName), zap.String("node", d.cfg.NodeID))
	select {
	case err := <-errCh:
		_ = os.Remove(socketPath)
		return fmt.Errorf("CSI server stopped: %w", err)
	case <-ctx.Done():
	}
	d.log.Info("stopping CSI server; waiting for in-flight calls", zap.Duration("grace", grace))
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(grace):
		d.log.Warn("in-flight calls did not finish in time; stopping hard", zap.Duration("grace", grace))
		srv.Stop()
	}
	if err := os.Remove(socketPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		d.log.Warn("removing socket failed", zap.String("socket", socketPath), zap.Error(err))
	}
	return nil
}
