package mounter

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"github.com/moby/sys/mountinfo"
	"go.uber.org/zap"
)

const (
	host   = "/host"
	target = "/var/hpvolumes/fast/csi"
	hostT  = host + target
	dev    = "/dev/data"
	blkid  = "blkid -p -o export " + dev
)

func mnt(point string, major, minor int, root, fstype, source string) *mountinfo.Info {
	return &mountinfo.Info{Mountpoint: point, Major: major, Minor: minor, Root: root, FSType: fstype, Source: source}
}

func newTest(sys *fakeSys, ex *fakeExec) *Mounter {
	if ex == nil {
		ex = &fakeExec{}
	}
	return New(Config{Source: "/source", HostRoot: host, Target: target, Pool: "fast"}, sys, BlkidProber{Exec: ex}, MkfsXFS{Exec: ex}, zap.NewNop())
}

// The per-pod mount and the global mount of one NFS volume are the same
// volume; the first under the host root is used, never the container's own
// view, never another directory of the same filesystem.
func TestEnsureBindsTheKubeletMountFoundByDeviceAndRoot(t *testing.T) {
	sys := newFakeSys(SourceInfo{Kind: KindDirectory},
		mnt("/host", 8, 1, "/", "ext4", "/dev/sda1"),
		mnt("/host/var/lib/kubelet/pods/a/volumes/kubernetes.io~csi/other/mount", 0, 50, "/", "nfs4", "srv:/export"),
		mnt("/host/var/lib/kubelet/plugins/kubernetes.io/csi/nfs/x/globalmount", 0, 51, "/pool", "nfs4", "srv:/export/pool"),
		mnt("/host/var/lib/kubelet/pods/b/volumes/kubernetes.io~csi/pv/mount", 0, 51, "/pool", "nfs4", "srv:/export/pool"),
		mnt("/source", 0, 51, "/pool", "nfs4", "srv:/export/pool"),
	)
	m := newTest(sys, nil)
	mounted, err := m.Ensure(context.Background())
	if err != nil || !mounted {
		t.Fatalf("Ensure = %v, %v", mounted, err)
	}
	want := []string{"mkdir " + hostT, "bind /host/var/lib/kubelet/plugins/kubernetes.io/csi/nfs/x/globalmount " + hostT, "mark " + hostT}
	if !reflect.DeepEqual(sys.calls, want) {
		t.Errorf("calls = %q, want %q", sys.calls, want)
	}
	if err := m.Ready(); err != nil {
		t.Errorf("Ready = %v", err)
	}
	// Idempotent: the second pass only checks the marker.
	sys.calls = nil
	if mounted, err := m.Ensure(context.Background()); err != nil || mounted {
		t.Fatalf("second Ensure = %v, %v", mounted, err)
	}
	if want := []string{"mark " + hostT}; !reflect.DeepEqual(sys.calls, want) {
		t.Errorf("second pass calls = %q, want %q", sys.calls, want)
	}
}

func TestEnsureNeedsTheHostMount(t *testing.T) {
	sys := newFakeSys(SourceInfo{Kind: KindDirectory}, mnt("/source", 8, 1, "/x", "ext4", "/dev/sda1"))
	_, err := newTest(sys, nil).Ensure(context.Background())
	want := "no mount of the pool PVC (device 8:1 root /x) found on the host under /host: is the host root mounted there, with the PVC's node mounts visible?"
	if err == nil || err.Error() != want {
		t.Errorf("Ensure = %v, want %s", err, want)
	}
	sys = newFakeSys(SourceInfo{Kind: KindDirectory})
	_, err = newTest(sys, nil).Ensure(context.Background())
	want = "--storagePoolPath /source is a directory but not a mount point: the pool PVC is not mounted there (check the pod's volumeMounts)"
	if err == nil || err.Error() != want {
		t.Errorf("Ensure = %v, want %s", err, want)
	}
}

