package peercerts

import (
	"context"
	"time"
)

// How often the publisher looks at the CA again once it is in place, and
// the bounds of its retries.
const (
	publishEvery      = 24 * time.Hour
	publishRetryFirst = 5 * time.Second
	publishRetryMax   = 5 * time.Minute
)

// publish makes the CA and its bundle as soon as the operator leads, and
// looks at them daily. hpp-csi asks for its certificate only once it has
// the bundle (cmd/hpp-csi/peercert copies it before anything else), so a
// bundle made at the first request would never come. Daily: a CA due for
// rotation is replaced even while no node asks for a certificate. Failures
// are logged and retried with a backoff; it returns when ctx ends.
func (r *Reconciler) publish(ctx context.Context) error {
	retry := publishRetryFirst
	for {
		next := publishEvery
		// A failure because ctx ended is not logged: the select returns.
		if _, err := r.ensureCA(ctx); err != nil && ctx.Err() == nil {
			r.Log.Error(err, "peer CA not published", "retryIn", retry)
			next, retry = retry, min(2*retry, publishRetryMax)
		} else if err == nil {
			retry = publishRetryFirst
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(next):
		}
	}
}
