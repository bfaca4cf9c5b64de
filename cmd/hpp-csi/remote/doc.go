// Package remote joins the pool runtime to the peer transport
// (cmd/hpp-csi/peer) for cross-node clones: a CreateVolume whose volume or
// snapshot source lives on another node makes the new volume here from a
// stream of the source, sent by the hpp-csi of the node that holds it.
//
// Both ends are here:
//
//   - Source, the serving side: a peer.Source over pools.Runtime. It finds
//     the volume or snapshot (Runtime.OpenSourceDir), holds its lock so it
//     is not deleted while it is read, and encodes its tree with
//     internal/treecopy into a pipe; the lock is released when the stream
//     ends or its reader is closed.
//   - Fetcher, the fetching side: a pools.RemoteSources. It finds the node
//     that holds the source from the API (Resolver) and fetches the stream
//     from that node's peer transport with a peer.Client.
//
// # Finding the source's node
//
// From the claim being created (csi-provisioner's --extra-create-metadata
// parameters): its spec.dataSourceRef, else spec.dataSource, in the
// claim's namespace (a cross-namespace reference is refused, as the
// serving side refuses it):
//
//   - a PersistentVolumeClaim: its spec.volumeName, the PV, whose
//     spec.csi.volumeHandle must be the source's id and spec.csi.driver
//     this driver; the node is the one value of the PV's required node
//     affinity on the topology key (contract.TopologyKey). Every term of
//     the affinity that names the key must name the same one node.
//   - a VolumeSnapshot: its status.boundVolumeSnapshotContentName, the
//     content, whose status.snapshotHandle must be the source's id and
//     spec.driver this driver. A snapshot is kept on the node of the volume
//     it was taken of, so the node is that volume's: the PV named by the
//     content's spec.source.volumeHandle (hpp's volume ids are PV names;
//     the PV's own spec.csi.volumeHandle must match) and its node affinity
//     as above. When that PV is gone (a snapshot outlives its volume) or
//     does not match, the content's label
//     snapshot.storage.kubernetes.io/managed-by is used, which
//     snapshot-controller with --enable-distributed-snapshotting sets to
//     the node that took the snapshot, provided a Node of that name
//     exists (other tools set the label to other values).
//
// The node's address is its Node's status.addresses: the first
// InternalIP, else InternalDNS, Hostname, ExternalIP, ExternalDNS, in this
// order; the port is this node's own --peer-address port (every node
// listens on the same one, as a DaemonSet's pods do).
//
// The API access this needs (GETs only), on top of what the serving side
// needs (claims, PVs, VolumeSnapshots, VolumeSnapshotContents): get nodes.
//
// # Errors
//
// Fetch's errors wrap one of the peer package's sentinels, which the
// caller turns into gRPC codes:
//
//   - peer.ErrSourceNotFound: a link of the chain is missing (the source
//     claim, its PV, the snapshot, its content, not bound yet, no node
//     affinity, no node), the resolved node is this node (the runtime asks
//     only for sources it does not hold), or the source's node answered 404.
//   - peer.ErrInvalid: the claim does not name a data source, names one of
//     another kind, or its source's handle is not the id asked for (the
//     request and the API disagree), or another driver's; or the node
//     found the request malformed (400).
//   - peer.ErrNotAuthorized: a cross-namespace data source, or the source's
//     node refused (403).
//   - peer.ErrUnavailable: the API server did not answer (other than 404),
//     the node has no address, or its peer transport did not answer or
//     failed (5xx).
//
// Each message names the object or the node concerned; those from the
// source's node are *peer.FetchError, which names the node and address.
package remote
