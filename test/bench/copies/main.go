// Command copies measures hpp-csi's snapshot and clone of a volume, by
// reflink and by copy, on XFS with reflink on a loop device (the
// filesystem hpp-mounter makes of a disk): a 1 GiB single-file volume (a
// VM disk) and a volume of 10,000 small files. It runs the code hpp-csi
// runs for CreateSnapshot (internal/snapshot) and for CreateVolume from a
// volume (internal/dirvol with a treecopy fill), each of them durable
// (syncfs) before it returns. Figures are reported, never asserted. Root.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/snapshot"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
	"github.com/hostpath-provisioner/hpp/internal/treecopy"
)

type result struct {
	Volume  string    `json:"volume"`
	Op      string    `json:"op"`
	Mode    string    `json:"mode"`
	Runs    []float64 `json:"runsSeconds"`
	Median  float64   `json:"medianSeconds"`
	Shared  int64     `json:"reflinkedFiles"`
	Files   int64     `json:"files"`
	BytesMB float64   `json:"megabytes"`
}

func main() {
	rounds := flag.Int("rounds", 3, "runs of each measurement (the median is reported)")
	work := flag.String("workdir", os.TempDir(), "directory for the XFS image (sparse, up to 6 GiB)")
	flag.Parse()
	if os.Geteuid() != 0 {
		fmt.Println("copies benchmark: skipped: needs root for a loop device and mounts")
		return
	}
	ctx := context.Background()
	dir, cleanup, err := mountXFS(ctx, *work)
	if err != nil {
		fmt.Fprintln(os.Stderr, "copies benchmark:", err)
		os.Exit(1)
	}
	defer cleanup()
	results, err := run(ctx, dir, *rounds)
	if err != nil {
		fmt.Fprintln(os.Stderr, "copies benchmark:", err)
		cleanup()
		os.Exit(1) //nolint:gocritic // cleanup ran above
	}
	print(results)
}

// mountXFS makes XFS with reflink on a loop device over a sparse image.
func mountXFS(ctx context.Context, work string) (string, func(), error) {
	base, err := os.MkdirTemp(work, "hpp-bench-copies-")
	if err != nil {
		return "", nil, err
	}
	img := filepath.Join(base, "xfs.img")
	f, err := os.Create(img)
	if err == nil {
		err = f.Truncate(6 << 30)
		_ = f.Close()
	}
	if err != nil {
		return "", nil, err
	}
	// Direct I/O: the filesystem's writes and flushes reach the work
	// disk, not a second page cache (the image itself stays sparse).
	dev, err := testutil.Run(ctx, "losetup", "--find", "--show", "--direct-io=on", img)
	if err != nil {
		return "", nil, err
	}
	dir := filepath.Join(base, "mnt")
	cleanup := func() {
		_ = unix.Unmount(dir, 0)
		_, _ = testutil.Run(context.Background(), "losetup", "--detach", dev)
		_ = os.RemoveAll(base)
	}
	if _, err := testutil.Run(ctx, "mkfs.xfs", "-q", "-f", "-m", "reflink=1", dev); err != nil {
		cleanup()
		return "", nil, err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		cleanup()
		return "", nil, err
	}
	if err := unix.Mount(dev, dir, "xfs", 0, ""); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("mount %s: %w", dev, err)
	}
	return dir, cleanup, nil
}

