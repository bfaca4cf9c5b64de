// Package mounternode holds the node tests of hpp-mounter: the real binary
// on real loop devices, real XFS and ext4, real bind mounts found from
// mountinfo. A temporary directory stands for the host root (--hostPath),
// with a kubelet-like tree of mounts in it. Every test needs root and skips,
// with the reason, without it (fails under CI=true).
package mounternode

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hostpath-provisioner/hpp/internal/poolmarker"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
	"github.com/hostpath-provisioner/hpp/test/csitest"
)

// poolTarget is --mountPath: a host path, <pool path>/csi.
const poolTarget = "/var/hpvolumes/fast/csi"

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func binary(t *testing.T) string {
	t.Helper()
	testutil.RequireRoot(t)
	buildOnce.Do(func() { binPath, buildErr = csitest.BuildCommand("hpp-mounter") })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// proc is a running hpp-mounter.
type proc struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan struct{}
	err  error
}

func start(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(binary(t), append([]string{"--log-format", "text", "--health-address", ""}, args...)...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &syncWriter{w: &p.out}, &syncWriter{w: &p.out}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("hpp-mounter %s output:\n%s", strings.Join(args, " "), p.output())
		}
	})
	return p
}

var outMu sync.Mutex

type syncWriter struct{ w *bytes.Buffer }

func (s *syncWriter) Write(b []byte) (int, error) {
	outMu.Lock()
	defer outMu.Unlock()
	return s.w.Write(b)
}

func (p *proc) output() string {
	outMu.Lock()
	defer outMu.Unlock()
	return p.out.String()
}

// wait returns the exit code; the bound only keeps a hung binary from
// stalling the suite.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("hpp-mounter still running after 2 minutes:\n%s", p.output())
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatal(p.err)
	}
	return 0
}

func (p *proc) stop(t *testing.T) int {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	return p.wait(t)
}

// runOnce runs hpp-mounter to the end and returns its exit code and output.
func runOnce(t *testing.T, args ...string) (int, string) {
	t.Helper()
	p := start(t, args...)
	code := p.wait(t)
	return code, p.output()
}

// waitMounted waits until the mounter has mounted and marked the pool (or
// exited), and returns the mount stack at target.
func waitMounted(t *testing.T, p *proc, target string) []csitest.MountEntry {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		m := mountsAt(t, target)
		if len(m) > 0 && poolmarker.Check(target, "") == nil {
			return m
		}
		select {
		case <-p.done:
			t.Fatalf("hpp-mounter exited before mounting %s:\n%s", target, p.output())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not mounted and marked after 2 minutes:\n%s", target, p.output())
		}
	}
}

func mountsAt(t *testing.T, path string) []csitest.MountEntry {
	t.Helper()
	m, err := csitest.MountsAt(path)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// hostRoot is a fresh directory standing for the host's root; cleanup
// unmounts whatever a test left mounted in it, deepest first.
func hostRoot(t *testing.T) string {
	t.Helper()
	testutil.RequireRoot(t)
	root := t.TempDir()
	t.Cleanup(func() { unmountUnder(t, root) })
	return root
}

func unmountUnder(t *testing.T, root string) {
	for {
		all, err := csitest.Mounts()
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		deepest := ""
		for _, e := range all {
			if strings.HasPrefix(e.MountPoint, root+"/") && len(e.MountPoint) > len(deepest) {
				deepest = e.MountPoint
			}
		}
		if deepest == "" {
			return
		}
		if err := unix.Unmount(deepest, unix.MNT_DETACH); err != nil {
			t.Errorf("cleanup: unmount %s: %v", deepest, err)
			return
		}
	}
}

// bind bind-mounts src onto a new directory dst.
func bind(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s on %s: %v", src, dst, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dst, unix.MNT_DETACH) })
}

// loopImage makes a sparse image of size bytes, runs prepare on it (mkfs,
// or nothing for an empty device) and attaches it to a loop device.
func loopImage(t *testing.T, size int64, prepare ...string) (dev, img string) {
	t.Helper()
	testutil.RequireRoot(t)
	for _, tool := range []string{"losetup", "blkid", "mkfs.xfs"} {
		if _, err := exec.LookPath(tool); err != nil {
			testutil.MissingPrerequisite(t, "%s not found (%v); install util-linux and xfsprogs (make deps)", tool, err)
		}
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		testutil.MissingPrerequisite(t, "no loop device support: %v", err)
	}
	img = filepath.Join(t.TempDir(), "disk.img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if len(prepare) > 0 {
		if _, err := exec.LookPath(prepare[0]); err != nil {
			testutil.MissingPrerequisite(t, "%s not found: %v", prepare[0], err)
		}
		if _, err := testutil.Run(context.Background(), prepare[0], append(prepare[1:], img)...); err != nil {
			t.Fatal(err)
		}
	}
	dev, err = testutil.Run(context.Background(), "losetup", "--find", "--show", img)
	if err != nil {
		testutil.MissingPrerequisite(t, "cannot attach a loop device: %v", err)
	}
	t.Cleanup(func() {
		if _, err := testutil.Run(context.Background(), "losetup", "--detach", dev); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return dev, img
}

// blkidType is what blkid reports on dev now ("" when nothing).
func blkidType(t *testing.T, dev string) string {
	t.Helper()
	out, err := exec.Command("blkid", "-p", "-s", "TYPE", "-o", "value", dev).Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 2 {
		return ""
	}
	if err != nil {
		t.Fatalf("blkid %s: %v", dev, err)
	}
	return strings.TrimSpace(string(out))
}
