package handlers

import (
	"context"
	"fmt"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools"
	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/fieldrule"
	"github.com/hostpath-provisioner/hpp/internal/pool"
)

// Pure request validation: every function here returns InvalidArgument (or
// nil) and touches nothing, so handlers can run it before taking a lock.

func validateVolumeID(id string) error {
	if id == "" {
		return invalidArg("volume_id: required")
	}
	if err := pool.ValidateID(id); err != nil {
		return invalidArg("volume_id: %v", err)
	}
	return nil
}

// supportedAccessMode reports whether a hostpath directory can honour m, and
// why not. Multi-node modes need a shared pool: otherwise the directory
// exists on one node only, so a second node could never see the same data.
func supportedAccessMode(m csi.VolumeCapability_AccessMode_Mode, shared bool) (bool, string) {
	switch m {
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER:
		return true, ""
	case csi.VolumeCapability_AccessMode_UNKNOWN:
		return false, "access mode is required"
	}
	if shared && isMultiNode(m) {
		return true, ""
	}
	return false, fmt.Sprintf("access mode %s is not supported: a hostpath volume lives on one node (use ReadWriteOnce or ReadWriteOncePod, or a pool with \"shared\": true on storage every node mounts)", m)
}

func isMultiNode(m csi.VolumeCapability_AccessMode_Mode) bool {
	switch m {
	case csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY,
		csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER,
		csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER:
		return true
	}
	return false
}

// checkCapability explains why one capability cannot be served on a pool
// that is shared (or not), or "".
func checkCapability(c *csi.VolumeCapability, shared bool) string {
	if c == nil {
		return "capability is empty"
	}
	if c.GetBlock() != nil {
		return "block access is not supported: hostpath volumes are filesystem volumes (use volumeMode: Filesystem)"
	}
	m := c.GetMount()
	if m == nil {
		return "access type is required (mount)"
	}
	// The fs type is ignored, as upstream's driver ignores it: a volume is a
	// directory on the pool's filesystem, so there is nothing to format.
	// Upstream's csi-provisioner runs with --default-fstype=xfs, so every PV it
	// wrote carries fsType xfs (immutable), and its StorageClasses may name
	// any type; refusing them would leave those volumes unmountable.
	if _, err := parseMountFlags(m.GetMountFlags()); err != nil {
		return err.Error()
	}
	if ok, why := supportedAccessMode(c.GetAccessMode().GetMode(), shared); !ok {
		return why
	}
	return ""
}

func validateCapabilities(caps []*csi.VolumeCapability, shared bool) error {
	if len(caps) == 0 {
		return invalidArg("volume_capabilities: at least one capability is required")
	}
	for i, c := range caps {
		if why := checkCapability(c, shared); why != "" {
			return invalidArg("volume_capabilities[%d]: %s", i, why)
		}
	}
	return nil
}

// Bind mounts honour only per-mount flags; anything else would be silently
// ignored by the kernel, so it is refused instead.
var mountFlagsSupported = map[string]bool{
	"ro": true, "rw": true, "nosuid": true, "nodev": true, "noexec": true,
	"noatime": true, "nodiratime": true, "relatime": true, "strictatime": true,
	"bind": true, "rbind": true, "defaults": true,
}

func parseMountFlags(flags []string) ([]string, error) {
	var out []string
	for _, f := range flags {
		for _, part := range strings.Split(f, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			if !mountFlagsSupported[part] {
				return nil, fmt.Errorf("mount flag %q is not supported for a hostpath bind mount (supported: ro, nosuid, nodev, noexec, noatime, nodiratime, relatime, strictatime)", part)
			}
			out = append(out, part)
		}
	}
	return out, nil
}

// validatePath checks a path kubelet sends (target_path, volume_path):
// fieldrule.AbsPath, the part of the pool-path rule for any directory; a
// trailing '/' is accepted, a ".." element is not.
func validatePath(field, p string) error {
	if _, err := fieldrule.AbsPath(field, p); err != nil {
		return invalidArg("%v", err)
	}
	return nil
}

// wantsThisNode checks CreateVolume's topology for a pool on this node's
// disks (shared pools need none). Only WaitForFirstConsumer is supported:
// then the CO names the node the scheduler picked. A request with
// no topology comes from an Immediate StorageClass (csi-provisioner in
// node-deployment mode sends one after a delay) and would land on whichever
// node asked first, so it is refused with what to change.
func (d *Driver) wantsThisNode(req *csi.TopologyRequirement) error {
	if req == nil || (len(req.GetRequisite()) == 0 && len(req.GetPreferred()) == 0) {
		return invalidArg("accessibility_requirements: missing; hostpath volumes need WaitForFirstConsumer binding " +
			"(set volumeBindingMode: WaitForFirstConsumer on the StorageClass) so the volume is created on the pod's node")
	}
	var named []string
	for _, list := range [][]*csi.Topology{req.GetRequisite(), req.GetPreferred()} {
		for _, t := range list {
			node, ok := t.GetSegments()[contract.TopologyKey]
			if !ok {
				continue
			}
			if node == d.cfg.NodeID {
				return nil
			}
			named = append(named, node)
		}
	}
	return invalidArg("accessibility_requirements: names node(s) %v under %s, not this node %q",
		named, contract.TopologyKey, d.cfg.NodeID)
}

