package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// retryable marks an error of one poll attempt that the next attempt may
// not have (a connection refused while a component starts).
type retryable struct{ err error }

func (r retryable) Error() string { return r.err.Error() }

// tryAgain wraps err so that poll tries again.
func tryAgain(err error) error { return retryable{err} }

// poll calls cond every interval until it returns true, returns an error
// not wrapped by tryAgain, or timeout (or ctx) ends; the error then names what
// was awaited and the last retried error.
func poll(ctx context.Context, timeout, interval time.Duration, what string, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(interval)
	defer t.Stop()
	var last error
	for {
		ok, err := cond(ctx)
		var r retryable
		switch {
		case errors.As(err, &r):
			last = r.err
		case err != nil:
			return err
		case ok:
			return nil
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("waiting for %s: %w (last attempt: %w)", what, ctx.Err(), last)
			}
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
}

// startTimeout bounds every wait of the cluster's start (a component
// answering, the default ServiceAccount, the node Ready, CSINode, the
// snapshot CRDs), and probeTimeout one health request. Inside the quota VM
// (qemu under emulation) kube-apiserver took 2 min 46 s to 4 min to be
// ready on 2026-11-28, kube-controller-manager answered no 2 s request for
// 2 min, and the default ServiceAccount came after more than 1 min (each
// failed make quota-vm-cluster once). Every wait returns as soon as its
// condition holds, so the bounds cost nothing on a healthy start, and one
// bound for all keeps the next slow step from failing the tier anew.
const (
	startTimeout = 5 * time.Minute
	probeTimeout = 10 * time.Second
)

// waitHTTP waits until url answers 200, failing early if proc exits.
func waitHTTP(ctx context.Context, what, url string, client *http.Client, proc *Process) error {
	if client == nil {
		client = &http.Client{Timeout: probeTimeout}
	}
	return poll(ctx, startTimeout, 200*time.Millisecond, what+" at "+url, func(ctx context.Context) (bool, error) {
		if proc != nil && !proc.Running() {
			return false, fmt.Errorf("%s exited: %w", what, proc.ExitError())
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, tryAgain(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}
