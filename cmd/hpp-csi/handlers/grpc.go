package handlers

import (
	"context"
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
	start := time.Now()
	method := shortMethod(info.FullMethod)
	resp, err := handler(ctx, req)
	took := time.Since(start)
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
