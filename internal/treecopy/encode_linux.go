package treecopy

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"
)

// streamBuf batches the small records (headers, small files) into few
// writes; a data chunk larger than what is free in it goes to w directly.
const streamBuf = 256 << 10

// Encode writes the tree src (a directory) into w as one stream
// (format_linux.go) and returns what it sent. Only the data ranges of
// regular files are read and sent (SEEK_DATA/SEEK_HOLE), so a sparse
// image costs what it holds, not its size. Nothing in src is changed:
// files and directories are opened with O_NOATIME where the kernel allows
// it (their owner, or CAP_FOWNER), so even access times stay.
//
// It stops at the first error, or when ctx ends (checked between entries
// and between data chunks); the stream it wrote then has no trailer, which
// Decode refuses. Encode does not close w.
func Encode(ctx context.Context, src string, w io.Writer) (Stats, error) {
	fi, err := os.Lstat(src)
	if err != nil {
		return Stats{}, fmt.Errorf("encode tree: %w", err)
	}
	if !fi.IsDir() {
		return Stats{}, fmt.Errorf("encode tree: source %s is not a directory (mode %s)", src, fi.Mode())
	}
	e := &encoder{ctx: ctx, w: bufio.NewWriterSize(w, streamBuf), links: map[fileKey]uint64{}}
	err = e.stream(src, fi)
	e.stats.StreamBytes = e.n
	if err != nil {
		return e.stats, fmt.Errorf("encode tree %s: %w", src, err)
	}
	return e.stats, nil
}

type encoder struct {
	ctx context.Context
	w   *bufio.Writer
	crc uint32 // CRC-32C of everything written so far
	n   int64  // bytes written so far
	// entries counts the headers written: the next header's index.
	entries uint64
	// links maps an inode with several names to the index of its first
	// entry, which its other names refer to.
	links map[fileKey]uint64
	stats Stats
	hdr   []byte // a header's payload, reused
	frame []byte // a record's kind and length, or its crc, reused
	buf   []byte // a data chunk
}

func (e *encoder) stream(src string, fi fs.FileInfo) error {
	if err := e.write([]byte(streamMagic)); err != nil {
		return err
	}
	if err := e.write(binary.AppendUvarint(nil, streamVersion)); err != nil {
		return err
	}
	if err := e.entry(src, ".", fi); err != nil {
		return err
	}
	t := trailer{entries: e.entries, dataBytes: uint64(e.stats.DataBytes), streamBytes: uint64(e.n)}
	if err := e.record(recTrailer, appendTrailer(nil, t)); err != nil {
		return err
	}
	return e.w.Flush()
}

// write sends p and counts it into the running crc and length.
func (e *encoder) write(p []byte) error {
	e.crc = crc32.Update(e.crc, castagnoli, p)
	e.n += int64(len(p))
	_, err := e.w.Write(p)
	return err
}

// record writes one record whose payload is the parts, one after another
// (a data chunk goes out from the read buffer, not copied into a payload).
func (e *encoder) record(kind byte, parts ...[]byte) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	e.frame = binary.AppendUvarint(append(e.frame[:0], kind), uint64(n))
	if err := e.write(e.frame); err != nil {
		return err
	}
	for _, p := range parts {
		if err := e.write(p); err != nil {
			return err
		}
	}
	e.frame = binary.LittleEndian.AppendUint32(e.frame[:0], e.crc)
	return e.write(e.frame)
}

func (e *encoder) header(h *header) error {
	e.hdr = appendHeader(e.hdr[:0], h)
	if len(e.hdr) > maxHeader {
		return fmt.Errorf("%s: its header takes %d bytes (xattrs %d), beyond the stream's limit of %d", h.path, len(e.hdr), len(h.meta.xattrs), maxHeader)
	}
	e.entries++
	return e.record(recHeader, e.hdr)
}

// entry sends one entry (abs in the source, rel in the stream) and, for a
// directory, everything below it.
func (e *encoder) entry(abs, rel string, fi fs.FileInfo) error {
	if err := e.ctx.Err(); err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	h := &header{path: rel}
	if !fi.IsDir() && st.Nlink > 1 {
		key := fileKey{dev: st.Dev, ino: st.Ino}
		if first, ok := e.links[key]; ok {
			h.kind, h.ref = kindHardLink, first
			e.stats.HardLinks++
			return e.header(h)
		}
		e.links[key] = e.entries
		h.flags |= flagLinked
	}
	m, err := readMeta(abs, fi)
	if err != nil {
		return err
	}
	h.meta = m
	switch {
	case fi.IsDir():
		h.kind = kindDir
		return e.dir(abs, h)
	case fi.Mode().IsRegular():
		h.kind, h.size = kindFile, fi.Size()
		return e.file(abs, h)
	case fi.Mode()&fs.ModeSymlink != 0:
		h.kind = kindSymlink
		if h.link, err = os.Readlink(abs); err != nil {
			return err
		}
		e.stats.Symlinks++
	default: // fifo, socket, device
		h.kind, h.rdev = kindNode, st.Rdev
		e.stats.Nodes++
	}
	return e.header(h)
}

// dir sends a directory's header, its entries sorted by name, and the
// 'U' after which Decode sets its times.
func (e *encoder) dir(abs string, h *header) error {
	d, err := openSource(abs, unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	slices.Sort(names)
	if err := e.header(h); err != nil {
		return err
	}
	for _, name := range names {
		p := abs + "/" + name
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel := name
		if h.path != "." {
			rel = h.path + "/" + name
		}
		if err := e.entry(p, rel, fi); err != nil {
			return err
		}
	}
	if h.path != "." {
		e.stats.Dirs++ // as Tree counts: the root is not one
	}
	return e.record(recUp)
}

// file sends a regular file's header, its data ranges in chunks and its
// 'E'. A file that shrank while read sends less (the rest a hole, as
// Tree leaves it); one that grew sends its size at its Lstat.
func (e *encoder) file(abs string, h *header) error {
	f, err := openSource(abs, 0)
	if err != nil {
		return err
	}
	defer f.Close() //nolint:errcheck // read-only descriptor
	if err := e.header(h); err != nil {
		return err
	}
	if e.buf == nil {
		e.buf = make([]byte, maxChunk)
	}
	var sent int64
	var off [binary.MaxVarintLen64]byte
	err = dataRanges(f, h.size, func(start, end int64) error {
		for pos := start; pos < end; {
			if err := e.ctx.Err(); err != nil {
				return err
			}
			n, err := f.ReadAt(e.buf[:min(int64(len(e.buf)), end-pos)], pos)
			if n > 0 {
				if werr := e.record(recData, off[:binary.PutUvarint(off[:], uint64(pos))], e.buf[:n]); werr != nil {
					return werr
				}
				pos += int64(n)
				sent += int64(n)
			}
			if errors.Is(err, io.EOF) {
				return nil // the file shrank while read
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	e.stats.Files++
	e.stats.Bytes += h.size
	e.stats.DataBytes += sent
	return e.record(recEnd, binary.AppendUvarint(nil, uint64(sent)))
}

// openSource opens a source entry read-only, without following a symbolic
// link and, where allowed, without moving its atime: reading the source of
// a clone must leave it as it was.
func openSource(p string, flags int) (*os.File, error) {
	const base = os.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
	f, err := os.OpenFile(p, base|flags|unix.O_NOATIME, 0)
	if errors.Is(err, unix.EPERM) {
		// O_NOATIME is for the file's owner or CAP_FOWNER only.
		f, err = os.OpenFile(p, base|flags, 0)
	}
	return f, err
}