func TestEnsureRefusesAForeignMountAndNeverStacks(t *testing.T) {
	sys := newFakeSys(SourceInfo{Kind: KindDirectory},
		mnt("/host/var/lib/kubelet/pods/b/volumes/v", 8, 1, "/pv", "ext4", "/dev/sda1"),
		mnt("/source", 8, 1, "/pv", "ext4", "/dev/sda1"),
		mnt(hostT, 0, 60, "/", "tmpfs", "tmpfs"),
	)
	_, err := newTest(sys, nil).Ensure(context.Background())
	want := "refused: " + target + " is already mounted from " + hostT + " (tmpfs, source tmpfs, device 0:60 root /), not from the pool PVC /source (device 8:1 root /pv); hpp-mounter does not stack mounts: unmount it (hpp-mounter unmount) or fix the pool path"
	if !IsRefused(err) || err.Error() != want {
		t.Errorf("Ensure = %v, want %s", err, want)
	}
	if len(sys.calls) != 0 {
		t.Errorf("touched something: %q", sys.calls)
	}
}

func TestBlockFormatsOnlyWhenCertainlyEmpty(t *testing.T) {
	for _, c := range []struct {
		name    string
		answers map[string][]answer
		refused bool
		wantErr string
		calls   []string
	}{
		{name: "nothing found", answers: map[string][]answer{
			blkid:                {{err: &ExitError{Cmd: blkid, Code: 2}}, {out: "DEVNAME=/dev/data\nTYPE=xfs\n"}},
			"mkfs.xfs -q " + dev: {{}},
		}, calls: []string{blkid, "mkfs.xfs -q " + dev, blkid}},
		{name: "xfs", answers: map[string][]answer{blkid: {{out: "TYPE=xfs\nUUID=1\n"}}}, calls: []string{blkid}},
		{name: "ext4", answers: map[string][]answer{blkid: {{out: "TYPE=ext4\n"}}}, refused: true,
			wantErr: "refused: device /dev/data holds ext4 (blkid: TYPE=ext4), not an XFS filesystem: hpp-mounter formats only devices without any signature and mounts only XFS; the device was left untouched (wipe it by hand if its content is not needed)"},
		{name: "partition table", answers: map[string][]answer{blkid: {{out: "PTTYPE=gpt\nPTUUID=x\n"}}}, refused: true,
			wantErr: "refused: device /dev/data holds a gpt partition table (blkid: PTTYPE=gpt PTUUID=x), not an XFS filesystem: hpp-mounter formats only devices without any signature and mounts only XFS; the device was left untouched (wipe it by hand if its content is not needed)"},
		// Ambivalent signatures (exit 8), an unreadable device (exit 4):
		// errors, never "empty".
		{name: "ambivalent", answers: map[string][]answer{blkid: {{err: &ExitError{Cmd: blkid, Code: 8, Stderr: "ambivalent result"}}}},
			wantErr: "probing /dev/data for signatures: " + blkid + ": exit status 8: ambivalent result"},
		{name: "probe failed", answers: map[string][]answer{blkid: {{err: &ExitError{Cmd: blkid, Code: 4, Stderr: "cannot read"}}}},
			wantErr: "probing /dev/data for signatures: " + blkid + ": exit status 4: cannot read"},
		{name: "exit 0 without tags", answers: map[string][]answer{blkid: {{out: "\n"}}},
			wantErr: "probing /dev/data: blkid reported a signature but printed no tags: \"\\n\""},
	} {
		t.Run(c.name, func(t *testing.T) {
			sys := newFakeSys(SourceInfo{Kind: KindBlock, Major: 7, Minor: 3})
			ex := &fakeExec{answers: c.answers}
			m := New(Config{Source: dev, HostRoot: host, Target: target}, sys, BlkidProber{Exec: ex}, MkfsXFS{Exec: ex}, zap.NewNop())
			_, err := m.Ensure(context.Background())
			if c.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if top := mountAt(sys.mounts, hostT); top == nil || top.FSType != "xfs" {
					t.Errorf("not mounted: %+v", sys.mounts)
				}
			} else {
				if err == nil || err.Error() != c.wantErr || IsRefused(err) != c.refused {
					t.Fatalf("Ensure = %v (refused %v), want %s (refused %v)", err, IsRefused(err), c.wantErr, c.refused)
				}
				if len(sys.mounts) != 0 {
					t.Errorf("mounted anyway: %+v", sys.mounts)
				}
				return
			}
			if !reflect.DeepEqual(ex.calls, c.calls) {
				t.Errorf("commands = %q, want %q", ex.calls, c.calls)
			}
		})
	}
}

