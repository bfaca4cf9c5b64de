package treecopy

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Decode reads one stream (Encode's) from r and recreates its tree in
// dst, an existing empty directory (normally fresh in staging); dst itself
// gets the root's owner, mode, xattrs and times, as after Tree. Files get
// their apparent size and only the data the stream carries, so holes stay
// holes. Like Tree it makes nothing durable: the caller syncs and renames.
//
// Decode checks each record's crc before it acts on the record, and
// returns an error, leaving what it made for the caller to remove, at the
// first damage: a crc that does not match, a record out of place, a field
// or version it does not know, a path that would leave dst (absolute,
// "..", below anything but the directory being filled, so never through a
// symbolic link), a stream that ends before its trailer or goes on after
// it. A stream it accepts is the tree Encode read, whole.
//
// ctx is checked between records; a Read that blocks is the transport's
// to end (a gRPC stream's reads end with its context).
func Decode(ctx context.Context, r io.Reader, dst string) (Stats, error) {
	if err := emptyDir(dst); err != nil {
		return Stats{}, fmt.Errorf("decode tree: %w", err)
	}
	d := &decoder{ctx: ctx, r: bufio.NewReaderSize(r, streamBuf), dst: dst, linked: map[uint64]string{}}
	err := d.stream()
	if d.file != nil {
		_ = d.file.f.Close() // a failed decode: the caller removes the tree
	}
	d.stats.StreamBytes = d.n
	if err != nil {
		return d.stats, fmt.Errorf("decode tree into %s: %w", dst, err)
	}
	return d.stats, nil
}

// emptyDir refuses a dst that is not an empty directory: the stream's
// entries are created exclusively, and a tree mixed with what was there
// would not be the source's.
func emptyDir(dst string) error {
	fi, err := os.Lstat(dst)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("destination %s is not a directory (mode %s)", dst, fi.Mode())
	}
	f, err := os.Open(dst)
	if err != nil {
		return err
	}
	defer f.Close() //nolint:errcheck // read-only descriptor
	names, err := f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("destination %s is not empty (it holds %s)", dst, names[0])
}

type decoder struct {
	ctx context.Context
	r   *bufio.Reader
	crc uint32 // CRC-32C of everything read so far
	n   int64  // bytes read so far
	dst string
	// entries counts the headers read: the next header's index.
	entries uint64
	// dirs are the directories being filled, the root first: an entry may
	// only come in the last one.
	dirs []openDir
	// linked maps the index of an entry whose inode has other names to
	// where Decode made it, for the hard links that name it.
	linked map[uint64]string
	// file is the regular file whose data comes, between its header and
	// its 'E'.
	file *openFile
	// closed: the root's 'U' came, only the trailer may follow.
	closed  bool
	stats   Stats
	payload []byte
}

type openDir struct {
	rel  string
	meta meta
}

type openFile struct {
	f    *os.File
	path string
	h    *header
	next int64 // where the previous data chunk ended
	sent int64
}

// recordError says which record Decode refuses, and where it starts.
func recordError(kind byte, at int64, err error) error {
	return fmt.Errorf("record %q at byte %d: %w", kind, at, err)
}

func (d *decoder) stream() error {
	magic := make([]byte, len(streamMagic))
	if err := d.read(magic); err != nil {
		return err
	}
	if string(magic) != streamMagic {
		return fmt.Errorf("not a tree stream: field magic is %q, want %q", magic, streamMagic)
	}
	v, err := d.uvarint("version")
	if err != nil {
		return err
	}
	if v != streamVersion {
		return fmt.Errorf("field version: stream version %d, this decoder reads version %d only", v, streamVersion)
	}
	for {
		if err := d.ctx.Err(); err != nil {
			return err
		}
		at := d.n
		kind, p, err := d.record()
		if err != nil {
			return err
		}
		switch kind {
		case recHeader:
			err = d.header(p)
		case recData:
			err = d.data(p)
		case recEnd:
			err = d.end(p)
		case recUp:
			err = d.up(p)
		case recTrailer:
			if err = d.trailer(p, at); err == nil {
				return d.atEOF()
			}
		}
		if err != nil {
			return recordError(kind, at, err)
		}
	}
}

// read fills p from the stream and counts it into the crc and length; the
// stream ending here is an error, since only the trailer may end it.
func (d *decoder) read(p []byte) error {
	n, err := io.ReadFull(d.r, p)
	d.crc = crc32.Update(d.crc, castagnoli, p[:n])
	d.n += int64(n)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("the stream ends after %d bytes, before its trailer: %w", d.n, io.ErrUnexpectedEOF)
	}
	return err
}

