package pools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/clonecache"
	"github.com/hostpath-provisioner/hpp/internal/treecopy"
)

// DefaultCopyStall is how long a copy from another node may receive
// nothing before it is given up (hpp-csi's --copy-stall-timeout): the
// transport should notice a dead peer itself, but a peer that hangs
// without breaking the connection would otherwise keep the claim Pending
// for ever, answering "pending".
const DefaultCopyStall = 5 * time.Minute

// errStalled is the cause of a copy's cancel by the stall watchdog.
var errStalled = errors.New("no data received")

// remoteFill is the Fill of a volume copied from another node: fetch the
// source, recreate its tree in the staged directory and make it durable
// before the store publishes it. When the pool's clone cache holds the
// source and its node says it is unchanged since, the tree is copied from
// the cache instead, with nothing sent; a fetched tree whose generation is
// known is kept in the cache (clonecache.go). A failure or a cancel leaves
// only the staged directory, which the store removes.
func (rt *Runtime) remoteFill(ctx context.Context, j *copyJob, src Source, claim ClaimRef, capacity int64) func(dir string) error {
	return func(dir string) (err error) {
		cache := j.pool.cloneCache()
		// Clones of a source not cached yet wait for the one that fills
		// the cache (cachefill.go).
		endFill, err := rt.awaitCacheFill(ctx, j, cache)
		if err != nil {
			return err
		}
		outcome := fillFailed
		if endFill != nil {
			j.endFill = endFill
			defer func() { j.endFill(outcome) }()
		}
		outcome, err = rt.fillRemote(ctx, j, src, claim, capacity, dir, cache)
		return err
	}
}

// fillRemote is remoteFill once it may fetch: from the cache when the
// source's node says it is unchanged, else over the network, keeping the
// tree in the cache. The outcome says what a fill waiting on it learns.
func (rt *Runtime) fillRemote(ctx context.Context, j *copyJob, src Source, claim ClaimRef, capacity int64, dir string,
	cache *clonecache.Cache) (fillOutcome, error) {
	cached, cachedSize := cachedGeneration(cache, j.key)
	res, err := rt.fetchInto(ctx, j, src, claim, capacity, dir, cached)
	if err != nil {
		return fillFailed, err
	}
	if res.notModified {
		if capacity > 0 && cachedSize > capacity {
			// The cache holds the source: another clone may fit.
			return fillStored, refuse(TooLarge, "volume %q: copying %s: the source holds %d bytes of data, more than the requested %d bytes", j.id, j.key, cachedSize, capacity)
		}
		done, err := rt.fillFromCache(ctx, j, cache, cached, dir)
		if err != nil {
			return fillFailed, err
		}
		if done {
			return fillStored, nil
		}
		// The entry went away since (evicted, or its copy failed):
		// fetch after all.
		if res, err = rt.fetchInto(ctx, j, src, claim, capacity, dir, ""); err != nil {
			return fillFailed, err
		}
	}
	if cache != nil {
		rt.cacheMisses.WithLabelValues(j.pool.name()).Inc()
	}
	if rt.keepInCache(ctx, j, cache, res.generation, dir, res.size) {
		return fillStored, nil
	}
	return fillNotCacheable, nil
}

// fetched is what fetchInto did.
type fetched struct {
	// notModified: the source is at the cached generation; nothing was
	// written to the directory.
	notModified bool
	generation  string
	// size is what the tree holds, as far as known: the sender's figure,
	// else the data received.
	size int64
}

// fetchInto fetches j's source into dir, under the stall watchdog, and
// makes it durable; with cached set, the source's node may answer that it
// is unchanged instead.
func (rt *Runtime) fetchInto(ctx context.Context, j *copyJob, src Source, claim ClaimRef, capacity int64, dir, cached string) (fetched, error) {
	ctx, stop := rt.watchStall(ctx, j)
	defer stop()
	stream, err := rt.deps.Remote.Fetch(ctx, src, claim, cached)
	if err != nil {
		return fetched{}, remoteFailed(fmt.Sprintf("volume %q: fetching %s from the node that holds it", j.id, j.key), stalled(ctx, err))
	}
	if stream.NotModified {
		if stream.ReadCloser != nil {
			_ = stream.Close()
		}
		if cached == "" {
			return fetched{}, refuse(Internal, "volume %q: fetching %s from node %s: answered \"not modified\" to a request that named no cached generation", j.id, j.key, stream.Node)
		}
		j.connected(stream.Node, 0)
		return fetched{notModified: true}, nil
	}
	defer func() { _ = stream.Close() }()
	if !Cacheable(stream.Generation) {
		// Clones waiting for this one to fill the cache learn now, not
		// after the whole transfer, that it will not: they fetch too.
		j.endFill(fillNotCacheable)
	}
	j.connected(stream.Node, stream.AllocatedBytes)
	what := fmt.Sprintf("volume %q: copying %s from node %s", j.id, j.key, stream.Node)
	if capacity > 0 && stream.AllocatedBytes > capacity {
		return fetched{}, refuse(TooLarge, "%s: the source holds %d bytes of data, more than the requested %d bytes", what, stream.AllocatedBytes, capacity)
	}
	start := time.Now()
	in := &countingReader{r: stream, n: &j.received, metric: rt.remoteBytes.WithLabelValues(j.pool.name())}
	stats, err := treecopy.Decode(ctx, in, dir)
	if err != nil {
		return fetched{}, remoteFailed(what, stalled(ctx, err))
	}
	if err := treecopy.Syncfs(dir); err != nil {
		return fetched{}, copyFailed(what+": syncing", err)
	}
	rt.log.Info("volume content copied from another node", zap.String("volume", j.id), zap.String("source", j.key), zap.String("node", stream.Node),
		zap.Int64("files", stats.Files), zap.Int64("bytes", stats.Bytes), zap.Int64("dataBytes", stats.DataBytes),
		zap.Int64("streamBytes", stats.StreamBytes), zap.String("generation", stream.Generation), zap.Duration("took", time.Since(start)))
	return fetched{generation: stream.Generation, size: max(stream.AllocatedBytes, stats.DataBytes)}, nil
}

// watchStall returns ctx canceled (cause errStalled) once j has received
// nothing for the configured stall timeout, and the watchdog's stop.
func (rt *Runtime) watchStall(ctx context.Context, j *copyJob) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	limit := rt.cfg.CopyStallTimeout
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(max(limit/10, time.Millisecond))
		defer tick.Stop()
		last, since := j.received.Load(), time.Now()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if n := j.received.Load(); n != last {
				last, since = n, time.Now()
			} else if time.Since(since) >= limit {
				cancel(fmt.Errorf("%w for %s: %w", errStalled, limit, ErrSourceUnavailable))
				return
			}
		}
	}()
	return ctx, func() {
		close(done)
		cancel(nil)
	}
}

// stalled replaces err, when the stall watchdog or a cancel ended the copy,
// by the reason: the transport's error for a canceled stream says less.
func stalled(ctx context.Context, err error) error {
	cause := context.Cause(ctx)
	switch {
	case cause == nil:
		return err
	case errors.Is(cause, errStalled):
		return cause
	case !errors.Is(err, context.Canceled):
		return fmt.Errorf("%w (%w)", cause, err)
	}
	return err
}

// countingReader counts what the stream delivered, for the progress a
// retry reports and the bytes metric, as it arrives.
type countingReader struct {
	r      io.Reader
	n      *atomic.Int64
	metric prometheus.Counter
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.n.Add(int64(n))
		c.metric.Add(float64(n))
	}
	return n, err
}
