package selinux

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	opselinux "github.com/opencontainers/selinux/go-selinux"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

const xattrName = "security.selinux"

func lget(t *testing.T, p string) string {
	t.Helper()
	buf := make([]byte, 256)
	n, err := unix.Lgetxattr(p, xattrName, buf)
	if err != nil {
		t.Fatalf("lgetxattr %s: %v", p, err)
	}
	return strings.TrimSuffix(string(buf[:n]), "\x00")
}

// TestNodeRealXattrs runs the real store against real security.selinux
// xattrs. A kernel without SELinux still stores them on ext4/XFS for root,
// which is enough to prove what is written where, links included.
func TestNodeRealXattrs(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.MissingPrerequisite(t, "needs root to write security.* xattrs (euid %d)", os.Geteuid())
	}
	vol, outside := volumeTree(t)
	if err := unix.Lsetxattr(outside, xattrName, []byte("system_u:object_r:etc_t:s0"), 0); err != nil {
		testutil.MissingPrerequisite(t, "the kernel refuses %s xattrs on %s: %v", xattrName, filepath.Dir(vol), err)
	}
	if opselinux.GetEnabled() {
		t.Skipf("SELinux is enabled: arbitrary test labels would be checked by policy; TestNodeSELinuxEnabled covers this host")
	}
	before := map[string]string{
		vol:                   "system_u:object_r:var_t:s0",
		vol + "/a":            "unconfined_u:object_r:user_home_t:s0:c1,c2",
		vol + "/sub":          "system_u:object_r:var_t:s0",
		vol + "/sub/b":        "system_u:object_r:tmp_t:s0",
		vol + "/sub/deeper":   "system_u:object_r:var_t:s0",
		vol + "/sub/deeper/c": "system_u:object_r:var_t:s0",
		vol + "/done":         "system_u:object_r:var_t:s0",
		vol + "/link":         "system_u:object_r:var_t:s0",
		vol + "/sub/dangling": "system_u:object_r:var_t:s0",
		// vol/unlabelled has none.
	}
	for p, l := range before {
		if err := unix.Lsetxattr(p, xattrName, []byte(l), 0); err != nil {
			t.Fatalf("lsetxattr %s: %v", p, err)
		}
	}
	l := NewWithStore(zap.NewNop(), true, HostStore{})
	if err := l.Relabel(context.Background(), vol); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		vol:                   "system_u:object_r:container_file_t:s0",
		vol + "/a":            "unconfined_u:object_r:container_file_t:s0:c1,c2",
		vol + "/sub":          "system_u:object_r:container_file_t:s0",
		vol + "/sub/b":        "system_u:object_r:container_file_t:s0",
		vol + "/sub/deeper":   "system_u:object_r:container_file_t:s0",
		vol + "/sub/deeper/c": "system_u:object_r:container_file_t:s0",
		vol + "/done":         "system_u:object_r:container_file_t:s0",
		vol + "/link":         "system_u:object_r:container_file_t:s0",
		vol + "/sub/dangling": "system_u:object_r:container_file_t:s0",
		vol + "/unlabelled":   "system_u:object_r:container_file_t:s0",
		outside:               "system_u:object_r:etc_t:s0",
	}
	for p, w := range want {
		if got := lget(t, p); got != w {
			t.Errorf("%s: label %q, want %q", p, got, w)
		}
	}
}

// TestNodeSELinuxEnabled relabels through New on a host where SELinux is on.
func TestNodeSELinuxEnabled(t *testing.T) {
	if !opselinux.GetEnabled() {
		t.Skipf("SELinux is disabled on this host (no selinuxfs mounted); New returns the no-op labeler, covered by TestNewFollowsHost")
	}
	if os.Geteuid() != 0 {
		testutil.MissingPrerequisite(t, "needs root to relabel files (euid %d)", os.Geteuid())
	}
	vol, outside := volumeTree(t)
	outsideBefore := lget(t, outside)
	before := map[string]string{}
	for _, p := range []string{vol, vol + "/a", vol + "/sub/deeper/c", vol + "/link"} {
		before[p] = lget(t, p)
	}
	if err := New(zap.NewNop()).Relabel(context.Background(), vol); err != nil {
		t.Fatal(err)
	}
	for p, old := range before {
		oc, err := opselinux.NewContext(old)
		if err != nil {
			t.Fatal(err)
		}
		oc["type"] = ContainerFileType
		if got := lget(t, p); got != oc.Get() {
			t.Errorf("%s: label %q, want %q (was %q)", p, got, oc.Get(), old)
		}
	}
	if got := lget(t, outside); got != outsideBefore {
		t.Errorf("link target outside the volume relabelled: %q -> %q", outsideBefore, got)
	}
}
