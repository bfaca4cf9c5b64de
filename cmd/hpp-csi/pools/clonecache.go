package pools

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/clonecache"
	"github.com/hostpath-provisioner/hpp/internal/treecopy"
)

// The clone cache: a pool keeps a read-only copy of each source it fetched
// from another node (internal/clonecache, in <pool>/.hpp-cache), and a
// later clone of the same source on this node, when the source's node says
// the source is unchanged since (its generation is the one the copy was
// stored with), is filled from that copy by reflink (a copy where the
// filesystem has no reflink), with no data sent.
//
// A source's generation is decided by the node that holds it
// (SourceGeneration):
//
//   - a snapshot never changes: "snapshot.<creation time>", so that a
//     snapshot deleted and taken again under the same id is another
//     generation;
//   - a volume's generation is the write generation in its record, which
//     a read-write publish replaces (Publish, before mounting), else
//     "created.<creation time>" for a volume never published read-write;
//   - a volume published now (any publication: the mount table does not
//     tell read-only bind mounts apart cheaply) is GenerationLive, and a
//     volume without a record (the KubeVirt driver's, a legacy one) has no
//     generation (""): neither is ever served from or stored in a cache.

// GenerationLive is the generation of a volume published now: it may be
// changing, so no copy of it is ever cached or served from cache.
const GenerationLive = "live"

// Cacheable reports whether a source at generation gen may be cached.
func Cacheable(gen string) bool { return gen != "" && gen != GenerationLive }

// openCloneCache opens the pool's cache, removing what a crash left in its
// staging. A shared pool has none (every node would share one cache
// directory); a cache that cannot be opened costs speed, not the pool.
func (rt *Runtime) openCloneCache(p *poolState, mode treecopy.Mode) *clonecache.Cache {
	if p.shared() {
		return nil
	}
	var total int64
	if st, err := rt.deps.FS.Statfs(p.cfg.Path); err == nil {
		total = st.TotalBytes
	} else if p.cfg.CacheBytes == 0 {
		rt.log.Warn("cannot size the clone cache (statfs failed); clones from other nodes are not cached", zap.String("pool", p.name()), zap.Error(err))
		return nil
	}
	limit := p.cfg.CacheLimit(total)
	c, removed, err := clonecache.Open(filepath.Join(p.cfg.Path, clonecache.Dir), mode, limit)
	if err != nil {
		rt.log.Warn("clone cache not opened; clones from other nodes are not cached", zap.String("pool", p.name()), zap.Error(err))
		return nil
	}
	pool := p.name()
	c.OnEvict = func(key string, size int64) {
		rt.cacheEvictions.WithLabelValues(pool).Inc()
		rt.log.Info("clone cache entry evicted", zap.String("pool", pool), zap.String("source", key), zap.Int64("bytes", size))
	}
	rt.log.Info("clone cache opened", zap.String("pool", pool), zap.Int64("limitBytes", limit), zap.Int64("bytes", c.Bytes()),
		zap.Int("entries", len(c.Entries())), zap.Int("removedLeftovers", removed))
	return c
}

// cachedGeneration is the generation the pool's cache holds of key, ""
// when none (or no cache).
func cachedGeneration(c *clonecache.Cache, key string) (gen string, sizeBytes int64) {
	if c == nil {
		return "", 0
	}
	for _, r := range c.Entries() {
		if r.Key == key {
			return r.Generation, r.SizeBytes
		}
	}
	return "", 0
}

// SourceGeneration is src's generation on this node (see above), without
// reading its data and without its lock: an answer that races with a
// read-write publish is the generation just before it, a point in time as
// a local clone is. NotFound when this node does not hold src.
func (rt *Runtime) SourceGeneration(ctx context.Context, src Source) (string, error) {
	if src.Snapshot {
		_, snap, err := rt.findSnapshot(ctx, src.ID)
		if err != nil {
			return "", err
		}
		return snapshotGeneration(snap.Created.UnixNano()), nil
	}
	l, err := rt.Find(ctx, src.ID)
	if err != nil {
		if KindOf(err) == Invalid {
			return "", refuse(NotFound, "volume %q does not exist on node %s: %v", src.ID, rt.cfg.NodeID, err)
		}
		return "", err
	}
	return rt.volumeGeneration(l)
}

