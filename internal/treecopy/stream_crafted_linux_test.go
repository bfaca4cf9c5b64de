package treecopy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Hostile and malformed streams, written record by record (no root
// needed: every entry is the test's own user's).

// crafter writes streams a damaged or hostile sender could: records of
// its choice, each with a correct crc, so that Decode's other checks are
// what refuses them.
type crafter struct {
	t   *testing.T
	out bytes.Buffer
	e   *encoder
}

func newCrafter(t *testing.T, version uint64) *crafter {
	c := &crafter{t: t}
	c.e = &encoder{ctx: context.Background(), links: map[fileKey]uint64{}}
	c.e.w = bufio.NewWriter(&c.out)
	c.check(c.e.write([]byte(streamMagic)))
	c.check(c.e.write(binary.AppendUvarint(nil, version)))
	return c
}

func (c *crafter) check(err error) {
	c.t.Helper()
	if err != nil {
		c.t.Fatal(err)
	}
}

func (c *crafter) header(h *header)           { c.check(c.e.header(h)) }
func (c *crafter) rec(kind byte, p ...[]byte) { c.check(c.e.record(kind, p...)) }
func (c *crafter) data(off uint64, b []byte)  { c.rec(recData, binary.AppendUvarint(nil, off), b) }
func (c *crafter) end(n uint64)               { c.rec(recEnd, binary.AppendUvarint(nil, n)) }
func (c *crafter) up()                        { c.rec(recUp) }
func (c *crafter) trailerWith(t trailer) []byte {
	c.rec(recTrailer, appendTrailer(nil, t))
	return c.bytes()
}

// trailer ends the stream with the counts it holds.
func (c *crafter) trailer(dataBytes uint64) []byte {
	return c.trailerWith(trailer{entries: c.e.entries, dataBytes: dataBytes, streamBytes: uint64(c.e.n)})
}

func (c *crafter) bytes() []byte {
	c.check(c.e.w.Flush())
	return c.out.Bytes()
}

// own is metadata of the test's own user, so that no check needs root.
func own(mode uint32) meta {
	return meta{uid: uint32(os.Getuid()), gid: uint32(os.Getgid()), mode: mode,
		atime: unix.Timespec{Sec: 1e9}, mtime: unix.Timespec{Sec: 1e9}}
}

func dirH(p string) *header { return &header{kind: kindDir, path: p, meta: own(unix.S_IFDIR | 0o755)} }
func fileH(p string, size int64) *header {
	return &header{kind: kindFile, path: p, size: size, meta: own(unix.S_IFREG | 0o644)}
}
func symlinkH(p, target string) *header {
	return &header{kind: kindSymlink, path: p, link: target, meta: own(unix.S_IFLNK | 0o777)}
}

// TestStreamRefusesEscapes feeds Decode streams whose paths aim outside
// dst: each is refused, and nothing appears outside dst.
func TestStreamRefusesEscapes(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, want string
		entries    func(c *crafter)
	}{
		{"absolute", "field path", func(c *crafter) { c.header(fileH(filepath.Join(outside, "escaped"), 0)) }},
		{"dot-dot", "field path", func(c *crafter) { c.header(fileH("../outside/escaped", 0)) }},
		{"dot-dot inside", "field path", func(c *crafter) {
			c.header(dirH("a"))
			c.header(fileH("a/../../outside/escaped", 0))
		}},
		{"through a symlink", "field path", func(c *crafter) {
			c.header(symlinkH("s", outside))
			c.header(fileH("s/escaped", 0))
		}},
		{"through a relative symlink", "field path", func(c *crafter) {
			c.header(symlinkH("s", "../outside"))
			c.header(dirH("s/escaped"))
		}},
		{"a directory over a symlink", "file exists", func(c *crafter) {
			c.header(symlinkH("s", outside))
			c.header(dirH("s"))
			c.header(fileH("s/escaped", 0))
		}},
		{"below a directory already closed", "field path", func(c *crafter) {
			c.header(dirH("a"))
			c.up()
			c.header(fileH("a/late", 0))
		}},
		{"not clean", "field path", func(c *crafter) { c.header(fileH("./x", 0)) }},
		{"a hard link to an unknown entry", "field ref", func(c *crafter) {
			c.header(&header{kind: kindHardLink, path: "l", ref: 7})
		}},
		{"a hard link to a directory", "field ref", func(c *crafter) {
			c.header(dirH("a"))
			c.up()
			c.header(&header{kind: kindHardLink, path: "l", ref: 1})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCrafter(t, streamVersion)
			c.header(dirH("."))
			tc.entries(c)
			err := decodeInto(t, base, c.trailer(0))
			if err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
				t.Fatalf("Decode returned %v, want an error with %q", err, tc.want)
			}
			t.Log(err)
		})
	}
}

