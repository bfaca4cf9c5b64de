package pools

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// usageCache keeps each volume's measured usage for ttl. Walking a volume
// with 100,000 files takes a while; kubelet asks every minute for every
// mounted volume, so walks are shared (singleflight) and bounded in time.
type usageCache struct {
	walk    func(ctx context.Context, path string) (dirvol.Usage, error)
	now     func() time.Time
	ttl     time.Duration
	timeout time.Duration
	group   singleflight.Group

	mu      sync.Mutex
	entries map[string]usageEntry
}

type usageEntry struct {
	usage dirvol.Usage
	at    time.Time
}

func newUsageCache(walk func(context.Context, string) (dirvol.Usage, error), now func() time.Time, ttl, timeout time.Duration) *usageCache {
	return &usageCache{walk: walk, now: now, ttl: ttl, timeout: timeout, entries: map[string]usageEntry{}}
}

// get returns a fresh-enough usage of path, walking it when needed; observe,
// when set, hears every fresh measurement (reservation-aware capacity keeps
// its sum with it).
func (c *usageCache) get(ctx context.Context, path string, observe func(dirvol.Usage)) (dirvol.Usage, error) {
	c.mu.Lock()
	e, ok := c.entries[path]
	c.mu.Unlock()
	if ok && c.now().Sub(e.at) < c.ttl {
		return e.usage, nil
	}
	v, err, _ := c.group.Do(path, func() (any, error) {
		// The walk is not bounded by the caller's context alone: one
		// impatient caller must not waste the walk others wait for.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
		defer cancel()
		u, err := c.walk(wctx, path)
		if err != nil {
			return dirvol.Usage{}, err
		}
		c.mu.Lock()
		c.entries[path] = usageEntry{usage: u, at: c.now()}
		c.mu.Unlock()
		if observe != nil {
			observe(u)
		}
		return u, nil
	})
	if err != nil {
		if ok {
			// A stale figure beats none when the walk timed out.
			return e.usage, nil
		}
		return dirvol.Usage{}, err
	}
	return v.(dirvol.Usage), nil
}

func (c *usageCache) forget(path string) {
	c.mu.Lock()
	delete(c.entries, path)
	c.mu.Unlock()
}