func TestReleaseUnmountsOnlyOurMount(t *testing.T) {
	src := SourceInfo{Kind: KindBlock, Major: 7, Minor: 3}
	sys := newFakeSys(src, mnt(hostT, 7, 3, "/", "xfs", dev))
	m := New(Config{Source: dev, HostRoot: host, Target: target}, sys, nil, nil, zap.NewNop())
	if err := m.Release(); err != nil || mountAt(sys.mounts, hostT) != nil {
		t.Fatalf("Release = %v, mounts %+v", err, sys.mounts)
	}
	if err := m.Release(); err != nil {
		t.Errorf("Release when not mounted = %v", err)
	}
	sys = newFakeSys(src, mnt(hostT, 0, 9, "/", "tmpfs", "other"))
	m.sys = sys
	if err := m.Release(); err != nil || mountAt(sys.mounts, hostT) == nil {
		t.Errorf("Release of a foreign mount = %v, mounts %+v; want it left", err, sys.mounts)
	}
	sys = newFakeSys(src, mnt(hostT, 7, 3, "/", "xfs", dev))
	sys.busy = true
	m.sys = sys
	if err := m.Release(); err == nil || err.Error() != "umount "+hostT+": device or resource busy" {
		t.Errorf("Release when busy = %v", err)
	}
}

func TestPeelUnmountsTheWholeStack(t *testing.T) {
	sys := newFakeSys(SourceInfo{},
		mnt(hostT, 0, 1, "/", "tmpfs", "a"), mnt(hostT, 0, 2, "/", "tmpfs", "b"), mnt("/host/other", 0, 3, "/", "tmpfs", "c"))
	if err := Peel(sys, host, target, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	if want := []string{"umount " + hostT, "umount " + hostT}; !reflect.DeepEqual(sys.calls, want) {
		t.Errorf("calls = %q, want %q", sys.calls, want)
	}
	if len(sys.mounts) != 1 {
		t.Errorf("mounts left: %+v", sys.mounts)
	}
	sys.busy = true
	sys.push(mnt(hostT, 0, 1, "/", "tmpfs", "a"))
	if err := Peel(sys, host, target, zap.NewNop()); err == nil {
		t.Error("Peel of a busy mount succeeded")
	}
}

// An enforcing pool's XFS is mounted with prjquota (quota accounting is
// switched on only at mount time); any other pool with no options.
func TestBlockMountOptionsFollowEnforcement(t *testing.T) {
	for _, enforce := range []bool{false, true} {
		sys := newFakeSys(SourceInfo{Kind: KindBlock, Major: 7, Minor: 3})
		ex := &fakeExec{answers: map[string][]answer{blkid: {{out: "TYPE=xfs\nUUID=1\n"}}}}
		m := New(Config{Source: dev, HostRoot: host, Target: target, EnforceSize: enforce}, sys, BlkidProber{Exec: ex}, MkfsXFS{Exec: ex}, zap.NewNop())
		if _, err := m.Ensure(context.Background()); err != nil {
			t.Fatal(err)
		}
		want := "mount " + dev + " " + hostT
		if enforce {
			want += " prjquota"
		}
		if !slices.Contains(sys.calls, want) {
			t.Errorf("enforce %v: calls %q, want %q", enforce, sys.calls, want)
		}
	}
}