func run(ctx context.Context, dir string, rounds int) ([]result, error) {
	pool := filepath.Join(dir, "csi")
	store, err := dirvol.Open(pool, dirvol.Options{NodeID: "bench"})
	if err != nil {
		return nil, err
	}
	if _, err := store.Recover(ctx); err != nil {
		return nil, err
	}
	vols := []struct {
		name string
		make func(string) error
	}{{"1GiB-file", oneBigFile}, {"10000-files", manyFiles}}
	var out []result
	for _, v := range vols {
		src, _, err := store.Create(ctx, "pvc-"+v.name, dirvol.Spec{Ownership: dirvol.Ownership{UID: -1, GID: -1}})
		if err != nil {
			return nil, err
		}
		if err := v.make(src.Path); err != nil {
			return nil, fmt.Errorf("fill %s: %w", v.name, err)
		}
		for _, mode := range []treecopy.Mode{treecopy.Reflink, treecopy.Copy} {
			snaps, err := snapshot.Open(filepath.Join(pool, ".hpp-snapshots-"+mode.String()), "bench", mode, nil)
			if err != nil {
				return nil, err
			}
			snapRes := result{Volume: v.name, Op: "snapshot", Mode: mode.String()}
			cloneRes := result{Volume: v.name, Op: "clone", Mode: mode.String()}
			for i := range rounds {
				id := fmt.Sprintf("s-%s-%d", v.name, i)
				took, err := timed(src.Path, func() error {
					_, _, err := snaps.Create(ctx, id, snapshot.Source{VolumeID: src.ID, Dir: src.Path})
					return err
				})
				if err != nil {
					return nil, err
				}
				snapRes.Runs = append(snapRes.Runs, took)
				if err := snaps.Delete(ctx, id); err != nil {
					return nil, err
				}
				var stats treecopy.Stats
				cid := fmt.Sprintf("c-%s-%d", v.name, i)
				took, err = timed(src.Path, func() error {
					fill := func(d string) error {
						var err error
						if stats, err = treecopy.Tree(ctx, src.Path, d, mode); err != nil {
							return err
						}
						return treecopy.Syncfs(d)
					}
					_, _, err := store.Create(ctx, cid, dirvol.Spec{Ownership: dirvol.Ownership{UID: -1, GID: -1}, Fill: fill})
					return err
				})
				if err != nil {
					return nil, err
				}
				cloneRes.Runs = append(cloneRes.Runs, took)
				cloneRes.Shared, cloneRes.Files, cloneRes.BytesMB = stats.Reflinked, stats.Files, float64(stats.Bytes)/(1<<20)
				snapRes.Shared, snapRes.Files, snapRes.BytesMB = stats.Reflinked, stats.Files, float64(stats.Bytes)/(1<<20)
				if err := store.Delete(ctx, cid); err != nil {
					return nil, err
				}
			}
			out = append(out, finish(snapRes), finish(cloneRes))
		}
	}
	return out, nil
}

// timed runs op after making everything written so far durable, so each
// run starts from the same clean page cache, and returns its seconds.
func timed(src string, op func() error) (float64, error) {
	if err := treecopy.Syncfs(src); err != nil {
		return 0, err
	}
	start := time.Now()
	err := op()
	return time.Since(start).Seconds(), err
}

func finish(r result) result {
	s := append([]float64(nil), r.Runs...)
	sort.Float64s(s)
	r.Median = s[len(s)/2]
	return r
}

func oneBigFile(dir string) error {
	f, err := os.Create(filepath.Join(dir, "disk.img"))
	if err != nil {
		return err
	}
	buf := make([]byte, 4<<20)
	for i := range buf {
		buf[i] = byte(i * 31)
	}
	for range 256 {
		if _, err := f.Write(buf); err != nil {
			_ = f.Close()
			return err
		}
	}
	return f.Close()
}

func manyFiles(dir string) error {
	data := []byte(strings.Repeat("hpp", 1365)) // ~4 KiB
	for d := range 100 {
		sub := filepath.Join(dir, fmt.Sprintf("d%03d", d))
		if err := os.Mkdir(sub, 0o755); err != nil {
			return err
		}
		for i := range 100 {
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%03d", i)), data, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

func print(results []result) {
	fmt.Println("==> snapshot and clone of a volume on XFS (reflink=1, loop device), durable before returning")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "volume\top\tmode\tmedian\truns\tfiles\treflinked\tMiB")
	for _, r := range results {
		runs := make([]string, len(r.Runs))
		for i, s := range r.Runs {
			runs[i] = fmt.Sprintf("%.3fs", s)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.3fs\t%s\t%d\t%d\t%.0f\n", r.Volume, r.Op, r.Mode, r.Median, strings.Join(runs, " "), r.Files, r.Shared, r.BytesMB)
	}
	_ = tw.Flush()
	b, _ := json.Marshal(results)
	fmt.Println(string(b))
}
