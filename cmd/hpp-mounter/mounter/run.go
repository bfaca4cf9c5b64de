package mounter

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"
)

// RunOptions shape the long-lived pod.
type RunOptions struct {
	Interval time.Duration
	// KeepMount leaves the pool mounted on SIGTERM (rolling update: the
	// next pod adopts the mount).
	KeepMount bool
	// Health is the listener for /healthz and /readyz; nil serves none.
	Health net.Listener
}

// Run keeps the pool mounted until ctx ends (SIGTERM), then unmounts it
// unless told to keep it. A refusal ends Run at once with the
// *RefusedError: waiting would not change it.
func (m *Mounter) Run(ctx context.Context, opts RunOptions) error {
	if opts.Health != nil {
		srv := &http.Server{Handler: m.healthHandler(), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.Serve(opts.Health); err != nil && !errors.Is(err, http.ErrServerClosed) {
				m.log.Error("health endpoint stopped", zap.Error(err))
			}
		}()
		defer func() { _ = srv.Close() }()
	}
	t := time.NewTicker(opts.Interval)
	defer t.Stop()
	lastErr, first := "", true
	for {
		mounted, err := m.Ensure(ctx)
		switch {
		case IsRefused(err):
			// main prints it and exits 3: logged once, at the boundary.
			return err
		case err != nil && ctx.Err() == nil:
			// Logged when it changes, so a pod waiting for its PVC does
			// not flood the log every interval.
			if err.Error() != lastErr {
				m.log.Warn("pool not mounted yet; retrying", zap.String("target", m.cfg.Target), zap.Error(err))
			}
			lastErr = err.Error()
		case mounted:
			m.log.Info("pool mounted", zap.String("target", m.cfg.Target), zap.String("pool", m.cfg.Pool))
			lastErr = ""
		case err == nil && (first || lastErr != ""):
			m.log.Info("pool already mounted from the PVC", zap.String("target", m.cfg.Target), zap.String("pool", m.cfg.Pool))
			lastErr = ""
		}
		first = false
		select {
		case <-ctx.Done():
			return m.stop(opts.KeepMount)
		case <-t.C:
		}
	}
}

func (m *Mounter) stop(keep bool) error {
	if keep {
		m.log.Info("stopping; the pool stays mounted (--keep-mount)", zap.String("target", m.cfg.Target))
		return nil
	}
	if err := m.Release(); err != nil {
		return err
	}
	m.log.Info("stopped; pool unmounted", zap.String("target", m.cfg.Target))
	return nil
}

func (m *Mounter) healthHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := m.Ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}
