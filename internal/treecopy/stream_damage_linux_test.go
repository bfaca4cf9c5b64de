package treecopy

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Cut and damaged streams, and Decode's refusals of a wrong dst or a
// cancelled context (no root needed: a small tree of the test's own user).

// buildSmallTree makes every kind of entry that needs no root, small
// enough for a decode per byte of its stream: directories, a file with a
// hole and data at its end, a hard link, symbolic links, a fifo, user
// xattrs where the filesystem keeps them.
func buildSmallTree(t *testing.T, root string) {
	t.Helper()
	must := fatalOnError(t)
	must(os.MkdirAll(filepath.Join(root, "a", "b"), 0o755))
	must(os.WriteFile(filepath.Join(root, "a", "b", "small"), []byte("hpp\n"), 0o640))
	must(os.WriteFile(filepath.Join(root, "a", "text"), bytes.Repeat([]byte("stream "), 300), 0o600))
	must(os.Link(filepath.Join(root, "a", "text"), filepath.Join(root, "text-link")))
	f, err := os.Create(filepath.Join(root, "holes"))
	must(err)
	_, err = f.WriteAt([]byte("start"), 0)
	must(err)
	_, err = f.WriteAt([]byte("end"), 1<<20-3)
	must(err)
	must(f.Close())
	must(os.Symlink("a/text", filepath.Join(root, "link")))
	must(unix.Mkfifo(filepath.Join(root, "a", "fifo"), 0o644))
	if err := unix.Setxattr(filepath.Join(root, "a", "text"), "user.hpp", []byte("x"), 0); err != nil {
		t.Logf("no user xattrs here (%v): the stream carries none", err)
	}
}

