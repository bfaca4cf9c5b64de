package mounter

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/moby/sys/mountinfo"
)

// Identity is what a mount shows of a volume: the filesystem (device
// major:minor from mountinfo, also for NFS and tmpfs, which have anonymous
// devices) and the directory inside it that is mounted. Two mounts with the
// same identity show the same files, whatever their source strings say.
type Identity struct {
	Major, Minor int
	Root         string
}

func (i Identity) String() string {
	return fmt.Sprintf("device %d:%d root %s", i.Major, i.Minor, i.Root)
}

func identityOf(m *mountinfo.Info) Identity {
	return Identity{Major: m.Major, Minor: m.Minor, Root: m.Root}
}

// describe names a mount for messages: where it is, what it says it is.
func describe(m *mountinfo.Info) string {
	return fmt.Sprintf("%s (%s, source %s, %s)", m.Mountpoint, m.FSType, m.Source, identityOf(m))
}

// mountAt returns the mount at path: the top of the stack when several are
// mounted there (the one no other mount at path sits on), or nil.
func mountAt(mounts []*mountinfo.Info, path string) *mountinfo.Info {
	var at []*mountinfo.Info
	for _, m := range mounts {
		if m.Mountpoint == path {
			at = append(at, m)
		}
	}
	for _, m := range at {
		covered := false
		for _, o := range at {
			if o.Parent == m.ID {
				covered = true
				break
			}
		}
		if !covered {
			return m
		}
	}
	return nil
}

// hostMountOf finds the host's mount of the volume with identity id: a
// mount under hostRoot with the same device and root, other than the
// excluded mount points (the container's own view of the PVC and the pool
// target). The kubelet mounts one volume twice for some drivers (a global
// mount and a per-pod bind of it: CSI NFS, CephFS); both show the same
// files, so the first in mountinfo order is as good as any.
func hostMountOf(mounts []*mountinfo.Info, id Identity, hostRoot string, exclude ...string) (*mountinfo.Info, error) {
	for _, m := range mounts {
		if identityOf(m) != id || !under(m.Mountpoint, hostRoot) || contains(exclude, m.Mountpoint) {
			continue
		}
		return m, nil
	}
	return nil, fmt.Errorf("no mount of the pool PVC (%s) found on the host under %s: is the host root mounted there, with the PVC's node mounts visible?", id, hostRoot)
}

// under reports whether p is root or inside it.
func under(p, root string) bool {
	if root == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == root || strings.HasPrefix(p, root+"/")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// hostJoin is path p of the host as seen in the container.
func hostJoin(hostRoot, p string) string {
	return filepath.Join(hostRoot, p)
}