// ReadByte makes the decoder an io.ByteReader for binary.ReadUvarint.
func (d *decoder) ReadByte() (byte, error) {
	var b [1]byte
	err := d.read(b[:])
	return b[0], err
}

func (d *decoder) uvarint(field string) (uint64, error) {
	v, err := binary.ReadUvarint(d)
	if err != nil {
		return 0, &fieldError{field: field, err: err}
	}
	return v, nil
}

// record reads the next record and checks its crc. The payload is valid
// until the next call.
func (d *decoder) record() (byte, []byte, error) {
	at := d.n
	var k [1]byte
	if err := d.read(k[:]); err != nil {
		return 0, nil, err
	}
	kind := k[0]
	limit := maxPayload(kind)
	if limit == 0 {
		return kind, nil, fmt.Errorf("at byte %d: field record kind: unknown kind %#02x (a damaged stream: its crc cannot be found past it)", at, kind)
	}
	n, err := d.uvarint("length")
	if err != nil {
		return kind, nil, recordError(kind, at, err)
	}
	if n > uint64(limit) {
		return kind, nil, recordError(kind, at, fmt.Errorf("field length: %d bytes, beyond this kind's limit of %d", n, limit))
	}
	if uint64(cap(d.payload)) < n {
		d.payload = make([]byte, n)
	}
	p := d.payload[:n]
	if err := d.read(p); err != nil {
		return kind, nil, recordError(kind, at, err)
	}
	want := d.crc
	var c [crcSize]byte
	if err := d.read(c[:]); err != nil {
		return kind, nil, recordError(kind, at, err)
	}
	if got := binary.LittleEndian.Uint32(c[:]); got != want {
		return kind, nil, recordError(kind, at, fmt.Errorf("field crc: %08x, but the stream up to it sums to %08x: the stream is damaged", got, want))
	}
	return kind, p, nil
}

func (d *decoder) header(p []byte) error {
	if d.file != nil {
		return fmt.Errorf("an entry's header inside file %s's data (its 'E' missing)", d.file.h.path)
	}
	if d.closed {
		return errors.New("an entry after the root directory's end")
	}
	h, err := parseHeader(p)
	if err != nil {
		return err
	}
	index := d.entries
	d.entries++
	if index == 0 {
		if h.kind != kindDir || h.path != "." {
			return fmt.Errorf("field path: the first entry is %s %q, not the root directory \".\"", h.kind, h.path)
		}
		d.dirs = append(d.dirs, openDir{rel: ".", meta: h.meta})
		return nil
	}
	if err := checkPath(h.path, d.dirs[len(d.dirs)-1].rel); err != nil {
		return &fieldError{field: "path", err: err}
	}
	if err := d.create(h, index); err != nil {
		return fmt.Errorf("%s %s: %w", h.kind, h.path, err)
	}
	return nil
}

// checkPath refuses a path that is not a new name in the directory being
// filled (parent). That directory is one Decode made itself (never a
// symbolic link: entries are only ever created, never replaced) and the
// name is one component, so no path can reach outside dst.
func checkPath(p, parent string) error {
	dir, name := ".", p
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		dir, name = p[:i], p[i+1:]
	}
	switch {
	case p == "":
		return errors.New("empty")
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("%q holds a NUL byte", p)
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("%q is absolute: a stream names entries from its root", p)
	case slices.Contains(strings.Split(p, "/"), ".."):
		return fmt.Errorf("%q goes up (..): it would leave the tree", p)
	case name == "" || name == "." || strings.Contains(p, "//") || strings.HasPrefix(p, "./") || strings.Contains(p, "/./"):
		return fmt.Errorf("%q is not a clean relative path", p)
	case dir != parent:
		return fmt.Errorf("%q is not an entry of %q, the directory being filled: an entry comes after its directory's header, and only there", p, parent)
	}
	return nil
}

// create makes one entry below dst. Every call creates a new name (mkdir,
// O_EXCL, mknod, symlink, link fail on an existing one) and none follows a
// symbolic link in its last component.
func (d *decoder) create(h *header, index uint64) error {
	p := filepath.Join(d.dst, h.path)
	switch h.kind {
	case kindHardLink:
		first, ok := d.linked[h.ref]
		if !ok {
			return &fieldError{field: "ref", err: fmt.Errorf("entry %d is no earlier entry with other names", h.ref)}
		}
		d.stats.HardLinks++
		return os.Link(first, p)
	case kindDir:
		if err := os.Mkdir(p, 0o700); err != nil {
			return err
		}
		d.stats.Dirs++
		d.dirs = append(d.dirs, openDir{rel: h.path, meta: h.meta})
		return nil
	case kindFile:
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
		if err != nil {
			return err
		}
		d.file = &openFile{f: f, path: p, h: h}
		if err := f.Truncate(h.size); err != nil {
			return err
		}
	case kindSymlink:
		if err := os.Symlink(h.link, p); err != nil {
			return err
		}
		d.stats.Symlinks++
	case kindNode:
		if err := unix.Mknod(p, h.meta.mode, int(h.rdev)); err != nil {
			return &os.PathError{Op: "mknod", Path: p, Err: err}
		}
		d.stats.Nodes++
	}
	if h.flags&flagLinked != 0 {
		d.linked[index] = p
	}
	if h.kind == kindFile {
		return nil // its metadata after its data, at its 'E'
	}
	return h.meta.apply(p)
}

