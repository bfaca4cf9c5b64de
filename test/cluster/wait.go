package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// poll calls cond every interval until it returns true, returns an error,
// or timeout (or ctx) ends; the error then names what was awaited.
func poll(ctx context.Context, timeout, interval time.Duration, what string, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ok, err := cond(ctx)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
}

// waitHTTP waits until url answers 200, failing early if proc exits.
func waitHTTP(ctx context.Context, what, url string, client *http.Client, proc *Process) error {
	if client == nil {
		client = &http.Client{Timeout: 2 * time.Second}
	}
	return poll(ctx, 2*time.Minute, 200*time.Millisecond, what+" at "+url, func(ctx context.Context) (bool, error) {
		if proc != nil && !proc.Running() {
			return false, fmt.Errorf("%s exited: %v", what, proc.ExitError())
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, nil
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}
