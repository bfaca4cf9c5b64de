package testutil

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestRunReturnsStdout(t *testing.T) {
	out, err := Run(context.Background(), "sh", "-c", "echo '  hello  '")
	if err != nil || out != "hello" {
		t.Errorf("run = %q, %v; want hello", out, err)
	}
}

func TestRunErrorCarriesStderr(t *testing.T) {
	_, err := Run(context.Background(), "sh", "-c", "echo out; echo oops >&2; exit 3")
	want := "sh -c echo out; echo oops >&2; exit 3: exit status 3: oops"
	if err == nil || err.Error() != want {
		t.Errorf("run = %v, want %s", err, want)
	}
}

func TestRunStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, "sleep", "60"); err == nil {
		t.Error("run with a cancelled context succeeded")
	}
}

// mountOf returns the source and filesystem type of the mount at dir, from
// mountinfo ("" if dir is not a mount point).
func mountOf(t *testing.T, dir string) (source, fstype string) {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if ok && len(fields) >= 5 && len(tail) >= 2 && fields[4] == dir {
			source, fstype = tail[1], tail[0]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return source, fstype
}

func TestTmpfsDir(t *testing.T) {
	RequireRoot(t)
	var dir string
	t.Run("mounted", func(t *testing.T) {
		dir = TmpfsDir(t, 64<<20)
		if _, fstype := mountOf(t, dir); fstype != "tmpfs" {
			t.Fatalf("%s: filesystem %q, want tmpfs", dir, fstype)
		}
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		if size := int64(st.Blocks) * st.Bsize; size != 64<<20 {
			t.Errorf("size %d, want %d", size, 64<<20)
		}
		if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	if src, _ := mountOf(t, dir); src != "" {
		t.Errorf("%s still mounted (%s) after the test ended", dir, src)
	}
}

func TestLoopXFS(t *testing.T) {
	RequireRoot(t)
	var dir, dev string
	t.Run("mounted", func(t *testing.T) {
		// Smaller than mkfs.xfs allows: rounded up.
		dir = LoopXFS(t, 10<<20)
		var fstype string
		dev, fstype = mountOf(t, dir)
		if fstype != "xfs" || !strings.HasPrefix(dev, "/dev/loop") {
			t.Fatalf("%s: %q on %q, want xfs on a loop device", dir, fstype, dev)
		}
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		if size := int64(st.Blocks) * st.Bsize; size < MinXFSBytes/2 || size > MinXFSBytes {
			t.Errorf("size %d, want between %d and %d (10 MiB rounded up to mkfs.xfs's minimum, less the log)", size, MinXFSBytes/2, MinXFSBytes)
		}
		if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	requireTornDown(t, dir, dev)
}

func requireTornDown(t *testing.T, dir, dev string) {
	t.Helper()
	if src, _ := mountOf(t, dir); src != "" {
		t.Errorf("%s still mounted (%s) after the test ended", dir, src)
	}
	backing := filepath.Join("/sys/block", filepath.Base(dev), "loop", "backing_file")
	if data, err := os.ReadFile(backing); err == nil {
		t.Errorf("%s still attached to %s after the test ended", dev, strings.TrimSpace(string(data)))
	}
}

const envFailChild = "HPP_TESTUTIL_FAIL_CHILD"

// A test that fails right after LoopXFS still unmounts and detaches: run
// such a test in a child process and look at what it left.
func TestLoopXFSCleanupAfterFailure(t *testing.T) {
	if os.Getenv(envFailChild) != "" {
		dir := LoopXFS(t, MinXFSBytes)
		dev, _ := mountOf(t, dir)
		t.Logf("MOUNTED %s %s", dir, dev)
		t.Fatal("deliberate failure")
	}
	RequireRoot(t)
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestLoopXFSCleanupAfterFailure$", "-test.v")
	cmd.Env = append(os.Environ(), envFailChild+"=1")
	out, err := cmd.CombinedOutput()
	if strings.Contains(string(out), "--- SKIP") {
		MissingPrerequisite(t, "child skipped: %s", out)
	}
	if err == nil || !strings.Contains(string(out), "deliberate failure") {
		t.Fatalf("child did not fail as planned (%v): %s", err, out)
	}
	_, after, ok := strings.Cut(string(out), "MOUNTED ")
	fields := strings.Fields(after)
	if !ok || len(fields) < 2 {
		t.Fatalf("child did not report its mount: %s", out)
	}
	requireTornDown(t, fields[0], fields[1])
}
