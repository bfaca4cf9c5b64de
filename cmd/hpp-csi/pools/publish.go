package pools

import (
	"errors"
	"fmt"
	"io/fs"
)

// Publication is where and how a volume is bind mounted for a pod.
type Publication struct {
	Target   string
	ReadOnly bool
	// SingleWriter refuses a second target (ReadWriteOncePod).
	SingleWriter bool
	// Flags are per-mount flags, already validated.
	Flags []string
}

// Publish mounts vol at the target unless that exact volume is already
// there. A read-write publish first gives the volume a new write
// generation (clonecache.go). A different volume at the target is refused, never silently
// replaced. The caller holds the volume's lock.
func (rt *Runtime) Publish(vol Volume, pub Publication) error {
	target := pub.Target
	mounted, err := rt.deps.Mounter.IsMountPoint(target)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return failed("checking target_path "+target, err)
	}
	if mounted {
		same, err := rt.deps.FS.SameFile(vol.Path, target)
		if err != nil {
			return failed("comparing target_path with the volume", err)
		}
		if !same {
			return refuse(Exists, "target_path %s already has another volume mounted (not %s); unpublish it first", target, vol.Path)
		}
		return nil
	}
	if pub.SingleWriter {
		if err := rt.refuseSecondWriter(vol, target); err != nil {
			return err
		}
	}
	if err := rt.deps.FS.MkdirAll(target, 0o750); err != nil {
		return failed("creating target_path", err)
	}
	if !pub.ReadOnly {
		// Before the mount: from now on the volume may change, and no
		// node's clone cache may serve the copy it has (clonecache.go).
		if err := rt.bumpWriteGeneration(vol); err != nil {
			return err
		}
	}
	if err := rt.deps.Mounter.BindMount(vol.Path, target, pub.ReadOnly, pub.Flags); err != nil {
		return failed(fmt.Sprintf("bind mounting %s at %s", vol.Path, target), err)
	}
	return nil
}

// refuseSecondWriter keeps a single-writer volume (ReadWriteOncePod) that
// is already published at another target from being published again.
func (rt *Runtime) refuseSecondWriter(vol Volume, target string) error {
	targets, err := rt.deps.Mounter.BindTargets(vol.Path)
	if err != nil {
		return failed("listing where the volume is mounted", err)
	}
	for _, t := range targets {
		if t != target {
			return refuse(Precondition,
				"volume %q has access mode SINGLE_NODE_SINGLE_WRITER and is already published at %s", vol.ID, t)
		}
	}
	return nil
}

// Unpublish unmounts target and removes the (empty) directory. It never
// removes data: whatever is in a target that is not a mount point is kept.
func (rt *Runtime) Unpublish(target string) error {
	// A target may carry more than one mount (a retried publish on an old
	// kernel); unmount until it is a plain directory.
	for range 8 {
		mounted, err := rt.deps.Mounter.IsMountPoint(target)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return failed("checking target_path "+target, err)
		}
		if !mounted {
			break
		}
		if err := rt.deps.Mounter.Unmount(target); err != nil {
			return failed("unmounting "+target, err)
		}
	}
	// Remove refuses a non-empty directory: whatever is in a target that is
	// not a mount point is someone's data, and it is kept.
	if err := rt.deps.FS.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return failed("removing target_path "+target+" (left in place: it is not a mount point and not empty)", err)
	}
	return nil
}

// TargetProblem reports a publish target that exists but is not mounted:
// the pod then writes to the node's disk instead of the volume.
func (rt *Runtime) TargetProblem(id, target string) (Problem, bool) {
	if exists, _ := rt.deps.FS.Exists(target); !exists {
		return Problem{}, false
	}
	if mounted, err := rt.deps.Mounter.IsMountPoint(target); err != nil || mounted {
		return Problem{}, false
	}
	return Problem{Unreachable: true, Reason: ReasonTargetNotMounted, Message: fmt.Sprintf(
		"volume %q: %s is not mounted; the pod writes to the node's disk instead of the volume", id, target)}, true
}
