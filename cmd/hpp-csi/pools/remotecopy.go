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
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/treecopy"
)

// copyJoinWait bounds how long a CreateVolume waits for a copy from
// another node before it answers with the copy's progress. Half the
// request's deadline is the other bound: csi-provisioner's deadline (10s
// by default) travels with the call, and an answer after it is lost.
const copyJoinWait = 5 * time.Second

// defaultCopyStall is how long a copy from another node may receive
// nothing before it is given up: the transport should notice a dead peer
// itself, but a peer that hangs without breaking the connection would
// otherwise keep the claim Pending for ever, answering "pending".
const defaultCopyStall = 5 * time.Minute

// errStalled is the cause of a copy's cancel by the stall watchdog.
var errStalled = errors.New("no data received")

// copyFromRemote makes c's volume from a source this node does not hold:
// it checks room and quota as any create does, then starts a job that
// fetches the source from its node and publishes it (copyjobs.go says how
// retries and deletes meet the job), and waits a little for it. The
// caller holds the id's lock and found no volume and no job.
func (rt *Runtime) copyFromRemote(ctx context.Context, p *poolState, store *dirvol.Store, c Creation,
	accept func(dirvol.Volume) (Volume, error)) (Volume, error) {
	src := *c.Source
	if c.Claim.Namespace == "" || c.Claim.Name == "" {
		return Volume{}, refuse(Invalid, "volume_content_source: %s is not on node %s, and copying it from another node needs the claim's "+
			"parameters csi.storage.k8s.io/pvc/namespace and csi.storage.k8s.io/pvc/name, which the request lacks "+
			"(csi-provisioner sets them with --extra-create-metadata)", src.key(), rt.cfg.NodeID)
	}
	// The caller's map is the request's: the job must own what it reads.
	attrs := make(map[string]string, len(c.Spec.Attributes)+1)
	for k, v := range c.Spec.Attributes {
		attrs[k] = v
	}
	attrs[contentSourceAttr] = src.key()
	c.Spec.Attributes = attrs
	jobCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	j := &copyJob{id: c.ID, key: src.key(), pool: p, started: time.Now(), cancel: cancel, done: make(chan struct{}),
		endFill: func(fillOutcome) {}}
	c.Spec.Fill = rt.remoteFill(jobCtx, j, src, c.Claim, c.Spec.CapacityBytes)
	if err := rt.checkFits(ctx, p, store, c.Spec.CapacityBytes); err != nil {
		cancel()
		return Volume{}, err
	}
	undoQuota, err := rt.enforced(p, c.ID, &c.Spec)
	if err != nil {
		cancel()
		return Volume{}, err
	}
	rt.copies.add(j)
	rt.log.Info("copying volume content from another node", zap.String("volume", c.ID), zap.String("source", j.key), zap.String("pool", p.name()))
	go rt.runCopy(jobCtx, j, p, store, c, undoQuota)
	return rt.awaitCopy(ctx, j, store, accept)
}

// runCopy is the job: publish as any create, with the fetching Fill.
func (rt *Runtime) runCopy(ctx context.Context, j *copyJob, p *poolState, store *dirvol.Store, c Creation, undoQuota func()) {
	defer j.cancel()
	_, _, err := rt.publish(ctx, p, store, c, undoQuota)
	result := "succeeded"
	switch {
	case err != nil && j.canceled.Load():
		result = "canceled"
	case err != nil:
		result = resultOf(KindOf(err))
		rt.log.Warn("copy from another node failed", zap.String("volume", j.id), zap.String("source", j.key), zap.Error(err))
	}
	rt.remoteResults.WithLabelValues(p.name(), result).Inc()
	j.err, j.ended = err, time.Now()
	close(j.done)
	if err == nil {
		// The volume is in place: the retry finds it, not the job.
		rt.copies.forget(j)
	}
}

// resultOf names a failed copy's Kind in the copies metric.
func resultOf(k Kind) string {
	switch k {
	case NotFound:
		return "not_found"
	case Unavailable:
		return "unavailable"
	case Denied:
		return "denied"
	case Invalid:
		return "invalid"
	case NoRoom, TooLarge:
		return "no_room"
	case Canceled:
		return "canceled"
	}
	return "failed"
}

// awaitCopy waits for j a little (copyJoinWait, or half of what is left of
// ctx), then answers as a retry would: the volume, the job's error, or its
// progress.
func (rt *Runtime) awaitCopy(ctx context.Context, j *copyJob, store *dirvol.Store, accept func(dirvol.Volume) (Volume, error)) (Volume, error) {
	wait := copyJoinWait
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl)/2)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-j.done:
	case <-t.C:
	case <-ctx.Done():
	}
	if err := rt.copies.collect(j.id, j.pool, j.key); err != nil {
		return Volume{}, err
	}
	vol, err := store.Get(ctx, j.id)
	if err != nil {
		return Volume{}, wrap("looking up the copied volume", err)
	}
	return accept(vol)
}

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
