package remote

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/peer"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools/poolstest"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/pool"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
	"github.com/hostpath-provisioner/hpp/internal/treecopy"
)

// servingNode is node-a: a pool runtime over a temp pool (with
// snapshots) holding volume pvc-src and its snapshot snap-1, served by a
// real peer.Server with the claim check over the fake API.
type servingNode struct {
	rt   *pools.Runtime
	vol  pools.Volume
	snap string // snap-1's data directory
	port string
}

func startServingNode(t *testing.T, ca *testutil.TestCA) *servingNode {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	p := pool.Pool{Name: "a", Path: filepath.Join(dir, "a", "csi"),
		SnapshotProvider: pool.SnapshotProviderReflink, SnapshotPath: filepath.Join(dir, "a", "snapshots")}
	rt, _ := openNodeRuntime(t, "node-a", p, pools.Deps{})
	vol, err := rt.Create(ctx, pools.Creation{Pool: "a", ID: "pvc-src", What: "volume",
		Spec:   dirvol.Spec{CapacityBytes: 64 << 20, Fill: fillTree(t)},
		Accept: func(dirvol.Volume) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	s, err := rt.TakeSnapshot(ctx, "snap-1", vol)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &peer.Server{Node: "node-a", Creds: nodeCreds(t, ca, "node-a"), Auth: peer.NewClaimCheck(fakeAPI(t), ""),
		Source: &Source{RT: rt, Log: zap.NewNop()}, Log: zap.NewNop()}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	return &servingNode{rt: rt, vol: vol, snap: s.Data, port: port}
}

// fillTree writes the source volume: modes, a symlink, a hard link, an
// empty file, and a sparse file with data between two holes.
// openNodeRuntime is node's pool runtime over the one pool p, with fake
// mounts and statfs, opened as run opens it before serving. p's host pool
// directory (its path's parent) is made first, as a deployment has it.
// deps adds what the node needs beyond the fakes (its Remote, its
// Metrics). It returns the fake statfs too, for a test that changes it.
func openNodeRuntime(t *testing.T, node string, p pool.Pool, deps pools.Deps) (*pools.Runtime, *poolstest.FS) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p.Path), 0o755); err != nil {
		t.Fatal(err)
	}
	set, err := pool.NewSet([]pool.Pool{p})
	if err != nil {
		t.Fatal(err)
	}
	mounter := poolstest.NewMounter()
	fsys := poolstest.NewFS(mounter)
	deps.Mounter, deps.Labeler, deps.FS = mounter, &poolstest.Labeler{}, fsys
	rt, err := pools.New(pools.Config{NodeID: node, Pools: set, StatsCacheTTL: time.Minute, StatsTimeout: 10 * time.Second}, deps)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.OpenPools(context.Background()); err != nil {
		t.Fatal(err)
	}
	return rt, fsys
}

func fillTree(t *testing.T) func(dir string) error {
	return func(dir string) error {
		t.Helper()
		must := func(err error) {
			if err != nil {
				t.Fatal(err)
			}
		}
		must(os.Mkdir(filepath.Join(dir, "sub"), 0o750))
		must(os.WriteFile(filepath.Join(dir, "sub", "data.txt"), []byte("hello from node-a\n"), 0o640))
		must(os.Chmod(filepath.Join(dir, "sub", "data.txt"), 0o640))
		must(os.WriteFile(filepath.Join(dir, "empty"), nil, 0o600))
		must(os.Symlink("sub/data.txt", filepath.Join(dir, "link")))
		must(os.Link(filepath.Join(dir, "sub", "data.txt"), filepath.Join(dir, "hard")))
		f, err := os.OpenFile(filepath.Join(dir, "disk.img"), os.O_CREATE|os.O_WRONLY, 0o660)
		must(err)
		must(f.Truncate(32 << 20))
		_, err = f.WriteAt(bytes.Repeat([]byte("x"), 64<<10), 8<<20)
		must(err)
		must(f.Close())
		return nil
	}
}

func fetcherOnB(t *testing.T, ca *testutil.TestCA, port string) *Fetcher {
	t.Helper()
	return &Fetcher{
		Resolver: &Resolver{API: fakeAPI(t), Node: "node-b", Port: port},
		Client:   &peer.Client{Creds: nodeCreds(t, ca, "node-b")},
	}
}

