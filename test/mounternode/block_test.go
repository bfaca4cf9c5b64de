package mounternode

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hostpath-provisioner/hpp/internal/poolmarker"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

// A device without any signature gets XFS and is mounted at the pool path,
// marked; /readyz says ready; SIGTERM unmounts it.
func TestBlockEmptyDeviceGetsXFSAndSIGTERMUnmounts(t *testing.T) {
	dev, _ := loopImage(t, testutil.MinXFSBytes)
	host := hostRoot(t)
	target := filepath.Join(host, poolTarget)
	addr := freeAddr(t)
	p := start(t, "--storagePoolPath", dev, "--mountPath", poolTarget, "--hostPath", host,
		"--pool-name", "fast", "--node-name", "node-a", "--health-address", addr)

	m := waitMounted(t, p, target)
	if len(m) != 1 || m[0].FSType != "xfs" || m[0].Source != dev || m[0].Root != "/" {
		t.Fatalf("mounts at %s = %+v; want one XFS mount of %s", target, m, dev)
	}
	if got := blkidType(t, dev); got != "xfs" {
		t.Errorf("blkid %s = %q, want xfs", dev, got)
	}
	var marker poolmarker.Marker
	data, err := os.ReadFile(filepath.Join(target, poolmarker.Name))
	if err != nil {
		t.Fatal(err)
	}
	// A new filesystem: a new pool identity (a random UUID).
	err = json.Unmarshal(data, &marker)
	id := marker.ID
	marker.ID = ""
	if err != nil || len(id) != 36 || marker != (poolmarker.Marker{Kind: "hpp-pool", Version: 1, Pool: "fast", CreatedBy: "hpp-mounter", Node: "node-a"}) {
		t.Errorf("marker = %s (%v)", data, err)
	}
	if code, body := get(t, "http://"+addr+"/readyz"); code != 200 {
		t.Errorf("/readyz = %d %q with the pool mounted; want 200", code, body)
	}

	if code := p.stop(t); code != 0 {
		t.Errorf("exit code after SIGTERM = %d, want 0", code)
	}
	if m := mountsAt(t, target); len(m) != 0 {
		t.Errorf("still mounted after SIGTERM: %+v", m)
	}
	if !strings.Contains(p.output(), "stopped; pool unmounted") {
		t.Errorf("log does not say the pool was unmounted:\n%s", p.output())
	}
}

// A device that already has XFS is mounted as it is: its files stay.
func TestBlockXFSWithDataIsMountedAsIs(t *testing.T) {
	dev, _ := loopImage(t, testutil.MinXFSBytes, "mkfs.xfs", "-q")
	scratch := t.TempDir()
	if err := unix.Mount(dev, scratch, "xfs", 0, ""); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(scratch, "disk.img"), []byte("vm data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Unmount(scratch, 0); err != nil {
		t.Fatal(err)
	}
	host := hostRoot(t)
	target := filepath.Join(host, poolTarget)
	p := start(t, "--storagePoolPath", dev, "--mountPath", poolTarget, "--hostPath", host)
	waitMounted(t, p, target)
	if data, err := os.ReadFile(filepath.Join(target, "disk.img")); err != nil || string(data) != "vm data" {
		t.Errorf("file on the XFS device after mounting: %q, %v; want \"vm data\"", data, err)
	}
	if strings.Contains(p.output(), "formatting") {
		t.Errorf("an XFS device was formatted:\n%s", p.output())
	}
}

// A restarted mounter adopts the mount it finds (--keep-mount on the way
// out, as in a rolling update): one mount, never two stacked.
func TestKeepMountAndAdopt(t *testing.T) {
	dev, _ := loopImage(t, testutil.MinXFSBytes, "mkfs.xfs", "-q")
	host := hostRoot(t)
	target := filepath.Join(host, poolTarget)
	args := []string{"--storagePoolPath", dev, "--mountPath", poolTarget, "--hostPath", host}
	first := start(t, append(args, "--keep-mount")...)
	waitMounted(t, first, target)
	if code := first.stop(t); code != 0 {
		t.Fatalf("exit code = %d", code)
	}
	if m := mountsAt(t, target); len(m) != 1 {
		t.Fatalf("--keep-mount: mounts at %s = %+v, want the pool still mounted", target, m)
	}
	second := start(t, args...)
	for ; !strings.Contains(second.output(), "pool already mounted from the PVC"); time.Sleep(20 * time.Millisecond) {
		select {
		case <-second.done:
			t.Fatalf("second mounter exited:\n%s", second.output())
		default:
		}
	}
	if m := mountsAt(t, target); len(m) != 1 {
		t.Errorf("after a restart: mounts at %s = %+v, want exactly one", target, m)
	}
	if code := second.stop(t); code != 0 {
		t.Errorf("exit code = %d", code)
	}
	if m := mountsAt(t, target); len(m) != 0 {
		t.Errorf("still mounted after SIGTERM: %+v", m)
	}
}

// ext4 (anything but XFS) is refused and left untouched, byte for byte.
func TestBlockExt4IsRefusedUntouched(t *testing.T) {
	dev, img := loopImage(t, 64<<20, "mkfs.ext4", "-q", "-F")
	before := sha(t, img)
	host := hostRoot(t)
	termLog := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(termLog, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := runOnce(t, "--storagePoolPath", dev, "--mountPath", poolTarget, "--hostPath", host, "--termination-log", termLog)
	if code != 3 {
		t.Fatalf("exit code = %d, want 3 (refused):\n%s", code, out)
	}
	want := fmt.Sprintf("refused: device %s holds ", dev)
	msg, _ := os.ReadFile(termLog)
	for _, s := range []string{out, string(msg)} {
		if !strings.Contains(s, want) || !strings.Contains(s, "TYPE=ext4") || !strings.Contains(s, "not an XFS filesystem") || !strings.Contains(s, "left untouched") {
			t.Errorf("message %q does not say the ext4 device was refused untouched", s)
		}
	}
	if m := mountsAt(t, filepath.Join(host, poolTarget)); len(m) != 0 {
		t.Errorf("mounted anyway: %+v", m)
	}
	if got := blkidType(t, dev); got != "ext4" {
		t.Errorf("blkid = %q, want ext4", got)
	}
	if after := sha(t, img); after != before {
		t.Error("the ext4 device's bytes changed")
	}
}

func sha(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