// data writes one chunk of the open file at its offset; chunks come in
// order and stay within the file's size.
func (d *decoder) data(p []byte) error {
	o := d.file
	if o == nil {
		return errors.New("data outside a file")
	}
	f := &fields{b: p}
	off := f.uvarint("offset")
	if f.err != nil {
		return f.err
	}
	chunk := f.b
	switch {
	case len(chunk) == 0:
		return &fieldError{field: "data", err: errors.New("empty")}
	case off > uint64(o.h.size) || uint64(len(chunk)) > uint64(o.h.size)-off:
		return &fieldError{field: "offset", err: fmt.Errorf("data [%d, +%d) ends past the file's size %d", off, len(chunk), o.h.size)}
	case int64(off) < o.next:
		return &fieldError{field: "offset", err: fmt.Errorf("%d is before the end of the previous data, %d", off, o.next)}
	}
	if _, err := o.f.WriteAt(chunk, int64(off)); err != nil {
		return err
	}
	o.next = int64(off) + int64(len(chunk))
	o.sent += int64(len(chunk))
	d.stats.DataBytes += int64(len(chunk))
	return nil
}

// end closes the open file and gives it its metadata.
func (d *decoder) end(p []byte) error {
	o := d.file
	if o == nil {
		return errors.New("a file's end outside a file")
	}
	f := &fields{b: p}
	sent := f.uvarint("data bytes")
	if err := f.done("end"); err != nil {
		return err
	}
	if sent != uint64(o.sent) {
		return &fieldError{field: "data bytes", err: fmt.Errorf("%d, but %d came for %s", sent, o.sent, o.h.path)}
	}
	d.file = nil
	if err := o.f.Close(); err != nil {
		return err
	}
	d.stats.Files++
	d.stats.Bytes += o.h.size
	return o.h.meta.apply(o.path)
}

// up closes the directory being filled: its metadata now, after its
// entries changed its mtime; the root's goes to dst itself.
func (d *decoder) up(p []byte) error {
	if len(p) != 0 {
		return &fieldError{field: "payload", err: fmt.Errorf("%d bytes where a directory's end has none", len(p))}
	}
	if d.file != nil {
		return fmt.Errorf("a directory's end inside file %s's data", d.file.h.path)
	}
	if len(d.dirs) == 0 {
		return errors.New("a directory's end with no directory open")
	}
	top := d.dirs[len(d.dirs)-1]
	d.dirs = d.dirs[:len(d.dirs)-1]
	if len(d.dirs) == 0 {
		d.closed = true
	}
	return top.meta.apply(filepath.Join(d.dst, top.rel))
}

// trailer checks the counts the stream ends with against what came.
func (d *decoder) trailer(p []byte, at int64) error {
	if !d.closed {
		return errors.New("the trailer before the root directory's end")
	}
	t, err := parseTrailer(p)
	if err != nil {
		return err
	}
	switch {
	case t.entries != d.entries:
		return &fieldError{field: "entries", err: fmt.Errorf("%d, but %d came", t.entries, d.entries)}
	case t.dataBytes != uint64(d.stats.DataBytes):
		return &fieldError{field: "data bytes", err: fmt.Errorf("%d, but %d came", t.dataBytes, d.stats.DataBytes)}
	case t.streamBytes != uint64(at):
		return &fieldError{field: "stream bytes", err: fmt.Errorf("%d, but the trailer starts at byte %d", t.streamBytes, at)}
	}
	return nil
}

// atEOF checks that the reader ends with the trailer: r carries one
// stream, and bytes after it are a transport's mistake.
func (d *decoder) atEOF() error {
	var b [1]byte
	n, err := d.r.Read(b[:])
	for n == 0 && err == nil {
		n, err = d.r.Read(b[:])
	}
	if n > 0 {
		return fmt.Errorf("bytes follow the trailer (at byte %d): the reader carries more than one stream", d.n)
	}
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}
