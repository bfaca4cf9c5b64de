package pools

import (
	"context"
	"maps"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// contentSourceAttr records in a volume's attributes what it was made
// from ("snapshot:<id>" or "volume:<id>"), so that a retried CreateVolume
// is told apart from a different request with the same name.
const contentSourceAttr = "hpp.kubevirt.io/content-source"

// Source is what a clone or restore copies: a snapshot or a volume, by id.
type Source struct {
	Snapshot bool
	ID       string
}

// key is what contentSourceAttr records for s ("" for none).
func (s *Source) key() string {
	switch {
	case s == nil:
		return ""
	case s.Snapshot:
		return "snapshot:" + s.ID
	}
	return "volume:" + s.ID
}

// content is a new volume's resolved source: none (key ""), a directory
// of this node (a snapshot's data or a volume) with its size and the lock
// that keeps it from being deleted meanwhile, or a source on another node
// (remote), which a copy job fetches (makeremote.go).
type content struct {
	key     string
	dir     string
	size    int64
	remote  bool
	release func()
}

// resolve finds what fills c's volume, and returns c's Spec made for it:
// the source recorded in its attributes (in a copy of the request's map,
// which a copy job must not share) and, when the request gave no size, the
// source's (a source on another node has none before the copy).
//
// Sources are node-local like volumes: one this node does not hold is
// fetched from the node that does when the peer transport is configured
// (Deps.Remote), for a named claim; without it, it is NotFound, the CSI
// spec's code for a missing source, with a message saying where a clone
// is made. A source larger than the request is TooLarge.
func (rt *Runtime) resolve(ctx context.Context, c Creation) (content, dirvol.Spec, error) {
	spec := c.Spec
	if c.Source == nil {
		return content{release: func() {}}, spec, nil
	}
	cs, err := rt.onThisNode(ctx, *c.Source, c.ID)
	switch {
	case isNotFound(err) && rt.deps.Remote != nil:
		if c.Claim.Namespace == "" || c.Claim.Name == "" {
			return cs, spec, refuse(Invalid, "volume_content_source: %s is not on node %s, and copying it from another node needs the claim's "+
				"parameters csi.storage.k8s.io/pvc/namespace and csi.storage.k8s.io/pvc/name, which the request lacks "+
				"(csi-provisioner sets them with --extra-create-metadata)", cs.key, rt.cfg.NodeID)
		}
		cs = content{key: cs.key, remote: true, release: func() {}}
	case err != nil:
		return cs, spec, err
	case spec.CapacityBytes > 0 && cs.size > spec.CapacityBytes:
		cs.release()
		return cs, spec, refuse(TooLarge, "volume_content_source: %s is %d bytes, more than the requested %d bytes", cs.key, cs.size, spec.CapacityBytes)
	}
	spec.Attributes = maps.Clone(spec.Attributes)
	if spec.Attributes == nil {
		spec.Attributes = map[string]string{}
	}
	spec.Attributes[contentSourceAttr] = cs.key
	if spec.CapacityBytes == 0 {
		spec.CapacityBytes = cs.size
	}
	return cs, spec, nil
}

// onThisNode finds src among this node's snapshots or volumes, and holds
// its lock (released by the content's release) so that it is not deleted
// while it is copied.
func (rt *Runtime) onThisNode(ctx context.Context, src Source, name string) (content, error) {
	cs := content{key: src.key()}
	if !src.Snapshot && src.ID == name {
		return cs, refuse(Invalid, "volume_content_source.volume.volume_id: %q is the volume being created", src.ID)
	}
	release, err := rt.lockSource(src)
	if err != nil {
		return cs, err
	}
	if src.Snapshot {
		_, snap, err := rt.findSnapshot(ctx, src.ID)
		if err != nil {
			release()
			if isNotFound(err) {
				return cs, refuse(NotFound, "volume_content_source: snapshot %q does not exist on node %s (a volume is restored on the node that holds its snapshot)", src.ID, rt.cfg.NodeID)
			}
			return cs, err
		}
		cs.dir, cs.size = snap.Data, snap.SizeBytes
	} else {
		l, err := rt.Find(ctx, src.ID)
		if err != nil {
			release()
			if isNotFound(err) || KindOf(err) == Invalid {
				return cs, refuse(NotFound, "volume_content_source: volume %q does not exist on node %s (a clone is made on the node that holds its source)", src.ID, rt.cfg.NodeID)
			}
			return cs, err
		}
		cs.dir, cs.size = l.Path, l.CapacityBytes
	}
	cs.release = release
	return cs, nil
}
