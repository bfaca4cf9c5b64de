// Package clonecache keeps, in a pool, read-only copies of clone sources
// that were fetched from other nodes, so that later clones of the same
// unchanged source on this node are local copies (reflinks where the
// filesystem has them) with nothing sent over the network.
//
// Layout, inside the pool's volumes directory (never outside the pool):
//
//	<pool>/.hpp-cache/                  mode 0700
//	<pool>/.hpp-cache/<entry>/data/     the source's tree, as fetched
//	<pool>/.hpp-cache/<entry>/entry.json  key, generation, size, created
//	<pool>/.hpp-cache/.staging/         entries being built, and entries
//	                                    being removed
//
// <entry> is the hex SHA-256 of the key ("volume:<id>" or
// "snapshot:<id>"), so every key fits one directory entry; the key itself
// is in entry.json. An entry is built in .staging, made durable (syncfs)
// and renamed into place in one step; a replaced or evicted entry is
// renamed back into .staging before it is removed. A crash therefore
// leaves whole entries or staging, and Open empties staging: no half
// entry is ever visible. The last use of an entry is the modification time
// of its entry.json (touched on every hit), which orders eviction across
// restarts.
//
// An entry is served only for the generation it was stored with: the
// caller decides what a generation is (the source node's answer) and
// never stores a source whose generation is unknown or live.
package clonecache

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/hostpath-provisioner/hpp/internal/treecopy"
)

// Names inside the cache.
const (
	// Dir is the cache's directory in a pool's volumes directory: hidden,
	// so never a volume (ids never start with '.').
	Dir        = ".hpp-cache"
	StagingDir = ".staging"
	DataDir    = "data"
	RecordFile = "entry.json"
)

// ErrTooLarge is what Put returns for a source larger than what the cache
// may hold with the entries in use kept: the source is not cached.
var ErrTooLarge = errors.New("larger than the cache can hold")

// Record is what an entry's entry.json says.
type Record struct {
	Key        string    `json:"key"`
	Generation string    `json:"generation"`
	SizeBytes  int64     `json:"sizeBytes"`
	Created    time.Time `json:"created"`
}

type entry struct {
	name    string
	rec     Record
	lastUse time.Time
	users   int
}

// Cache is one pool's cache. Its methods are safe for concurrent use.
type Cache struct {
	dir   string
	mode  treecopy.Mode
	limit int64
	// OnEvict, when set, hears every entry removed to make room.
	OnEvict func(key string, sizeBytes int64)

	mu      sync.Mutex
	entries map[string]*entry // by key
	pending map[string]bool   // keys being stored
	bytes   int64
	// reserved is what the pending stores will add.
	reserved int64
}