// encodeBytes returns the stream of the tree src.
func encodeBytes(t *testing.T, src string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := Encode(context.Background(), src, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// decodeInto decodes stream into a fresh directory base/dst and removes
// it again; it fails the test if anything appears in base but src, dst
// and outside (an empty directory hostile streams aim at).
func decodeInto(t *testing.T, base string, stream []byte) error {
	t.Helper()
	dst := filepath.Join(base, "dst")
	if err := os.Mkdir(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := Decode(context.Background(), bytes.NewReader(stream), dst)
	if rerr := os.RemoveAll(dst); rerr != nil {
		t.Fatal(rerr)
	}
	names, rerr := os.ReadDir(base)
	if rerr != nil {
		t.Fatal(rerr)
	}
	for _, n := range names {
		if n.Name() != "src" && n.Name() != "outside" {
			t.Fatalf("%s appeared beside dst", n.Name())
		}
	}
	if out, _ := os.ReadDir(filepath.Join(base, "outside")); len(out) > 0 {
		t.Fatalf("%s appeared in outside, beside dst", out[0].Name())
	}
	return err
}

func smallStream(t *testing.T) (base string, stream []byte) {
	base = t.TempDir()
	buildSmallTree(t, filepath.Join(base, "src"))
	if err := os.Mkdir(filepath.Join(base, "outside"), 0o755); err != nil {
		t.Fatal(err)
	}
	stream = encodeBytes(t, filepath.Join(base, "src"))
	// The control: the whole stream decodes to the source's tree.
	dst := filepath.Join(base, "control")
	if err := os.Mkdir(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	want := capture(t, filepath.Join(base, "src"))
	stats, err := Decode(context.Background(), bytes.NewReader(stream), dst)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Files != 3 || stats.HardLinks != 1 || stats.Symlinks != 1 || stats.Nodes != 1 || stats.Dirs != 2 {
		t.Fatalf("stats = %+v, want 3 files, 1 hard link, 1 symlink, 1 node, 2 dirs", stats)
	}
	got := capture(t, dst)
	// Without a noatime mount (no root), reading the trees moves atimes.
	for _, m := range []map[string]entryInfo{want, got} {
		for k, e := range m {
			e.atime, e.ino = unix.Timespec{}, 0
			m[k] = e
		}
	}
	if !equalMaps(got, want) {
		t.Fatalf("the decoded tree differs:\n got %+v\nwant %+v", got, want)
	}
	if err := os.RemoveAll(dst); err != nil {
		t.Fatal(err)
	}
	t.Logf("stream of %d bytes, %d of them file data", len(stream), stats.DataBytes)
	return base, stream
}

// TestStreamTruncatedFails cuts the stream at every byte of its magic,
// headers, framing and crcs, and at some of its file data: each prefix
// fails Decode as a stream that ends early, none passes as a short tree.
func TestStreamTruncatedFails(t *testing.T) {
	base, stream := smallStream(t)
	cuts := positions(t, stream)
	t.Logf("cutting at %d places", len(cuts))
	for _, cut := range cuts {
		err := decodeInto(t, base, stream[:cut])
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("the stream cut at byte %d of %d: Decode returned %v, want a stream that ends early", cut, len(stream), err)
		}
	}
}

// TestStreamDamagedFails flips one bit at the same bytes (the bit moves
// with the byte): each damaged stream fails Decode, and nothing lands
// outside dst.
func TestStreamDamagedFails(t *testing.T) {
	base, stream := smallStream(t)
	damaged := bytes.Clone(stream)
	flips := positions(t, stream)
	t.Logf("flipping a bit at %d places", len(flips))
	for _, i := range flips {
		damaged[i] ^= 1 << (i % 8)
		if err := decodeInto(t, base, damaged); err == nil {
			t.Fatalf("bit %d of byte %d flipped: Decode accepted the stream", i%8, i)
		}
		damaged[i] = stream[i]
	}
	// Bytes after the trailer are damage too.
	if err := decodeInto(t, base, append(bytes.Clone(stream), 0)); err == nil {
		t.Fatal("a byte after the trailer: Decode accepted the stream")
	}
}

// positions are the bytes of stream that a cut or a flip is tried at:
// every byte but the file data, and of each data chunk its first and last
// bytes and its middle (data is one more run of bytes under the crc; a
// decode per byte of it would cost seconds on a disk).
func positions(t *testing.T, stream []byte) []int {
	t.Helper()
	_, k := binary.Uvarint(stream[len(streamMagic):])
	var out []int
	for i := range len(streamMagic) + k {
		out = append(out, i)
	}
	for i := len(streamMagic) + k; i < len(stream); {
		n, k := binary.Uvarint(stream[i+1:])
		start, end := i+1+k, i+1+k+int(n)
		skipFrom, skipTo := end, end // the data bytes not tried
		if stream[i] == recData {
			_, ko := binary.Uvarint(stream[start:])
			skipFrom, skipTo = start+ko+4, end-4
		}
		for j := i; j < end+crcSize; j++ {
			if j < skipFrom || j >= skipTo || j == (skipFrom+skipTo)/2 {
				out = append(out, j)
			}
		}
		i = end + crcSize
	}
	if last := out[len(out)-1]; last != len(stream)-1 {
		t.Fatalf("the records end at byte %d, the stream at %d", last+1, len(stream))
	}
	return out
}

// TestStreamIntoNonEmptyDirFails: dst must be empty, so that the result is
// the source's tree and nothing else.
func TestStreamIntoNonEmptyDirFails(t *testing.T) {
	base, stream := smallStream(t)
	dst := filepath.Join(base, "dst")
	if err := os.MkdirAll(filepath.Join(dst, "there"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(context.Background(), bytes.NewReader(stream), dst); err == nil {
		t.Fatal("Decode into a directory that is not empty succeeded")
	}
}

// TestStreamCancel: a cancelled context stops both ends.
func TestStreamCancel(t *testing.T) {
	base, stream := smallStream(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Encode(ctx, filepath.Join(base, "src"), io.Discard); !errors.Is(err, context.Canceled) {
		t.Fatalf("Encode with a cancelled context: %v", err)
	}
	dst := filepath.Join(base, "dst")
	if err := os.Mkdir(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(ctx, bytes.NewReader(stream), dst); !errors.Is(err, context.Canceled) {
		t.Fatalf("Decode with a cancelled context: %v", err)
	}
}
