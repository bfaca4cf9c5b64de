package dirvol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// usageCheckEvery is how many entries the walk handles between looks at the
// context: often enough to stop quickly, rarely enough to cost nothing.
const usageCheckEvery = 256

// readDirBatch bounds the memory the walk needs for a huge directory.
const readDirBatch = 1024

// fileID identifies an inode across hard links.
type fileID struct{ dev, ino uint64 }

// usageWalk is the state of one DirUsage call.
type usageWalk struct {
	ctx     context.Context
	top     string
	dev     uint64
	seen    map[fileID]struct{} // only files with more than one link
	entries int64
	usage   Usage
}

// DirUsage returns the space and inodes used under path, like `du -s -x` and
// `du -s -x --inodes`: symlinks are not followed, a file with several hard
// links counts once, and directories on other filesystems (mounts inside the
// volume) are counted but not entered. Entries that vanish during the walk
// are skipped: a volume in use changes under us. When ctx ends, the walk
// stops and returns its error wrapped, never a partial result.
func DirUsage(ctx context.Context, path string) (Usage, error) {
	if err := validatePath("path", path); err != nil {
		return Usage{}, err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return Usage{}, fmt.Errorf("usage of %s: %w", path, err)
	}
	st, err := statOf(fi)
	if err != nil {
		return Usage{}, fmt.Errorf("usage of %s: %w", path, err)
	}
	w := &usageWalk{ctx: ctx, top: path, dev: st.dev, seen: map[fileID]struct{}{}}
	if err := w.tick(); err != nil {
		return Usage{}, err
	}
	w.add(st)
	if !fi.IsDir() {
		return w.usage, nil
	}
	stack := []string{path}
	for len(stack) > 0 {
		dir := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		sub, err := w.dir(dir)
		if err != nil {
			return Usage{}, err
		}
		stack = append(stack, sub...)
	}
	return w.usage, nil
}

// tick counts one entry and stops the walk when ctx has ended.
func (w *usageWalk) tick() error {
	if w.entries%usageCheckEvery == 0 {
		if err := w.ctx.Err(); err != nil {
			return fmt.Errorf("usage of %s: walk stopped after %d entries: %w", w.top, w.entries, err)
		}
	}
	w.entries++
	return nil
}

func (w *usageWalk) add(st statInfo) {
	if st.nlink > 1 && !st.dir {
		id := fileID{st.dev, st.ino}
		if _, dup := w.seen[id]; dup {
			return
		}
		w.seen[id] = struct{}{}
	}
	w.usage.Bytes += st.blocks * 512
	w.usage.Inodes++
}

// dir accounts for the entries of one directory and returns the
// subdirectories to enter.
func (w *usageWalk) dir(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("usage of %s: %w", w.top, err)
	}
	defer func() { _ = f.Close() }()
	var sub []string
	for {
		names, err := f.Readdirnames(readDirBatch)
		for _, name := range names {
			if err := w.tick(); err != nil {
				return nil, err
			}
			p := filepath.Join(dir, name)
			fi, err := os.Lstat(p)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("usage of %s: %w", w.top, err)
			}
			st, err := statOf(fi)
			if err != nil {
				return nil, fmt.Errorf("usage of %s: %w", w.top, err)
			}
			w.add(st)
			if fi.IsDir() && st.dev == w.dev {
				sub = append(sub, p)
			}
		}
		if errors.Is(err, io.EOF) {
			return sub, nil
		}
		if err != nil {
			return nil, fmt.Errorf("usage of %s: %w", w.top, err)
		}
	}
}
