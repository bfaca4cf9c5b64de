package remote

import (
	"context"
	"fmt"
	"net"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/kubeapi"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/peer"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// ManagedByLabel is the label snapshot-controller's distributed
// snapshotting (--enable-distributed-snapshotting) sets on a
// VolumeSnapshotContent: the node that took the snapshot.
const ManagedByLabel = "snapshot.storage.kubernetes.io/managed-by"

const (
	claimKind     = "PersistentVolumeClaim"
	snapshotKind  = "VolumeSnapshot"
	snapshotGroup = "snapshot.storage.k8s.io"
)

// Resolver finds the node that holds a clone's source, and its peer
// address, from the API (see the package documentation).
type Resolver struct {
	API *kubeapi.Sources
	// Driver is this driver's name, which the source's PV or content
	// must name (contract.DriverName when empty).
	Driver string
	// Node is this node's name.
	Node string
	// Port is the peer transport's port, the same on every node.
	Port string
}

// Locate returns the peer that holds src, for the claim being created.
func (r *Resolver) Locate(ctx context.Context, src pools.Source, claim pools.ClaimRef) (peer.Peer, error) {
	node, err := r.sourceNode(ctx, src, claim)
	if err != nil {
		return peer.Peer{}, err
	}
	if node == r.Node {
		return peer.Peer{}, fmt.Errorf("%w: %s %q: the API places it on this node (%s), which does not hold it",
			peer.ErrSourceNotFound, kindOf(src), src.ID, node)
	}
	addr, err := r.address(ctx, node)
	if err != nil {
		return peer.Peer{}, err
	}
	return peer.Peer{Node: node, Addr: net.JoinHostPort(addr, r.Port)}, nil
}

func kindOf(src pools.Source) string {
	if src.Snapshot {
		return "snapshot"
	}
	return "volume"
}

func (r *Resolver) driver() string {
	if r.Driver == "" {
		return contract.DriverName
	}
	return r.Driver
}

// apiError classifies an API failure: a missing object is
// ErrSourceNotFound, anything else ErrUnavailable (retry).
func apiError(err error) error {
	if kubeapi.IsNotFound(err) {
		return fmt.Errorf("%w: %w", peer.ErrSourceNotFound, err)
	}
	return fmt.Errorf("%w: reading the API: %w", peer.ErrUnavailable, err)
}

// sourceNode follows the claim's data source to the node of src.
func (r *Resolver) sourceNode(ctx context.Context, src pools.Source, ref pools.ClaimRef) (string, error) {
	if ref.Namespace == "" || ref.Name == "" {
		return "", fmt.Errorf("%w: %s %q is on another node, and the claim being created is not known (csi-provisioner's --extra-create-metadata gives it)",
			peer.ErrInvalid, kindOf(src), src.ID)
	}
	claim, err := r.API.Claim(ctx, ref.Namespace, ref.Name)
	if err != nil {
		return "", apiError(err)
	}
	ds := claim.DataSource
	name := "claim " + ref.Namespace + "/" + ref.Name
	if ds == nil {
		return "", fmt.Errorf("%w: %s names no data source, but %s %q is asked for", peer.ErrInvalid, name, kindOf(src), src.ID)
	}
	if ds.Namespace != "" && ds.Namespace != ref.Namespace {
		return "", fmt.Errorf("%w: %s: a data source in another namespace (%s) is not served across nodes", peer.ErrNotAuthorized, name, ds.Namespace)
	}
	switch {
	case !src.Snapshot && ds.APIGroup == "" && ds.Kind == claimKind:
		return r.claimNode(ctx, src, ref.Namespace, ds.Name)
	case src.Snapshot && ds.APIGroup == snapshotGroup && ds.Kind == snapshotKind:
		return r.snapshotNode(ctx, src, ref.Namespace, ds.Name)
	}
	return "", fmt.Errorf("%w: %s: its data source %s %q (group %q) is not the %s %q asked for",
		peer.ErrInvalid, name, ds.Kind, ds.Name, ds.APIGroup, kindOf(src), src.ID)
}

// claimNode is the node of the volume bound to claim namespace/name.
func (r *Resolver) claimNode(ctx context.Context, src pools.Source, namespace, name string) (string, error) {
	c, err := r.API.Claim(ctx, namespace, name)
	if err != nil {
		return "", apiError(err)
	}
	if c.VolumeName == "" {
		return "", fmt.Errorf("%w: source claim %s/%s is not bound to a PersistentVolume", peer.ErrSourceNotFound, namespace, name)
	}
	pv, err := r.API.Volume(ctx, c.VolumeName)
	if err != nil {
		return "", apiError(err)
	}
	if err := r.checkVolume(pv, src.ID); err != nil {
		return "", fmt.Errorf("source claim %s/%s: %w", namespace, name, err)
	}
	return volumeNode(pv)
}

// checkVolume checks that pv is this driver's volume handle.
func (r *Resolver) checkVolume(pv *kubeapi.Volume, handle string) error {
	if pv.Driver != r.driver() {
		return fmt.Errorf("%w: PersistentVolume %s is not a volume of %s (driver %q)", peer.ErrInvalid, pv.Name, r.driver(), pv.Driver)
	}
	if pv.Handle != handle {
		return fmt.Errorf("%w: PersistentVolume %s is volume %q, not %q as asked", peer.ErrInvalid, pv.Name, pv.Handle, handle)
	}
	return nil
}

// volumeNode is the one node pv's required node affinity names with the
// topology key.
func volumeNode(pv *kubeapi.Volume) (string, error) {
	node := ""
	for _, term := range pv.NodeTerms {
		for _, req := range term {
			if req.Key != contract.TopologyKey {
				continue
			}
			if req.Operator != "In" || len(req.Values) != 1 || (node != "" && node != req.Values[0]) {
				return "", fmt.Errorf("%w: PersistentVolume %s: its node affinity on %s does not name one node (%s %v)",
					peer.ErrSourceNotFound, pv.Name, contract.TopologyKey, req.Operator, req.Values)
			}
			node = req.Values[0]
		}
	}
	if node == "" {
		return "", fmt.Errorf("%w: PersistentVolume %s has no required node affinity on %s: no node is known to hold it",
			peer.ErrSourceNotFound, pv.Name, contract.TopologyKey)
	}
	return node, nil
}

// snapshotNode is the node that holds the snapshot namespace/name.
func (r *Resolver) snapshotNode(ctx context.Context, src pools.Source, namespace, name string) (string, error) {
	vs, err := r.API.Snapshot(ctx, namespace, name)
	if err != nil {
		return "", apiError(err)
	}
	if vs.ContentName == "" {
		return "", fmt.Errorf("%w: VolumeSnapshot %s/%s is not bound to a VolumeSnapshotContent yet", peer.ErrSourceNotFound, namespace, name)
	}
	content, err := r.API.SnapshotContent(ctx, vs.ContentName)
	if err != nil {
		return "", apiError(err)
	}
	if content.Driver != r.driver() {
		return "", fmt.Errorf("%w: VolumeSnapshotContent %s is not a snapshot of %s (driver %q)", peer.ErrInvalid, content.Name, r.driver(), content.Driver)
	}
	if content.Handle != src.ID {
		return "", fmt.Errorf("%w: VolumeSnapshotContent %s is snapshot %q, not %q as asked", peer.ErrInvalid, content.Name, content.Handle, src.ID)
	}
	// The volume the snapshot was taken of: its node holds the snapshot.
	why := "it names no source volume"
	if h := content.SourceVolumeHandle; h != "" {
		pv, err := r.API.Volume(ctx, h)
		switch {
		case kubeapi.IsNotFound(err):
			why = fmt.Sprintf("its source volume's PersistentVolume %s is gone", h)
		case err != nil:
			return "", apiError(err)
		default:
			if err := r.checkVolume(pv, h); err != nil {
				why = err.Error()
			} else if node, err := volumeNode(pv); err != nil {
				why = err.Error()
			} else {
				return node, nil
			}
		}
	}
	node := content.Labels[ManagedByLabel]
	if node == "" {
		return "", fmt.Errorf("%w: VolumeSnapshotContent %s: cannot tell which node holds it: %s, and it has no label %s",
			peer.ErrSourceNotFound, content.Name, why, ManagedByLabel)
	}
	if _, err := r.API.Node(ctx, node); kubeapi.IsNotFound(err) {
		return "", fmt.Errorf("%w: VolumeSnapshotContent %s: cannot tell which node holds it: %s, and its label %s=%s names no node",
			peer.ErrSourceNotFound, content.Name, why, ManagedByLabel, node)
	} else if err != nil {
		return "", apiError(err)
	}
	return node, nil
}

// addressOrder is the preference among a Node's addresses.
var addressOrder = []string{"InternalIP", "InternalDNS", "Hostname", "ExternalIP", "ExternalDNS"}

// address is where node is reached.
func (r *Resolver) address(ctx context.Context, node string) (string, error) {
	n, err := r.API.Node(ctx, node)
	if kubeapi.IsNotFound(err) {
		return "", fmt.Errorf("%w: node %s, which holds the source, does not exist: %w", peer.ErrSourceNotFound, node, err)
	}
	if err != nil {
		return "", fmt.Errorf("%w: node %s: reading its address: %w", peer.ErrUnavailable, node, err)
	}
	for _, t := range addressOrder {
		for _, a := range n.Addresses {
			if a.Type == t && a.Address != "" {
				return a.Address, nil
			}
		}
	}
	return "", fmt.Errorf("%w: node %s has no address in its status", peer.ErrUnavailable, node)
}
