package treecopy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

// BenchmarkStreamVsTar measures the stream form against GNU tar on the
// same tree, between two directories of one tmpfs (memory: the figure is
// what the format and the pipe cost in CPU, not what a disk can take).
// Each iteration copies the tree both ways, in turn first:
//
//	Encode | os.Pipe | Decode   two goroutines, as two nodes run them
//	tar -C src -cf - . | tar -C dst -xf -   two processes, with --sparse,
//	    --xattrs, --acls and --selinux where this tar has them
//
// and it reports each one's MB/s (the tree's data bytes, in 10^6, over
// the wall time of its copies) and stream/tar, which should be 0.8 at
// least. Run it with
//
//	go test -run '^$' -bench StreamVsTar -benchtime 3x ./internal/treecopy/
func BenchmarkStreamVsTar(b *testing.B) {
	tar, create, extract := gnuTar(b)
	base := testutil.TmpfsDir(b, 3<<30)
	noatime(b, base)
	src := filepath.Join(base, "src")
	buildBenchTree(b, src)
	var data int64
	walk(b, src, func(p string) {
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
			data += allocated(b, p)
		}
	})
	data -= allocated(b, filepath.Join(src, "hardlink")) // one inode, two names
	want := capture(b, src)
	b.Logf("tree: %d entries, %.1f MiB of file data; tar %s | tar %s", len(want), float64(data)/(1<<20),
		strings.Join(create, " "), strings.Join(extract, " "))

	copies := []struct {
		name string
		run  func(dst string) error
		took time.Duration
	}{
		{name: "stream", run: func(dst string) error {
			_, _, err := pipeTree(context.Background(), src, dst)
			return err
		}},
		{name: "tar", run: func(dst string) error { return tarPipe(tar, create, extract, src, dst) }},
	}
	for i := range b.N {
		for j := range copies {
			c := &copies[(i+j)%len(copies)]
			dst := filepath.Join(base, "dst-"+c.name)
			if err := os.Mkdir(dst, 0o700); err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			if err := c.run(dst); err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
			c.took += time.Since(start)
			if i == 0 {
				checkBenchCopy(b, c.name, want, dst)
			}
			if err := os.RemoveAll(dst); err != nil {
				b.Fatal(err)
			}
		}
	}
	mbps := func(d time.Duration) float64 { return float64(data) * float64(b.N) / 1e6 / d.Seconds() }
	b.ReportMetric(mbps(copies[0].took), "stream-MB/s")
	b.ReportMetric(mbps(copies[1].took), "tar-MB/s")
	b.ReportMetric(copies[1].took.Seconds()/copies[0].took.Seconds(), "stream/tar")
}

// gnuTar finds GNU tar and the flags that make it keep what the stream
// keeps, as far as this build of it can.
func gnuTar(b *testing.B) (tar string, create, extract []string) {
	tar, err := exec.LookPath("tar")
	if err != nil {
		testutil.MissingPrerequisite(b, "no tar to compare with: %v", err)
	}
	version, _ := exec.Command(tar, "--version").Output()
	if !bytes.Contains(version, []byte("GNU tar")) {
		testutil.MissingPrerequisite(b, "tar is not GNU tar (%q): no --sparse to compare with", firstLine(version))
	}
	help, _ := exec.Command(tar, "--help").Output()
	create = []string{"--sparse", "--numeric-owner"}
	extract = []string{"--numeric-owner", "--preserve-permissions"}
	for _, f := range []string{"--xattrs", "--acls", "--selinux"} {
		if bytes.Contains(help, []byte(f+" ")) {
			create = append(create, f)
			extract = append(extract, f)
		}
	}
	if bytes.Contains(help, []byte("--xattrs-include")) {
		// Extraction restores only user.* unless told otherwise.
		extract = append(extract, "--xattrs-include=*")
	}
	return tar, create, extract
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	return s
}

// tarPipe runs tar -C src -cf - . | tar -C dst -xf -, without a shell.
func tarPipe(tar string, create, extract []string, src, dst string) error {
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	var cerr, xerr bytes.Buffer
	c := exec.Command(tar, append(append([]string{"-C", src, "-cf", "-"}, create...), ".")...)
	c.Stdout, c.Stderr = pw, &cerr
	x := exec.Command(tar, append([]string{"-C", dst, "-xf", "-"}, extract...)...)
	x.Stdin, x.Stderr = pr, &xerr
	if err := c.Start(); err != nil {
		return err
	}
	if err := x.Start(); err != nil {
		_ = c.Process.Kill()
		_ = c.Wait()
		return err
	}
	_ = pw.Close() // the children hold their ends
	_ = pr.Close()
	errC, errX := c.Wait(), x.Wait()
	if errC != nil {
		errC = fmt.Errorf("tar -c: %w: %s", errC, cerr.String())
	}
	if errX != nil {
		errX = fmt.Errorf("tar -x: %w: %s", errX, xerr.String())
	}
	return errors.Join(errC, errX)
}

// checkBenchCopy checks the first copy each way: the stream's is the
// source's tree, atimes included; tar's is logged where it differs (it
// keeps no atime), so that the figures compare copies that did the work.
func checkBenchCopy(b *testing.B, name string, want map[string]entryInfo, dst string) {
	if name == "stream" {
		sameTree(b, want, dst)
		return
	}
	got := capture(b, dst)
	for rel, w := range want {
		g := got[rel]
		g.ino, w.ino, g.atime, w.atime = 0, 0, unix.Timespec{}, unix.Timespec{}
		if g != w {
			b.Logf("tar's copy differs at %s:\n got %+v\nwant %+v", rel, g, w)
		}
	}
}

// buildBenchTree is buildTree's tree (a 1 GiB image with 28 MiB of data
// among it) with bulk beside it: four 64 MiB files and 2,000 small ones
// (1 to 16 KiB) in 20 directories, all of random data; 304 MiB in all.
func buildBenchTree(b *testing.B, root string) {
	buildTree(b, root)
	rng := rand.NewChaCha8([32]byte{'b', 'e', 'n', 'c', 'h'})
	write := func(p string, n int) {
		buf := make([]byte, n)
		_, _ = rng.Read(buf) // never fails
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 4 {
		write(filepath.Join(root, fmt.Sprintf("big-%d", i)), 64<<20)
	}
	for d := range 20 {
		dir := filepath.Join(root, "many", fmt.Sprintf("d%02d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range 100 {
			write(filepath.Join(dir, fmt.Sprintf("f%03d", f)), 1<<10+int(rng.Uint64()%(15<<10)))
		}
	}
}
