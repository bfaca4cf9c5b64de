package treecopy

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"golang.org/x/sys/unix"
)

// The stream Encode writes and Decode reads. The hpp-csi of two nodes
// speak it to each other, of different versions during an upgrade: any
// change to what it holds is a new version, and Decode refuses a version
// it does not know by name rather than misreading it.
//
//	stream  = magic | version | record ... (the trailer last)
//	magic   = "hpptree\x00" (8 bytes)
//	version = uvarint (streamVersion)
//	record  = kind (1 byte) | length (uvarint) | payload (length bytes) | crc (4 bytes, little endian)
//
// crc is the CRC-32C of every byte of the stream before it: the magic, the
// version and the earlier records, their crcs included. Decode checks a
// record's crc before it acts on the record, so a damaged byte stops the
// copy at the record that holds it, before anything it damaged is
// written, and a record dropped, repeated or moved stops it too (the
// running crc vouches for the order). CRC-32C and not a cryptographic
// hash: it guards against damage and mistakes (a truncated transfer, a
// transport that drops or repeats a message), not against an attacker,
// whom the mTLS connection keeps out; the CPU computes it at many GB/s.
//
// The records, in stream order:
//
//	'H' an entry's header (below). The tree's root (path ".") comes first,
//	    a directory's entries after its header, sorted by name.
//	'D' data of the regular file whose header came last: offset (uvarint)
//	    and 1 to maxChunk bytes. Offsets only grow; the bytes no 'D'
//	    carries are holes.
//	'E' the end of that file's data: the count of its data bytes (uvarint).
//	'U' the end of the directory opened last: its metadata (times) is
//	    applied then, after its entries changed it.
//	'T' the trailer, after the root's 'U': the count of entries, the data
//	    bytes, and the stream's length before the trailer (uvarints).
//	    Nothing follows it: the reader must end there.
//
// An entry's header is: kind (1 byte) | path (string), and then for a hard
// link only ref (uvarint), the index of the earlier entry (the root is 0)
// whose inode it names; for every other kind: mode (st_mode), uid, gid
// (uvarints) | atime, mtime (each varint seconds, uvarint nanoseconds) |
// flags (1 byte) | xattrs: a count (uvarint), then name (string) and value
// (string) each | for a file its apparent size (uvarint), for a symbolic
// link its target (string), for a device node its rdev (uvarint). A string
// is its length (uvarint) and its bytes.
const (
	streamMagic   = "hpptree\x00"
	streamVersion = 1
)

// Record kinds.
const (
	recHeader  = 'H'
	recData    = 'D'
	recEnd     = 'E'
	recUp      = 'U'
	recTrailer = 'T'
)

// Entry kinds of a header.
type entryKind byte

const (
	kindDir entryKind = iota + 1
	kindFile
	kindSymlink
	kindNode // fifo, socket, character or block device
	kindHardLink
)

func (k entryKind) String() string {
	switch k {
	case kindDir:
		return "directory"
	case kindFile:
		return "file"
	case kindSymlink:
		return "symlink"
	case kindNode:
		return "node"
	case kindHardLink:
		return "hard link"
	}
	return fmt.Sprintf("kind %d", byte(k))
}

// flagLinked marks an entry whose inode has other names in the tree: they
// follow as hard links that name it, and only such entries are remembered
// by Decode.
const flagLinked = 1