func snapshotGeneration(created int64) string {
	if created <= 0 {
		return "snapshot" // the KubeVirt driver's: no time recorded
	}
	return "snapshot." + strconv.FormatInt(created, 10)
}

// volumeGeneration is the generation of a volume found on this node.
func (rt *Runtime) volumeGeneration(v Volume) (string, error) {
	if !v.HasMeta || v.InLegacy() {
		return "", nil
	}
	targets, err := rt.deps.Mounter.BindTargets(v.Path)
	if err != nil {
		return "", failed("listing where the volume is mounted", err)
	}
	if len(targets) > 0 {
		return GenerationLive, nil
	}
	if v.WriteGeneration != "" {
		return v.WriteGeneration, nil
	}
	if v.Created.IsZero() {
		return "", nil
	}
	return "created." + strconv.FormatInt(v.Created.UnixNano(), 10), nil
}

// bumpWriteGeneration gives vol a new write generation before it is
// published read-write, so that no node serves a cached copy of it once
// it may have changed. Volumes without a generation are left alone.
func (rt *Runtime) bumpWriteGeneration(vol Volume) error {
	if !vol.HasMeta || vol.InLegacy() || vol.store == nil {
		return nil
	}
	if _, err := vol.store.BumpWriteGeneration(context.Background(), vol.ID); err != nil {
		return failed("recording the volume's new write generation", err)
	}
	return nil
}

// fillFromCache fills dir from the cache's copy of j's source at gen, and
// reports whether it did. A failed copy is logged and answered false (the
// caller fetches instead), with dir emptied again; only a failure to make
// the copied tree durable fails the fill.
func (rt *Runtime) fillFromCache(ctx context.Context, j *copyJob, c *clonecache.Cache, gen, dir string) (bool, error) {
	stats, ok, err := c.Copy(ctx, j.key, gen, dir)
	if err != nil {
		rt.log.Warn("clone cache copy failed; fetching the source instead", zap.String("volume", j.id), zap.String("source", j.key), zap.Error(err))
		return false, nil
	}
	if !ok {
		return false, nil
	}
	if err := treecopy.Syncfs(dir); err != nil {
		return true, copyFailed(fmt.Sprintf("volume %q: copying %s from the clone cache: syncing", j.id, j.key), err)
	}
	rt.cacheHits.WithLabelValues(j.pool.name()).Inc()
	rt.log.Info("volume content copied from the clone cache", zap.String("volume", j.id), zap.String("source", j.key),
		zap.String("generation", gen), zap.Int64("files", stats.Files), zap.Int64("reflinked", stats.Reflinked), zap.Int64("bytes", stats.Bytes))
	return true, nil
}

// keepInCache stores the fetched tree in dir as the cache's copy of j's
// source at gen, and reports whether the cache holds it at gen now (also
// when it already did). A failure never fails the clone: it is logged.
func (rt *Runtime) keepInCache(ctx context.Context, j *copyJob, c *clonecache.Cache, gen, dir string, sizeBytes int64) bool {
	if c == nil || !Cacheable(gen) {
		return false
	}
	if err := c.Put(ctx, j.key, gen, dir, sizeBytes); err != nil {
		rt.log.Warn("source not kept in the clone cache", zap.String("volume", j.id), zap.String("source", j.key),
			zap.String("pool", j.pool.name()), zap.Error(err))
		return false
	}
	if held, _ := cachedGeneration(c, j.key); held != gen {
		// Put stores nothing while another store of the key runs, or
		// while an entry of another generation is in use.
		return false
	}
	rt.log.Info("source kept in the clone cache", zap.String("source", j.key), zap.String("generation", gen),
		zap.String("pool", j.pool.name()), zap.Int64("bytes", sizeBytes))
	return true
}

// evictForRoom frees at least need bytes of the pool's cache, when it has
// them, before a create is refused for lack of room; it reports whether
// anything was freed.
func (rt *Runtime) evictForRoom(p *poolState, need int64) bool {
	c := p.cloneCache()
	if c == nil || c.Bytes() == 0 {
		return false
	}
	freed := c.Evict(need)
	if freed > 0 {
		rt.log.Info("clone cache entries evicted to make room for a volume", zap.String("pool", p.name()), zap.Int64("freedBytes", freed))
	}
	return freed > 0
}