// TestStreamRefusesWhatItDoesNotKnow: a version, a record kind, an entry
// kind, a flag or a mode this decoder does not know, or records out of
// place, each fail with an error that names the field.
func TestStreamRefusesWhatItDoesNotKnow(t *testing.T) {
	base := t.TempDir()
	// afterRoot crafts a stream of this version that opens the root
	// directory and goes on as rest does, left unfinished: most refusals
	// come after that opening.
	afterRoot := func(rest func(c *crafter)) func(t *testing.T) []byte {
		return func(t *testing.T) []byte {
			c := newCrafter(t, streamVersion)
			c.header(dirH("."))
			rest(c)
			return c.bytes()
		}
	}
	cases := []struct {
		name, want string
		stream     func(t *testing.T) []byte
	}{
		{"magic", "field magic", func(t *testing.T) []byte { return []byte("tar\x00\x00\x00\x00\x00\x01") }},
		{"version", "field version: stream version 2", func(t *testing.T) []byte {
			c := newCrafter(t, 2)
			c.header(dirH("."))
			c.up()
			return c.trailer(0)
		}},
		{"record kind", "field record kind", afterRoot(func(c *crafter) { c.rec('X') })},
		{"entry kind", "field kind: unknown entry kind 9", afterRoot(func(c *crafter) { c.header(&header{kind: 9, path: "x", meta: own(unix.S_IFREG)}) })},
		{"mode", "field mode", afterRoot(func(c *crafter) { c.header(&header{kind: kindFile, path: "x", meta: own(unix.S_IFDIR | 0o755)}) })},
		{"flags", "field flags", func(t *testing.T) []byte {
			c := newCrafter(t, streamVersion)
			h := dirH(".")
			h.flags = 0x80
			c.header(h)
			return c.bytes()
		}},
		{"root", "not the root directory", func(t *testing.T) []byte {
			c := newCrafter(t, streamVersion)
			c.header(fileH("x", 0))
			return c.bytes()
		}},
		{"data past the size", "field offset", afterRoot(func(c *crafter) {
			c.header(fileH("x", 4))
			c.data(2, []byte("abc"))
		})},
		{"data backwards", "field offset", afterRoot(func(c *crafter) {
			c.header(fileH("x", 10))
			c.data(4, []byte("ab"))
			c.data(0, []byte("ab"))
		})},
		{"data outside a file", "data outside a file", afterRoot(func(c *crafter) { c.data(0, []byte("ab")) })},
		{"a file's count", "field data bytes", afterRoot(func(c *crafter) {
			c.header(fileH("x", 10))
			c.data(0, []byte("ab"))
			c.end(3)
		})},
		{"an entry inside a file", "inside file x's data", afterRoot(func(c *crafter) {
			c.header(fileH("x", 10))
			c.header(fileH("y", 10))
		})},
		{"trailer before the root's end", "before the root directory's end", func(t *testing.T) []byte {
			c := newCrafter(t, streamVersion)
			c.header(dirH("."))
			return c.trailer(0)
		}},
		{"trailer's entries", "field entries", func(t *testing.T) []byte {
			c := newCrafter(t, streamVersion)
			c.header(dirH("."))
			c.up()
			return c.trailerWith(trailer{entries: 2, streamBytes: uint64(c.e.n)})
		}},
		{"trailer's length", "field stream bytes", func(t *testing.T) []byte {
			c := newCrafter(t, streamVersion)
			c.header(dirH("."))
			c.up()
			return c.trailerWith(trailer{entries: 1, streamBytes: 3})
		}},
		{"an entry after the root's end", "after the root directory's end", afterRoot(func(c *crafter) {
			c.up()
			c.header(fileH("x", 0))
		})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := decodeInto(t, base, tc.stream(t))
			if err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
				t.Fatalf("Decode returned %v, want an error with %q", err, tc.want)
			}
			t.Log(err)
		})
	}
	// The smallest stream there is, an empty tree, decodes.
	c := newCrafter(t, streamVersion)
	c.header(dirH("."))
	c.up()
	if err := decodeInto(t, base, c.trailer(0)); err != nil {
		t.Fatalf("an empty tree: %v", err)
	}
}