// Limits that bound what a damaged or hostile length can make Decode
// allocate before a crc catches it. maxChunk is also the encoder's read
// size: large enough to keep syscalls few, small enough for many
// concurrent clones.
const (
	maxChunk  = 1 << 20
	maxHeader = 4 << 20 // a path, a link target and the xattrs (64 KiB each at most)
	maxSmall  = 64      // 'E', 'U' and 'T'
	crcSize   = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maxPayload is the largest payload a record of kind may have; 0 means an
// unknown kind.
func maxPayload(kind byte) int {
	switch kind {
	case recHeader:
		return maxHeader
	case recData:
		return binary.MaxVarintLen64 + maxChunk
	case recEnd, recUp, recTrailer:
		return maxSmall
	}
	return 0
}

// header is an entry as the stream describes it.
type header struct {
	kind  entryKind
	path  string
	meta  meta   // all kinds but a hard link
	flags byte   // flagLinked
	size  int64  // file: apparent size
	link  string // symlink: target
	rdev  uint64 // node
	ref   uint64 // hard link: the index of the entry it names
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendTime(b []byte, ts unix.Timespec) []byte {
	b = binary.AppendVarint(b, ts.Sec)
	return binary.AppendUvarint(b, uint64(ts.Nsec))
}

// appendHeader appends h's payload to b.
func appendHeader(b []byte, h *header) []byte {
	b = append(b, byte(h.kind))
	b = appendString(b, h.path)
	if h.kind == kindHardLink {
		return binary.AppendUvarint(b, h.ref)
	}
	m := &h.meta
	b = binary.AppendUvarint(b, uint64(m.mode))
	b = binary.AppendUvarint(b, uint64(m.uid))
	b = binary.AppendUvarint(b, uint64(m.gid))
	b = appendTime(b, m.atime)
	b = appendTime(b, m.mtime)
	b = append(b, h.flags)
	b = binary.AppendUvarint(b, uint64(len(m.xattrs)))
	for _, x := range m.xattrs {
		b = appendString(b, x.name)
		b = appendString(b, string(x.value))
	}
	switch h.kind {
	case kindFile:
		b = binary.AppendUvarint(b, uint64(h.size))
	case kindSymlink:
		b = appendString(b, h.link)
	case kindNode:
		b = binary.AppendUvarint(b, h.rdev)
	}
	return b
}

// fieldError names the field of a record that Decode refuses.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return "field " + e.field + ": " + e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

// fields reads a payload field by field; the first error sticks and names
// its field.
type fields struct {
	b   []byte
	err error
}

func (f *fields) fail(field, format string, args ...any) {
	if f.err == nil {
		f.err = &fieldError{field: field, err: fmt.Errorf(format, args...)}
	}
}

func (f *fields) uvarint(field string) uint64 {
	return readVarint(f, field, "uvarint", binary.Uvarint)
}

func (f *fields) varint(field string) int64 {
	return readVarint(f, field, "varint", binary.Varint)
}

// readVarint reads one field with decode (binary.Uvarint or
// binary.Varint, which differ only in their sign); encoding names it in
// the error when the bytes left are not one.
func readVarint[T uint64 | int64](f *fields, field, encoding string, decode func([]byte) (T, int)) T {
	if f.err != nil {
		return 0
	}
	v, n := decode(f.b)
	if n <= 0 {
		f.fail(field, "not a %s (%d bytes left)", encoding, len(f.b))
		return 0
	}
	f.b = f.b[n:]
	return v
}

// uint32 reads a uvarint that must fit 32 bits (mode, uid, gid).
func (f *fields) uint32(field string) uint32 {
	v := f.uvarint(field)
	if v > 1<<32-1 {
		f.fail(field, "%d does not fit 32 bits", v)
	}
	return uint32(v)
}

func (f *fields) byte(field string) byte {
	if f.err != nil {
		return 0
	}
	if len(f.b) == 0 {
		f.fail(field, "missing")
		return 0
	}
	v := f.b[0]
	f.b = f.b[1:]
	return v
}

func (f *fields) string(field string) string {
	n := f.uvarint(field + " length")
	if f.err != nil {
		return ""
	}
	if n > uint64(len(f.b)) {
		f.fail(field, "length %d runs past the record (%d bytes left)", n, len(f.b))
		return ""
	}
	s := string(f.b[:n])
	f.b = f.b[n:]
	return s
}

func (f *fields) time(field string) unix.Timespec {
	sec := f.varint(field + " seconds")
	nsec := f.uvarint(field + " nanoseconds")
	if nsec >= 1e9 {
		f.fail(field+" nanoseconds", "%d is not below 1e9", nsec)
	}
	return unix.Timespec{Sec: sec, Nsec: int64(nsec)}
}

// done fails unless the whole payload was read: a field left over is a
// stream this decoder does not understand.
func (f *fields) done(what string) error {
	if f.err == nil && len(f.b) > 0 {
		f.fail(what, "%d bytes left over after the last field", len(f.b))
	}
	return f.err
}

// parseHeader reads an entry's header and checks each field on its own
// (the kind known, the mode's file type the kind's); where the entry may
// go is Decode's to check.
func parseHeader(p []byte) (*header, error) {
	f := &fields{b: p}
	h := &header{kind: entryKind(f.byte("kind"))}
	if f.err == nil && (h.kind < kindDir || h.kind > kindHardLink) {
		f.fail("kind", "unknown entry kind %d (this decoder knows %d to %d)", byte(h.kind), kindDir, kindHardLink)
	}
	h.path = f.string("path")
	if h.kind == kindHardLink {
		h.ref = f.uvarint("ref")
		return h, f.done("hard link header")
	}
	m := &h.meta
	m.mode = f.uint32("mode")
	m.uid = f.uint32("uid")
	m.gid = f.uint32("gid")
	m.atime = f.time("atime")
	m.mtime = f.time("mtime")
	h.flags = f.byte("flags")
	if h.flags&^flagLinked != 0 {
		f.fail("flags", "unknown flags %#x", h.flags&^flagLinked)
	}
	n := f.uvarint("xattr count")
	if n > uint64(len(f.b)/2) { // each xattr takes two bytes at least
		f.fail("xattr count", "%d xattrs cannot fit the %d bytes left", n, len(f.b))
	}
	for i := uint64(0); i < n && f.err == nil; i++ {
		name := f.string("xattr name")
		value := f.string("xattr value")
		if f.err == nil && name == "" {
			f.fail("xattr name", "empty")
		}
		m.xattrs = append(m.xattrs, xattr{name: name, value: []byte(value)})
	}
	switch h.kind {
	case kindFile:
		size := f.uvarint("size")
		if size > 1<<63-1 {
			f.fail("size", "%d is too large for a file", size)
		}
		h.size = int64(size)
	case kindSymlink:
		h.link = f.string("target")
		if f.err == nil && h.link == "" {
			f.fail("target", "empty")
		}
	case kindNode:
		h.rdev = f.uvarint("rdev")
	}
	if f.err == nil && !typeFits(h.kind, m.mode) {
		f.fail("mode", "%#o is not a %s (file type %#o)", m.mode, h.kind, m.mode&unix.S_IFMT)
	}
	if f.err == nil && m.mode&^(unix.S_IFMT|0o7777) != 0 {
		f.fail("mode", "%#o has bits beyond the file type and permissions", m.mode)
	}
	return h, f.done(h.kind.String() + " header")
}

// typeFits reports whether st_mode's file type is the kind's.
func typeFits(k entryKind, mode uint32) bool {
	switch t := mode & unix.S_IFMT; k {
	case kindDir:
		return t == unix.S_IFDIR
	case kindFile:
		return t == unix.S_IFREG
	case kindSymlink:
		return t == unix.S_IFLNK
	case kindNode:
		return t == unix.S_IFIFO || t == unix.S_IFSOCK || t == unix.S_IFCHR || t == unix.S_IFBLK
	}
	return false
}

// trailer is the stream's last record.
type trailer struct {
	entries, dataBytes, streamBytes uint64
}

func appendTrailer(b []byte, t trailer) []byte {
	b = binary.AppendUvarint(b, t.entries)
	b = binary.AppendUvarint(b, t.dataBytes)
	return binary.AppendUvarint(b, t.streamBytes)
}

func parseTrailer(p []byte) (trailer, error) {
	f := &fields{b: p}
	t := trailer{entries: f.uvarint("entries"), dataBytes: f.uvarint("data bytes"), streamBytes: f.uvarint("stream bytes")}
	return t, f.done("trailer")
}
