package pools

import (
	"context"
	"fmt"
	"sync"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/clonecache"
)

// One fetch fills the cache. Clones of one source started together on one
// node (50 VM disks from one golden image) all find the pool's cache
// without an entry; each would fetch the whole source, over the same
// link, at the same time. Instead the first becomes the source's fill in
// the pool: the others wait for it, then ask the source's node with the
// generation it stored, get "not modified" (nothing sent; the request
// still goes, so that the source's node authorizes each claim and vouches
// that its copy is current) and copy from the cache.
//
// A fill ends in one of three ways, and its waiters act on each:
//
//   - stored: the source is in the cache; the waiters ask with its
//     generation;
//   - not cacheable: the source is live, has no generation, or did not
//     fit (keepInCache said why): the waiters fetch on their own, at
//     once, since waiting for each other would gain nothing. A live or
//     unknown generation is told by the answer's headers, so the fill
//     ends then, before its transfer does;
//   - failed (or canceled): one waiter becomes the next fill, the others
//     wait for it, so that a dead source's node is asked by one clone at
//     a time and its recovery is one fetch again.
//
// A fill is keyed by pool and source, not by generation: the generation is
// known only from the source's answer. A cache that holds an entry of the
// source (at whatever generation) starts no fill: its clones ask with that
// generation, and if the source changed since, each fetches; refilling a
// stale entry single-flight is not done (a changed golden image is rare,
// and the fetches still end with one entry).

// fillOutcome is how a fill ended.
type fillOutcome int

const (
	fillFailed fillOutcome = iota
	fillStored
	fillNotCacheable
)

// fillKey names a fill: the pool's name and the source's key.
type fillKey struct{ pool, source string }

// cacheFill is one fill in progress; done is closed once outcome is set.
type cacheFill struct {
	volume  string
	done    chan struct{}
	outcome fillOutcome
}

// end records how the fill ended and lets its waiters go.
func (c *copyJobs) endFill(k fillKey, f *cacheFill, outcome fillOutcome) {
	c.mu.Lock()
	if c.fills[k] == f {
		delete(c.fills, k)
	}
	c.mu.Unlock()
	f.outcome = outcome
	close(f.done)
}

// joinFill makes j the fill of its source in its pool when none runs (the
// returned end must be called with the outcome; it acts once, so that a
// fill may end early, when the source's answer shows it is not cacheable),
// or returns the running one (end is nil).
func (c *copyJobs) joinFill(k fillKey, j *copyJob) (running *cacheFill, end func(fillOutcome)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.fills[k]; f != nil {
		return f, nil
	}
	f := &cacheFill{volume: j.id, done: make(chan struct{})}
	c.fills[k] = f
	var once sync.Once
	return nil, func(o fillOutcome) { once.Do(func() { c.endFill(k, f, o) }) }
}

// awaitCacheFill is the start of a remote fill with a clone cache: it
// returns at once when the cache holds an entry of j's source, or when j
// becomes the source's fill (end is then not nil and must be called);
// otherwise it waits for the running fill and decides again. ctx's end
// (DeleteVolume's cancel) ends the wait, Canceled.
func (rt *Runtime) awaitCacheFill(ctx context.Context, j *copyJob, cache *clonecache.Cache) (end func(fillOutcome), err error) {
	if cache == nil {
		return nil, nil
	}
	k := fillKey{pool: j.pool.name(), source: j.key}
	for {
		if gen, _ := cachedGeneration(cache, j.key); gen != "" {
			return nil, nil
		}
		running, end := rt.copies.joinFill(k, j)
		if end != nil {
			return end, nil
		}
		j.waitFor(running.volume)
		rt.log.Info("waiting for another clone's copy of the source to fill the clone cache", zap.String("volume", j.id),
			zap.String("source", j.key), zap.String("filling", running.volume), zap.String("pool", k.pool))
		select {
		case <-running.done:
		case <-ctx.Done():
			return nil, remoteFailed(fmt.Sprintf("volume %q: waiting for volume %q's copy of %s to fill the clone cache", j.id, running.volume, j.key),
				context.Cause(ctx))
		}
		j.waitFor("")
		if running.outcome == fillNotCacheable {
			return nil, nil
		}
	}
}
