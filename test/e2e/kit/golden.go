package kit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/hostpath-provisioner/hpp/test/cluster"
)

// What the cross-node scenarios (test/e2e/crossnode_test.go) and the
// cross-node benchmark (test/bench/crossnode) put in a golden image claim
// and read back.

// GoldenImageBytes is disk.img's apparent size.
const GoldenImageBytes = 1 << 30

// GoldenExtentBytes is the size of each written extent of disk.img.
const GoldenExtentBytes = 4 << 20

// WriteGoldenImage writes what a VM image claim holds into dir: disk.img,
// GoldenImageBytes apparent with dataMiB MiB (a multiple of 4) in
// scattered 4 MiB extents, an xattr on it (user.hpp-image=golden), small
// files small/f0..f9, a symbolic link "link" to small/f0 and a hard link
// "hard" to small/f1; then syncs.
func WriteGoldenImage(dir string, dataMiB int) error {
	extents := dataMiB * (1 << 20) / GoldenExtentBytes
	if extents < 1 || dataMiB%4 != 0 || int64(dataMiB)<<20 > GoldenImageBytes/2 {
		return fmt.Errorf("golden image data %d MiB: must be a multiple of 4, at least 4 and at most half of %d bytes", dataMiB, GoldenImageBytes)
	}
	img := filepath.Join(dir, "disk.img")
	f, err := os.OpenFile(img, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	if err := f.Truncate(GoldenImageBytes); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(28, 28))
	extent := make([]byte, GoldenExtentBytes)
	spacing := int64(GoldenImageBytes / extents)
	// Each extent shifted inside its slot by up to 8 MiB (or what the
	// slot leaves): scattered, never overlapping, some unaligned.
	shift := min(8<<20, spacing-GoldenExtentBytes)
	for i := range extents {
		for j := range extent {
			extent[j] = byte(rng.Uint32())
		}
		off := int64(i) * spacing
		if shift > 0 {
			off += rng.Int64N(shift)
		}
		if _, err := f.WriteAt(extent, off); err != nil {
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := unix.Setxattr(img, "user.hpp-image", []byte("golden"), 0); err != nil {
		return err
	}
	if err := os.Mkdir(filepath.Join(dir, "small"), 0o755); err != nil {
		return err
	}
	for i := range 10 {
		if err := os.WriteFile(filepath.Join(dir, "small", "f"+strconv.Itoa(i)), []byte(strings.Repeat(strconv.Itoa(i), 1000+i)), 0o640); err != nil {
			return err
		}
	}
	if err := os.Symlink("small/f0", filepath.Join(dir, "link")); err != nil {
		return err
	}
	if err := os.Link(filepath.Join(dir, "small", "f1"), filepath.Join(dir, "hard")); err != nil {
		return err
	}
	unix.Sync()
	return nil
}

// TreeSums is "sha256 ./path" for every regular file under dir, sorted, as
// `find . -type f | sort | xargs sha256sum` prints them (one space).
func TreeSums(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		sum, err := FileSum(p, -1)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, sum+" ./"+rel)
		return nil
	})
	sort.Strings(out)
	return out, err
}

// FileSum is the hex sha256 of the file's first n bytes (all of it when n
// is negative).
func FileSum(path string, n int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	var r io.Reader = f
	if n >= 0 {
		r = io.LimitReader(f, n)
	}
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// AllocatedBytes is what the files under dir hold on disk (st_blocks),
// each inode once.
func AllocatedBytes(dir string) (int64, error) {
	seen := map[uint64]bool{}
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		if !seen[st.Ino] {
			seen[st.Ino] = true
			total += st.Blocks * 512
		}
		return nil
	})
	return total, err
}

// MetricSum sums the series of the counter name on n's hpp-csi /metrics
// (all label values).
func MetricSum(ctx context.Context, n *cluster.Node, name string) (float64, error) {
	text, err := n.HPPCSIMetrics(ctx)
	if err != nil {
		return 0, err
	}
	var total float64
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, name+"{") && !strings.HasPrefix(l, name+" ") {
			continue
		}
		f := strings.Fields(l)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("metric line %q: %w", l, err)
		}
		total += v
	}
	return total, nil
}