// Two hpp-csi peers in one process: node-b fetches node-a's volume and
// snapshot for claims that select node-b, and decodes them into trees
// equal to the sources (content, modes, links, holes).
func TestCloneAcrossNodes(t *testing.T) {
	ca := newCA(t)
	a := startServingNode(t, ca)
	f := fetcherOnB(t, ca, a.port)
	ctx := context.Background()
	for _, tt := range []struct {
		src   pools.Source
		claim string
		dir   string
	}{
		{vol("pvc-src"), "clone", a.vol.Path},
		{snap("snap-1"), "restore", a.snap},
	} {
		st, err := f.Fetch(ctx, tt.src, pools.ClaimRef{Namespace: ns, Name: tt.claim}, "")
		if err != nil {
			t.Fatalf("%+v: %v", tt.src, err)
		}
		usage, err := dirvol.DirUsage(ctx, tt.dir)
		if err != nil {
			t.Fatal(err)
		}
		if st.Node != "node-a" || st.AllocatedBytes != usage.Bytes || st.AllocatedBytes < 64<<10 {
			t.Errorf("%+v: stream from %q with %d allocated bytes, want node-a and %d", tt.src, st.Node, st.AllocatedBytes, usage.Bytes)
		}
		dst := filepath.Join(t.TempDir(), "new")
		if err := os.Mkdir(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := treecopy.Decode(ctx, st, dst); err != nil {
			t.Fatalf("%+v: decoding: %v", tt.src, err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		compareTrees(t, tt.dir, dst)
	}
	// The source's lock was given back when the stream ended.
	waitUnlocked(t, func() (func(), error) { return a.rt.Lock("pvc-src") })
	waitUnlocked(t, func() (func(), error) { return a.rt.LockSnapshot("snap-1") })
}

// The source is locked while it is streamed, and released when the
// fetching side closes the stream before its end.
func TestSourceLockedWhileStreamed(t *testing.T) {
	ca := newCA(t)
	a := startServingNode(t, ca)
	f := fetcherOnB(t, ca, a.port)
	// Larger than what the connection buffers, so that its encoding waits
	// for the reader.
	_, err := a.rt.Create(context.Background(), pools.Creation{Pool: "a", ID: "pvc-big", What: "volume",
		Spec: dirvol.Spec{CapacityBytes: 128 << 20, Fill: func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "big"), bytes.Repeat([]byte("0123456789abcdef"), 4<<20), 0o644)
		}},
		Accept: func(dirvol.Volume) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.Fetch(context.Background(), vol("pvc-big"), pools.ClaimRef{Namespace: ns, Name: "clone-big"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(st, make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	if release, err := a.rt.Lock("pvc-big"); err == nil || pools.KindOf(err) != pools.Busy {
		if release != nil {
			release()
		}
		t.Fatalf("lock of the volume being streamed: %v, want Busy", err)
	}
	// Another clone of it meanwhile: the serving node is busy (a 5xx),
	// which the fetcher reports as unavailable, naming the node.
	if _, err := f.Fetch(context.Background(), vol("pvc-big"), pools.ClaimRef{Namespace: ns, Name: "clone-big"}, ""); !errors.Is(err, peer.ErrUnavailable) || !strings.Contains(err.Error(), "node node-a") {
		t.Errorf("second fetch while streaming: %v, want ErrUnavailable naming node-a", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	waitUnlocked(t, func() (func(), error) { return a.rt.Lock("pvc-big") })
}

// The serving node's answers keep their sentinels and name the node: a
// source the API places on node-a that node-a does not hold (404), a
// requester the claim did not select (403), a node that does not answer.
func TestFetchErrors(t *testing.T) {
	ca := newCA(t)
	a := startServingNode(t, ca)
	f := fetcherOnB(t, ca, a.port)
	ctx := context.Background()
	_, err := f.Fetch(ctx, vol("pvc-gone"), pools.ClaimRef{Namespace: ns, Name: "clone-gone"}, "")
	if !errors.Is(err, peer.ErrSourceNotFound) || !errors.Is(err, pools.ErrSourceNotFound) || !strings.Contains(err.Error(), "node node-a") || !strings.Contains(err.Error(), `"pvc-gone"`) {
		t.Errorf("volume not on its node: %v", err)
	}
	// node-c's certificate is valid, but the claim selected node-b: 403.
	c := &Fetcher{Resolver: &Resolver{API: fakeAPI(t), Node: "node-c", Port: a.port}, Client: &peer.Client{Creds: nodeCreds(t, ca, "node-c")}}
	_, err = c.Fetch(ctx, vol("pvc-src"), pools.ClaimRef{Namespace: ns, Name: "clone"}, "")
	if !errors.Is(err, peer.ErrNotAuthorized) || !errors.Is(err, pools.ErrNotAuthorized) || !strings.Contains(err.Error(), "node node-a") {
		t.Errorf("requester the claim did not select: %v", err)
	}
	// Nothing listens on the port any more: unavailable.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, closedPort, _ := net.SplitHostPort(lis.Addr().String())
	_ = lis.Close()
	d := fetcherOnB(t, ca, closedPort)
	_, err = d.Fetch(ctx, vol("pvc-src"), pools.ClaimRef{Namespace: ns, Name: "clone"}, "")
	if !errors.Is(err, peer.ErrUnavailable) || !errors.Is(err, pools.ErrSourceUnavailable) || !strings.Contains(err.Error(), "node node-a") {
		t.Errorf("unreachable node: %v", err)
	}
}

func waitUnlocked(t *testing.T, lock func() (func(), error)) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		release, err := lock()
		if err == nil {
			release()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("source still locked after its stream ended: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// compareTrees checks that dst has what src has: the same entries, types,
// permissions, contents, link targets and hard links, and regular files
// no more allocated than their source (holes kept).
func compareTrees(t *testing.T, src, dst string) {
	t.Helper()
	inodes := map[uint64]string{} // src inode -> first path
	dstInodes := map[string]uint64{}
	count := 0
	err := filepath.WalkDir(src, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		q := filepath.Join(dst, rel)
		a, err := os.Lstat(p)
		if err != nil {
			return err
		}
		b, err := os.Lstat(q)
		if err != nil {
			t.Errorf("%s: missing in the copy: %v", rel, err)
			return nil
		}
		count++
		if a.Mode() != b.Mode() {
			t.Errorf("%s: mode %v, want %v", rel, b.Mode(), a.Mode())
		}
		sa, sb := a.Sys().(*syscall.Stat_t), b.Sys().(*syscall.Stat_t)
		switch {
		case a.Mode()&fs.ModeSymlink != 0:
			ta, _ := os.Readlink(p)
			tb, _ := os.Readlink(q)
			if ta != tb {
				t.Errorf("%s: link to %q, want %q", rel, tb, ta)
			}
		case a.Mode().IsRegular():
			da, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			db, err := os.ReadFile(q)
			if err != nil {
				return err
			}
			if !bytes.Equal(da, db) {
				t.Errorf("%s: content differs (%d bytes, want %d)", rel, len(db), len(da))
			}
			if sb.Blocks > sa.Blocks+8 { // a block of slack for filesystems that round up
				t.Errorf("%s: %d blocks allocated, the source %d: holes not kept", rel, sb.Blocks, sa.Blocks)
			}
			if first, ok := inodes[sa.Ino]; ok {
				if dstInodes[first] != sb.Ino {
					t.Errorf("%s: not a hard link of %s as in the source", rel, first)
				}
			} else {
				inodes[sa.Ino] = rel
				dstInodes[rel] = sb.Ino
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dst, "disk.img")); err != nil || st.Size() != 32<<20 {
		t.Errorf("disk.img: %v, %v: want 32 MiB", st, err)
	} else if blocks := st.Sys().(*syscall.Stat_t).Blocks * 512; blocks >= 16<<20 {
		t.Errorf("disk.img: %d bytes allocated of 32 MiB: the holes were filled", blocks)
	}
	var n int
	_ = filepath.WalkDir(dst, func(string, fs.DirEntry, error) error { n++; return nil })
	if n != count {
		t.Errorf("the copy has %d entries, the source %d", n, count)
	}
}

// node-b's pool runtime, with the Fetcher as its RemoteSources, makes a
// volume from node-a's volume through Create as CreateVolume does: asked
// again until the copy is done, it returns a volume equal to the source.
func TestCreateFromAnotherNode(t *testing.T) {
	ca := newCA(t)
	a := startServingNode(t, ca)
	b := startReceivingNode(t, ca, a.port, 0)
	vol := b.create(t, "pvc-clone", pools.Source{ID: "pvc-src"}, "clone")
	compareTrees(t, a.vol.Path, vol.Path)
}