// Open opens (creating it) the cache in dir, copying with mode and
// holding at most limit bytes. It removes what staging holds (entries
// that never finished, removals that never finished) and entries without
// a readable record, and reports how many; then it evicts down to limit.
func Open(dir string, mode treecopy.Mode, limit int64) (*Cache, int, error) {
	c := &Cache{dir: dir, mode: mode, limit: limit, entries: map[string]*entry{}, pending: map[string]bool{}}
	if err := os.MkdirAll(c.staging(), 0o700); err != nil {
		return nil, 0, fmt.Errorf("clone cache: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, 0, fmt.Errorf("clone cache: %w", err)
	}
	removed := 0
	var errs []error
	stray, err := os.ReadDir(c.staging())
	if err != nil {
		return nil, 0, fmt.Errorf("clone cache: %w", err)
	}
	for _, e := range stray {
		if err := os.RemoveAll(filepath.Join(c.staging(), e.Name())); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	list, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, fmt.Errorf("clone cache: %w", err)
	}
	for _, e := range list {
		if e.Name() == StagingDir {
			continue
		}
		p := filepath.Join(dir, e.Name())
		rec, mtime, err := readRecord(p)
		if err != nil || nameOf(rec.Key) != e.Name() {
			// Not an entry this package made whole: drop it.
			if err := os.RemoveAll(p); err != nil {
				errs = append(errs, err)
				continue
			}
			removed++
			continue
		}
		c.entries[rec.Key] = &entry{name: e.Name(), rec: rec, lastUse: mtime}
		c.bytes += rec.SizeBytes
	}
	if err := errors.Join(errs...); err != nil {
		return nil, removed, fmt.Errorf("clone cache: removing leftovers: %w", err)
	}
	c.mu.Lock()
	doomed := c.evictLocked(c.bytes-limit, "")
	c.mu.Unlock()
	c.removeAll(doomed)
	return c, removed, nil
}

func (c *Cache) staging() string { return filepath.Join(c.dir, StagingDir) }

// nameOf is an entry's directory name: every key fits one entry.
func nameOf(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

func readRecord(entryDir string) (Record, time.Time, error) {
	p := filepath.Join(entryDir, RecordFile)
	data, err := os.ReadFile(p)
	if err != nil {
		return Record{}, time.Time{}, err
	}
	var rec Record
	if err := json.Unmarshal(data, &rec); err != nil {
		return Record{}, time.Time{}, err
	}
	if rec.Key == "" || rec.Generation == "" {
		return Record{}, time.Time{}, errors.New("incomplete record")
	}
	if fi, err := os.Stat(filepath.Join(entryDir, DataDir)); err != nil || !fi.IsDir() {
		return Record{}, time.Time{}, errors.New("no data directory")
	}
	fi, err := os.Stat(p)
	if err != nil {
		return Record{}, time.Time{}, err
	}
	return rec, fi.ModTime(), nil
}

// Limit is the most the cache holds, in bytes.
func (c *Cache) Limit() int64 { return c.limit }

// Bytes is what the entries hold (their recorded sizes).
func (c *Cache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// Entries lists the records, most recently used first.
func (c *Cache) Entries() []Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	es := c.sortedLocked()
	out := make([]Record, 0, len(es))
	for i := len(es) - 1; i >= 0; i-- {
		out = append(out, es[i].rec)
	}
	return out
}

// sortedLocked is the entries, least recently used first.
func (c *Cache) sortedLocked() []*entry {
	es := make([]*entry, 0, len(c.entries))
	for _, e := range c.entries {
		es = append(es, e)
	}
	sort.Slice(es, func(i, j int) bool {
		if !es[i].lastUse.Equal(es[j].lastUse) {
			return es[i].lastUse.Before(es[j].lastUse)
		}
		return es[i].rec.Key < es[j].rec.Key
	})
	return es
}

// Copy fills dst (an existing, empty directory) from the entry of key
// when it holds generation, and reports whether it did. A generation of
// "" never matches. A copy that fails drops the entry and empties dst
// again, so that the caller can fetch instead; the error says why.
func (c *Cache) Copy(ctx context.Context, key, generation, dst string) (treecopy.Stats, bool, error) {
	if generation == "" {
		return treecopy.Stats{}, false, nil
	}
	c.mu.Lock()
	e, ok := c.entries[key]
	if !ok || e.rec.Generation != generation {
		c.mu.Unlock()
		return treecopy.Stats{}, false, nil
	}
	e.users++
	// A local: e.lastUse is the mutex's, and clones of one source copy
	// from its entry at once.
	used := time.Now()
	e.lastUse = used
	c.mu.Unlock()
	dir := filepath.Join(c.dir, e.name)
	_ = os.Chtimes(filepath.Join(dir, RecordFile), used, used) // best effort: orders eviction after a restart
	stats, err := treecopy.Tree(ctx, filepath.Join(dir, DataDir), dst, c.mode)
	c.mu.Lock()
	e.users--
	var doomed []string
	if err != nil && c.entries[key] == e && e.users == 0 {
		doomed = c.dropLocked(e)
	}
	c.mu.Unlock()
	if err != nil {
		c.removeAll(doomed)
		if cerr := emptyDir(dst); cerr != nil {
			return stats, false, fmt.Errorf("%w; and emptying %s again: %w", err, dst, cerr)
		}
		return stats, false, err
	}
	return stats, true, nil
}

// Put stores a copy of the tree src as the entry of key at generation,
// sizeBytes big (what the tree holds), unless the cache already has it.
// It evicts least recently used entries (never one in use) to stay
// within the limit first; a source that cannot fit is ErrTooLarge. An
// entry of key at another generation is replaced, unless it is in use
// (then nothing is stored). A failure leaves the cache as it was.
func (c *Cache) Put(ctx context.Context, key, generation, src string, sizeBytes int64) error {
	if generation == "" {
		return errors.New("no generation: not cacheable")
	}
	c.mu.Lock()
	if old, ok := c.entries[key]; ok && (old.rec.Generation == generation || old.users > 0) {
		c.mu.Unlock()
		return nil
	}
	if c.pending[key] {
		c.mu.Unlock()
		return nil
	}
	var oldBytes int64
	if old, ok := c.entries[key]; ok {
		oldBytes = old.rec.SizeBytes
	}
	if sizeBytes > c.limit {
		c.mu.Unlock()
		return fmt.Errorf("%d bytes, the limit is %d: %w", sizeBytes, c.limit, ErrTooLarge)
	}
	doomed := c.evictLocked(c.bytes+c.reserved-oldBytes+sizeBytes-c.limit, key)
	if c.bytes+c.reserved-oldBytes+sizeBytes > c.limit {
		c.mu.Unlock()
		c.removeAll(doomed)
		return fmt.Errorf("%d bytes with %d held by entries in use, the limit is %d: %w", sizeBytes, c.bytes, c.limit, ErrTooLarge)
	}
	c.pending[key] = true
	c.reserved += sizeBytes
	c.mu.Unlock()
	c.removeAll(doomed)
	defer func() {
		c.mu.Lock()
		delete(c.pending, key)
		c.reserved -= sizeBytes
		c.mu.Unlock()
	}()

	stage, err := os.MkdirTemp(c.staging(), "put-")
	if err != nil {
		return fmt.Errorf("clone cache: %w", err)
	}
	keep := false
	defer func() {
		if !keep {
			_ = os.RemoveAll(stage)
		}
	}()
	if err := os.Mkdir(filepath.Join(stage, DataDir), 0o700); err != nil {
		return fmt.Errorf("clone cache: %w", err)
	}
	if _, err := treecopy.Tree(ctx, src, filepath.Join(stage, DataDir), c.mode); err != nil {
		return fmt.Errorf("clone cache: %w", err)
	}
	rec := Record{Key: key, Generation: generation, SizeBytes: sizeBytes, Created: time.Now().UTC()}
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(stage, RecordFile), data, 0o600); err != nil {
		return fmt.Errorf("clone cache: %w", err)
	}
	if err := treecopy.Syncfs(stage); err != nil {
		return fmt.Errorf("clone cache: syncing: %w", err)
	}
	name := nameOf(key)
	c.mu.Lock()
	var moved []string
	if old, ok := c.entries[key]; ok {
		if old.users > 0 {
			c.mu.Unlock()
			return nil // in use since: keep it, drop ours
		}
		moved = c.dropLocked(old)
	}
	err = os.Rename(stage, filepath.Join(c.dir, name))
	if err == nil {
		keep = true
		c.entries[key] = &entry{name: name, rec: rec, lastUse: time.Now()}
		c.bytes += sizeBytes
	}
	c.mu.Unlock()
	c.removeAll(moved)
	if err != nil {
		return fmt.Errorf("clone cache: %w", err)
	}
	return syncDir(c.dir)
}

// Evict removes least recently used entries not in use until at least
// need bytes are freed or none is left, and returns the bytes freed.
func (c *Cache) Evict(need int64) int64 {
	c.mu.Lock()
	before := c.bytes
	doomed := c.evictLocked(need, "")
	freed := before - c.bytes
	c.mu.Unlock()
	c.removeAll(doomed)
	return freed
}

// evictLocked drops least recently used entries (not in use, not key)
// until need bytes are freed, and returns the directories to remove.
func (c *Cache) evictLocked(need int64, key string) []string {
	var doomed []string
	for _, e := range c.sortedLocked() {
		if need <= 0 {
			break
		}
		if e.users > 0 || e.rec.Key == key {
			continue
		}
		need -= e.rec.SizeBytes
		doomed = append(doomed, c.dropLocked(e)...)
		if c.OnEvict != nil {
			c.OnEvict(e.rec.Key, e.rec.SizeBytes)
		}
	}
	return doomed
}

// dropLocked takes e out of the cache: renamed into staging (so a crash
// leaves no half entry visible) and returned for removal outside the lock.
func (c *Cache) dropLocked(e *entry) []string {
	delete(c.entries, e.rec.Key)
	c.bytes -= e.rec.SizeBytes
	from := filepath.Join(c.dir, e.name)
	to := filepath.Join(c.staging(), "drop-"+e.name+"-"+randSuffix())
	if err := os.Rename(from, to); err != nil {
		// Left where it is: Open would count it again. Remove in place.
		return []string{from}
	}
	return []string{to}
}

func (c *Cache) removeAll(dirs []string) {
	for _, d := range dirs {
		_ = os.RemoveAll(d)
	}
}

func randSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// emptyDir removes everything in dir, keeping dir.
func emptyDir(dir string) error {
	list, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range list {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	return f.Sync()
}
