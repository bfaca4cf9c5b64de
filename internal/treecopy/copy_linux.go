package treecopy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// Tree copies the contents of src into dst, an existing directory (normally
// empty and freshly made in staging), and then gives dst the owner, mode,
// timestamps and xattrs of src. It stops at the first error, or when ctx
// ends, and leaves what it made for the caller to remove.
func Tree(ctx context.Context, src, dst string, mode Mode) (Stats, error) {
	c := &copier{ctx: ctx, mode: mode, links: map[fileKey]string{}}
	fi, err := os.Lstat(src)
	if err != nil {
		return Stats{}, fmt.Errorf("copy tree: %w", err)
	}
	if !fi.IsDir() {
		return Stats{}, fmt.Errorf("copy tree: source %s is not a directory (mode %s)", src, fi.Mode())
	}
	if err := c.dir(src, dst); err != nil {
		return c.stats, fmt.Errorf("copy tree %s to %s: %w", src, dst, err)
	}
	if err := setMeta(src, dst, fi); err != nil {
		return c.stats, fmt.Errorf("copy tree %s to %s: %w", src, dst, err)
	}
	return c.stats, nil
}

type fileKey struct{ dev, ino uint64 }

type copier struct {
	ctx   context.Context
	mode  Mode
	stats Stats
	// links maps an inode with several names to its first copy, so that
	// its other names become hard links to that copy, as in the source.
	links map[fileKey]string
	buf   []byte
}

// dir copies the entries of src into dst (which exists). Directory
// metadata is applied after the children: writing them changes mtime.
func (c *copier) dir(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := c.ctx.Err(); err != nil {
			return err
		}
		sp, dp := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		fi, err := os.Lstat(sp)
		if err != nil {
			return err
		}
		if err := c.entry(sp, dp, fi); err != nil {
			return err
		}
	}
	return nil
}

func (c *copier) entry(sp, dp string, fi fs.FileInfo) error {
	st := fi.Sys().(*syscall.Stat_t)
	if fi.IsDir() {
		if err := os.Mkdir(dp, 0o700); err != nil {
			return err
		}
		c.stats.Dirs++
		if err := c.dir(sp, dp); err != nil {
			return err
		}
		return setMeta(sp, dp, fi)
	}
	key := fileKey{dev: st.Dev, ino: st.Ino}
	if st.Nlink > 1 {
		if first, ok := c.links[key]; ok {
			c.stats.HardLinks++
			return os.Link(first, dp)
		}
	}
	var err error
	switch {
	case fi.Mode().IsRegular():
		err = c.file(sp, dp, fi)
	case fi.Mode()&fs.ModeSymlink != 0:
		err = symlink(sp, dp)
		c.stats.Symlinks++
	default: // fifo, socket, device: a node like it
		err = unix.Mknod(dp, st.Mode, int(st.Rdev))
		c.stats.Nodes++
	}
	if err != nil {
		return err
	}
	if st.Nlink > 1 {
		c.links[key] = dp
	}
	return setMeta(sp, dp, fi)
}

func symlink(sp, dp string) error {
	target, err := os.Readlink(sp)
	if err != nil {
		return err
	}
	return os.Symlink(target, dp)
}

// file copies one regular file's data: a reflink when asked and possible,
// else its size and its data ranges (a trailing hole stays a hole).
func (c *copier) file(sp, dp string, fi fs.FileInfo) error {
	in, err := os.OpenFile(sp, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close() //nolint:errcheck // read-only descriptor
	out, err := os.OpenFile(dp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = c.data(in, out, fi.Size())
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	c.stats.Files++
	c.stats.Bytes += fi.Size()
	return nil
}

func (c *copier) data(in, out *os.File, size int64) error {
	if c.mode == Reflink {
		err := unix.IoctlFileClone(int(out.Fd()), int(in.Fd()))
		if err == nil {
			c.stats.Reflinked++
			return nil
		}
		if !cannotClone(err) {
			return &fs.PathError{Op: "ficlone", Path: out.Name(), Err: err}
		}
	}
	// The size first, then the data: writes below EOF never extend the
	// file, so XFS makes no speculative preallocation past EOF, blocks that
	// the file's growth would keep inside it, filling its holes (a 1 GiB
	// image whose data takes 44 MiB took 76 MiB when the size came last).
	if err := out.Truncate(size); err != nil {
		return err
	}
	return c.ranges(in, out, size)
}

// cannotClone reports the FICLONE errors that mean "not here" (another
// filesystem, no reflink support, an unsuitable file), not a failure.
func cannotClone(err error) bool {
	for _, e := range []error{unix.EOPNOTSUPP, unix.ENOTSUP, unix.EXDEV, unix.EINVAL, unix.ENOTTY, unix.ENOSYS, unix.EBADF} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// ranges copies the data ranges of in at the same offsets in out; holes
// are skipped, so they stay holes.
func (c *copier) ranges(in, out *os.File, size int64) error {
	return dataRanges(in, size, func(start, end int64) error {
		return c.span(in, out, start, end)
	})
}

// dataRanges calls fn on each data range [start, end) of f below size, in
// order, found with SEEK_DATA/SEEK_HOLE: the holes between them are never
// read. Where the filesystem has no SEEK_DATA, the whole rest is one range.
// Tree and Encode both read files through it.
func dataRanges(f *os.File, size int64, fn func(start, end int64) error) error {
	fd := int(f.Fd())
	for off := int64(0); off < size; {
		start, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return nil // only a hole is left
		}
		if err != nil {
			// No SEEK_DATA here: the whole rest is data.
			return fn(off, size)
		}
		if start >= size {
			return nil // data past size: the file grew since its Lstat
		}
		end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
		if err != nil || end > size {
			end = size
		}
		if err := fn(start, end); err != nil {
			return err
		}
		off = end
	}
	return nil
}

// copyBuf is large enough to keep syscalls few, small enough for many
// concurrent clones.
const copyBuf = 1 << 20

func (c *copier) span(in, out *os.File, start, end int64) error {
	if c.buf == nil {
		c.buf = make([]byte, copyBuf)
	}
	for off := start; off < end; {
		if err := c.ctx.Err(); err != nil {
			return err
		}
		n, err := in.ReadAt(c.buf[:min(int64(len(c.buf)), end-off)], off)
		if n > 0 {
			if _, werr := out.WriteAt(c.buf[:n], off); werr != nil {
				return werr
			}
			off += int64(n)
			c.stats.DataBytes += int64(n)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil // the file shrank while copied
			}
			return err
		}
	}
	return nil
}
