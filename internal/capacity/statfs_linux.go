package capacity

import (
	"io/fs"
	"math"

	"golang.org/x/sys/unix"
)

// Statfs returns the figures for the filesystem holding path.
func Statfs(path string) (Stats, error) {
	if err := validatePath("path", path); err != nil {
		return Stats{}, err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return Stats{}, &fs.PathError{Op: "statfs", Path: path, Err: err}
	}
	// Block counts are in units of the fragment size; it equals the block
	// size on every common Linux filesystem, but df uses it too.
	unit := uint64(st.Frsize)
	if unit == 0 {
		unit = uint64(st.Bsize)
	}
	used := st.Blocks - min(st.Bfree, st.Blocks)
	return Stats{
		TotalBytes:     mulClamp(st.Blocks, unit),
		AvailableBytes: mulClamp(st.Bavail, unit),
		UsedBytes:      mulClamp(used, unit),
		TotalInodes:    clamp(st.Files),
		FreeInodes:     clamp(st.Ffree),
		UsedInodes:     clamp(st.Files - min(st.Ffree, st.Files)),
	}, nil
}

func sameFilesystem(a, b string) (bool, error) {
	var sa, sb unix.Stat_t
	if err := unix.Stat(a, &sa); err != nil {
		return false, &fs.PathError{Op: "stat", Path: a, Err: err}
	}
	if err := unix.Stat(b, &sb); err != nil {
		return false, &fs.PathError{Op: "stat", Path: b, Err: err}
	}
	return sa.Dev == sb.Dev, nil
}

// mulClamp multiplies without wrapping: an exabyte-scale filesystem must not
// show up as negative capacity.
func mulClamp(n, unit uint64) int64 {
	if unit != 0 && n > math.MaxInt64/unit {
		return math.MaxInt64
	}
	return clamp(n * unit)
}

func clamp(n uint64) int64 {
	if n > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(n)
}
