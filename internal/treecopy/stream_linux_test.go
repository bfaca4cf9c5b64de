package treecopy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

// Node tests (root): buildTree's tree sent through Encode | pipe | Decode
// on tmpfs and on XFS, checked entry by entry against the source, which
// must be left as it was.

func TestNodeStreamTmpfs(t *testing.T) {
	streamSuite(t, testutil.TmpfsDir(t, 256<<20))
}

func TestNodeStreamXFS(t *testing.T) {
	streamSuite(t, testutil.LoopXFS(t, 512<<20))
}

func streamSuite(t *testing.T, base string) {
	noatime(t, base)
	src, dst := filepath.Join(base, "src"), filepath.Join(base, "dst")
	buildTree(t, src)
	if err := os.Mkdir(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	want, wantCtimes := capture(t, src), ctimes(t, src)
	enc, dec, err := pipeTree(context.Background(), src, dst)
	if err != nil {
		t.Fatal(err)
	}
	if enc != dec {
		t.Fatalf("Encode sent %+v, Decode took %+v", enc, dec)
	}
	checkCounts(t, dec)
	checkDataBytes(t, src, dec.DataBytes)
	// Headers, chunk framing and crcs: a few bytes per entry and per MiB.
	if over := dec.StreamBytes - dec.DataBytes; over > 64<<10 {
		t.Fatalf("the stream took %d bytes for %d data bytes: %d of overhead", dec.StreamBytes, dec.DataBytes, over)
	}
	t.Logf("stream: %d bytes, %d of them file data, for %d bytes of apparent size", dec.StreamBytes, dec.DataBytes, dec.Bytes)
	sameTree(t, want, dst)
	sameHoles(t, src, dst)
	// The source is as it was: contents, modes, owners, xattrs, atimes and
	// mtimes, and ctimes (nothing was written there, not even metadata).
	sameTree(t, want, src)
	if got := ctimes(t, src); !equalMaps(got, wantCtimes) {
		t.Fatalf("the source's ctimes changed: %v, were %v", got, wantCtimes)
	}
}

// pipeTree copies src into dst through Encode | os.Pipe | Decode, the two
// ends in two goroutines as the two nodes run them.
func pipeTree(ctx context.Context, src, dst string) (enc, dec Stats, err error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return enc, dec, err
	}
	done := make(chan error, 1)
	go func() {
		var err error
		enc, err = Encode(ctx, src, pw)
		// Closing the write end ends the stream: EOF after the trailer.
		if cerr := pw.Close(); err == nil {
			err = cerr
		}
		done <- err
	}()
	dec, derr := Decode(ctx, pr, dst)
	// After a failed Decode, Encode's writes fail (EPIPE) and it returns.
	cerr := pr.Close()
	return enc, dec, errors.Join(derr, <-done, cerr)
}

func ctimes(t testing.TB, root string) map[string]unix.Timespec {
	t.Helper()
	out := map[string]unix.Timespec{}
	walk(t, root, func(p string) {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		out[p] = st.Ctim
	})
	return out
}

func equalMaps[K, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
