package serve

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// CSI serves srv on socketPath until ctx is cancelled, then stops
// gracefully: in-flight calls finish (up to grace), and the socket file is
// removed.
func CSI(ctx context.Context, log *zap.Logger, srv *grpc.Server, socketPath string, grace time.Duration) error {
	lis, err := listenUnix(socketPath)
	if err != nil {
		return fmt.Errorf("--endpoint: %w", err)
	}
	errCh := make(chan error, 1)
	go func() { errCh <- srv.Serve(lis) }()
	log.Info("serving CSI", zap.String("socket", socketPath))
	select {
	case err := <-errCh:
		_ = os.Remove(socketPath)
		return fmt.Errorf("CSI server stopped: %w", err)
	case <-ctx.Done():
	}
	log.Info("stopping CSI server; waiting for in-flight calls", zap.Duration("grace", grace))
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(grace):
		log.Warn("in-flight calls did not finish in time; stopping hard", zap.Duration("grace", grace))
		srv.Stop()
	}
	if err := os.Remove(socketPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		log.Warn("removing socket failed", zap.String("socket", socketPath), zap.Error(err))
	}
	return nil
}