// createRequest is a validated CreateVolume request.
type createRequest struct {
	name   string
	size   int64
	params volumeParams
	pool   pool.Pool // as configured; the request's storagePool rules applied
	// attributes are recorded with the volume (creationAttributes).
	attributes map[string]string
	// source is what the volume is copied from; nil for an empty volume.
	source *pools.Source
}

// validateCreateRequest checks everything in a CreateVolume request that
// needs no disk: the name, the capabilities (against the chosen pool, since
// a shared pool allows multi-node access), the content source, the size and
// the parameters. It returns InvalidArgument naming the field.
func validateCreateRequest(pools *pool.Set, req *csi.CreateVolumeRequest) (createRequest, error) {
	cr := createRequest{name: req.GetName()}
	if cr.name == "" {
		return cr, invalidArg("name: required")
	}
	if err := pool.ValidateID(cr.name); err != nil {
		return cr, invalidArg("name: %v", err)
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return cr, invalidArg("volume_capabilities: at least one capability is required")
	}
	var err error
	if cr.params, err = parseParams(req.GetParameters()); err != nil {
		return cr, err
	}
	if cr.pool, err = pools.Select(cr.params.storagePool); err != nil {
		return cr, invalidArg("%v", err)
	}
	if err := validateCapabilities(req.GetVolumeCapabilities(), cr.pool.Shared); err != nil {
		return cr, err
	}
	if cr.source, err = contentSource(req.GetVolumeContentSource()); err != nil {
		return cr, err
	}
	if cr.size, err = requestedBytes(req.GetCapacityRange()); err != nil {
		return cr, err
	}
	cr.attributes = creationAttributes(req.GetParameters())
	return cr, nil
}

// creationAttributes keeps who asked for the volume (csi-provisioner's
// --extra-create-metadata) in its metadata, for an operator reading the pool.
func creationAttributes(params map[string]string) map[string]string {
	attrs := map[string]string{}
	for _, k := range []string{"csi.storage.k8s.io/pvc/name", "csi.storage.k8s.io/pvc/namespace", "csi.storage.k8s.io/pv/name"} {
		if v, ok := params[k]; ok {
			attrs[k] = v
		}
	}
	return attrs
}

// refuseImmediate refuses claims of an Immediate StorageClass. In
// node-deployment mode csi-provisioner takes such a claim by naming its own
// node, so the request looks like a WaitForFirstConsumer one and only the
// StorageClass tells them apart. Without the lookup (flag off, no claim
// metadata, API unreachable) the request is served: refusing every volume
// because the API server blinked would be worse than the rare Immediate
// claim landing on the node that took it.
func (d *Driver) refuseImmediate(ctx context.Context, params map[string]string) error {
	if d.deps.Binding == nil {
		return nil
	}
	ns, name := params[paramPVCNamespace], params[paramPVCName]
	if ns == "" || name == "" {
		return nil
	}
	class, immediate, err := d.deps.Binding.ImmediateClass(ctx, ns, name)
	if err != nil {
		d.log.Warn("cannot check the claim's binding mode; serving the request", zap.String("claim", ns+"/"+name), zap.Error(err))
		return nil
	}
	if immediate {
		return invalidArg("StorageClass %q of claim %s/%s uses volumeBindingMode Immediate; hostpath volumes need "+
			"volumeBindingMode: WaitForFirstConsumer so the volume is created on the node the scheduler picks for the pod "+
			"(create a StorageClass with WaitForFirstConsumer and recreate the claim)", class, ns, name)
	}
	return nil
}

// contentSource checks the form of a CreateVolume content source and
// returns what the pool runtime copies (nil for none).
func contentSource(src *csi.VolumeContentSource) (*pools.Source, error) {
	if src == nil {
		return nil, nil
	}
	switch {
	case src.GetSnapshot() != nil:
		if src.GetSnapshot().GetSnapshotId() == "" {
			return nil, invalidArg("volume_content_source.snapshot.snapshot_id: required")
		}
		return &pools.Source{Snapshot: true, ID: src.GetSnapshot().GetSnapshotId()}, nil
	case src.GetVolume() != nil:
		if src.GetVolume().GetVolumeId() == "" {
			return nil, invalidArg("volume_content_source.volume.volume_id: required")
		}
		return &pools.Source{ID: src.GetVolume().GetVolumeId()}, nil
	}
	return nil, invalidArg("volume_content_source: names neither a snapshot nor a volume")
}

// requestedBytes is the capacity a volume records and reports: the request,
// never the pool's size (reporting the disk lets the scheduler overcommit).
func requestedBytes(r *csi.CapacityRange) (int64, error) {
	req, limit := r.GetRequiredBytes(), r.GetLimitBytes()
	if req < 0 || limit < 0 {
		return 0, invalidArg("capacity_range: required_bytes %d and limit_bytes %d must not be negative", req, limit)
	}
	if limit > 0 && req > limit {
		return 0, invalidArg("capacity_range: required_bytes %d exceeds limit_bytes %d", req, limit)
	}
	if req > 0 {
		return req, nil
	}
	return limit, nil
}
