package clonecache

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hostpath-provisioner/hpp/internal/treecopy"
)

// tree makes a source directory holding one file of content.
func tree(t *testing.T, content string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "f"), []byte(content), 0o640); err != nil {
		t.Fatal(err)
	}
	return dir
}

func open(t *testing.T, dir string, limit int64) *Cache {
	t.Helper()
	c, _, err := Open(dir, treecopy.Copy, limit)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// copyOut copies key at gen into a new directory and returns its file's
// content, or "" with ok false on a miss.
func copyOut(t *testing.T, c *Cache, key, gen string) (string, bool) {
	t.Helper()
	dst := t.TempDir()
	_, ok, err := c.Copy(context.Background(), key, gen, dst)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return "", false
	}
	data, err := os.ReadFile(filepath.Join(dst, "sub", "f"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data), true
}

func TestPutCopyAndGenerations(t *testing.T) {
	dir := filepath.Join(t.TempDir(), Dir)
	c := open(t, dir, 1<<20)
	ctx := context.Background()
	if err := c.Put(ctx, "volume:a", "g1", tree(t, "one"), 100); err != nil {
		t.Fatal(err)
	}
	if got, ok := copyOut(t, c, "volume:a", "g1"); !ok || got != "one" {
		t.Fatalf("hit at g1: %q, %v", got, ok)
	}
	if _, ok := copyOut(t, c, "volume:a", "g2"); ok {
		t.Fatal("served at another generation")
	}
	if _, ok := copyOut(t, c, "volume:a", ""); ok {
		t.Fatal("served at the empty generation")
	}
	if err := c.Put(ctx, "volume:a", "", tree(t, "x"), 100); err == nil {
		t.Fatal("stored without a generation")
	}
	// A new generation replaces the entry.
	if err := c.Put(ctx, "volume:a", "g2", tree(t, "two"), 150); err != nil {
		t.Fatal(err)
	}
	if _, ok := copyOut(t, c, "volume:a", "g1"); ok {
		t.Fatal("the stale generation is still served")
	}
	if got, ok := copyOut(t, c, "volume:a", "g2"); !ok || got != "two" {
		t.Fatalf("hit at g2: %q, %v", got, ok)
	}
	if c.Bytes() != 150 {
		t.Errorf("bytes %d, want 150", c.Bytes())
	}
	// A restart finds the same.
	c = open(t, dir, 1<<20)
	if got, ok := copyOut(t, c, "volume:a", "g2"); !ok || got != "two" || c.Bytes() != 150 {
		t.Fatalf("after reopen: %q, %v, %d bytes", got, ok, c.Bytes())
	}
	if err := c.Put(ctx, "snapshot:s", "g", tree(t, "big"), 2<<20); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a source larger than the limit: %v, want ErrTooLarge", err)
	}
}

// Under a small limit the least recently used entries go, the newest and
// the recently used stay, and evictions are reported.
func TestLRUEviction(t *testing.T) {
	dir := filepath.Join(t.TempDir(), Dir)
	c := open(t, dir, 300)
	var mu sync.Mutex
	var evicted []string
	c.OnEvict = func(key string, _ int64) {
		mu.Lock()
		evicted = append(evicted, key)
		mu.Unlock()
	}
	ctx := context.Background()
	for _, k := range []string{"k1", "k2", "k3"} {
		if err := c.Put(ctx, k, "g", tree(t, k), 100); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// k1 used again: k2 is now the least recently used.
	if _, ok := copyOut(t, c, "k1", "g"); !ok {
		t.Fatal("k1 missing")
	}
	time.Sleep(5 * time.Millisecond)
	if err := c.Put(ctx, "k4", "g", tree(t, "k4"), 100); err != nil {
		t.Fatal(err)
	}
	if len(evicted) != 1 || evicted[0] != "k2" {
		t.Fatalf("evicted %v, want [k2]", evicted)
	}
	if err := c.Put(ctx, "k5", "g", tree(t, "k5"), 200); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range c.Entries() {
		keys = append(keys, r.Key)
	}
	if len(keys) != 2 || keys[0] != "k5" || keys[1] != "k4" {
		t.Fatalf("entries %v, want [k5 k4] (newest first)", keys)
	}
	if c.Bytes() != 300 {
		t.Errorf("bytes %d, want 300", c.Bytes())
	}
	// The order survives a restart (entry.json's time), and a smaller
	// limit evicts down to it at open.
	c = open(t, dir, 200)
	if got := c.Entries(); len(got) != 1 || got[0].Key != "k5" {
		t.Fatalf("after reopen with a limit of 200: %v, want k5 alone", got)
	}
	if freed := c.Evict(1); freed != 200 || c.Bytes() != 0 {
		t.Fatalf("Evict freed %d, %d bytes left", freed, c.Bytes())
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 1 || left[0].Name() != StagingDir {
		t.Errorf("after evicting all, the cache directory holds %v", left)
	}
}

// A crash while an entry was being stored leaves staging, and maybe a
// directory without its record: reopening removes both, and no entry is
// visible.
func TestCrashLeavesNoEntry(t *testing.T) {
	dir := filepath.Join(t.TempDir(), Dir)
	c := open(t, dir, 1<<20)
	if err := c.Put(context.Background(), "volume:whole", "g", tree(t, "w"), 10); err != nil {
		t.Fatal(err)
	}
	half := filepath.Join(dir, StagingDir, "put-123")
	if err := os.MkdirAll(filepath.Join(half, DataDir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(half, DataDir, "sub", "f"), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	norecord := filepath.Join(dir, nameOf("volume:half"))
	if err := os.MkdirAll(filepath.Join(norecord, DataDir), 0o700); err != nil {
		t.Fatal(err)
	}
	c, removed, err := Open(dir, treecopy.Copy, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if removed != 2 {
		t.Errorf("removed %d leftovers, want 2", removed)
	}
	if got := c.Entries(); len(got) != 1 || got[0].Key != "volume:whole" {
		t.Fatalf("entries after the crash: %v, want the whole one only", got)
	}
	if _, ok := copyOut(t, c, "volume:half", "g"); ok {
		t.Fatal("the half entry is served")
	}
	for _, p := range []string{half, norecord} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", p, err)
		}
	}
}

// An entry being copied from is never evicted or replaced.
func TestInUseKept(t *testing.T) {
	dir := filepath.Join(t.TempDir(), Dir)
	c := open(t, dir, 100)
	ctx := context.Background()
	if err := c.Put(ctx, "a", "g", tree(t, "a"), 100); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.entries["a"].users++
	c.mu.Unlock()
	if err := c.Put(ctx, "b", "g", tree(t, "b"), 100); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("room taken by an entry in use: %v, want ErrTooLarge", err)
	}
	if err := c.Put(ctx, "a", "g2", tree(t, "a2"), 50); err != nil {
		t.Fatal(err)
	}
	if freed := c.Evict(100); freed != 0 {
		t.Fatalf("Evict freed %d bytes of an entry in use", freed)
	}
	c.mu.Lock()
	c.entries["a"].users--
	c.mu.Unlock()
	if got, ok := copyOut(t, c, "a", "g"); !ok || got != "a" {
		t.Fatalf("the entry in use changed: %q, %v", got, ok)
	}
}
