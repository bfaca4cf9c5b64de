// Package peer is the transport of cross-node clones: hpp-csi on the node
// that holds a clone's source (a volume, or a snapshot) streams the
// source's tree to hpp-csi on the node that creates the clone. The stream's
// format is internal/treecopy's; this package only moves bytes, and decides
// who may ask for them.
//
// # Protocol
//
// One request, over HTTPS (HTTP/2 when both ends offer it, as net/http
// does) with mutual TLS, TLS 1.3 only:
//
//	GET /v1/sources/{kind}/{id}?namespace=N&claim=C
//
// kind is "volume" or "snapshot", id the volume or snapshot id (the PV's
// spec.csi.volumeHandle, the content's status.snapshotHandle). N and C are
// the namespace and name of the claim being created, as csi-provisioner
// passes them in CreateVolume's parameters csi.storage.k8s.io/pvc/namespace
// and csi.storage.k8s.io/pvc/name (--extra-create-metadata). The answer is
// 200 with the stream as application/octet-stream (with the header
// Hpp-Allocated-Bytes, the bytes the tree holds, when the source tells
// it), or:
//
//   - 400: a malformed request; the body names the field (kind, id,
//     namespace, claim).
//   - 403: the requester may not read this source; the body gives the
//     reason. A claim that does not exist is 403 too, not 404: no claim
//     authorizes the read, and 404 is kept for "authorized, but this node
//     does not hold the source" (a caller that asked the wrong node). The
//     reason is given (it ends up in the new claim's events, where the
//     user needs it); it tells a node nothing it cannot GET itself, since
//     hpp-csi's service account reads claims, PVs and snapshots anyway.
//   - 404: authorized, but the source is not on this node.
//   - 503: authorization could not be decided (the API server did not
//     answer); the caller retries.
//
// # Generations: sending nothing for an unchanged source
//
// A requester that keeps copies of sources (the pool's clone cache,
// cmd/hpp-csi/pools/clonecache.go) names the generation of the copy it
// holds in the request header Hpp-Cached-Generation (letters, digits, '.',
// '_' and '-', at most 128 bytes; else 400 naming the header). After the
// same authorization as the data (a refused request learns nothing, not
// even the generation), a Source that implements Generations is asked the
// source's generation now, without opening it; when it equals the named
// one the answer is 304 Not Modified with no body, and the requester
// fills the new volume from its copy. Otherwise the answer is the 200 and
// its stream, as without the header.
//
// Every 200 and 304 carries Hpp-Generation when the Source knows it (its
// reader implements Generationed): the source's generation as it was
// opened, read under the lock that is held while it streams. A generation
// is a token that changes whenever the source may have changed: for a
// snapshot its creation time (snapshots never change), for a volume the
// write generation its record carries, replaced before every read-write
// publish. "live" (GenerationLive) is the answer for a volume published
// now: it may be changing while it is read, is never answered 304, and
// must not be kept. No header (unknown: a volume without a record) must
// not be kept either. One request either way: the cheap question and the
// data are the same GET, so an unchanged source costs one round trip and
// the authorization, and a changed one nothing more than before.
//
// Nothing of the source is read before the request is authorized: the
// Source is not even opened. Every refusal is logged (warn, "peer request
// refused") with the requesting node, the claim, the source and the reason;
// TLS handshakes that fail (no certificate, another CA) are logged by the
// HTTP server's error log, with the remote address.
//
// A stream that fails after the 200 (the source's reader returns an
// error) is aborted (HTTP/2 RST_STREAM, or the connection closed), so the
// client's read fails instead of seeing a clean, short end.
//
// # Metrics
//
// With Server.Metrics set (hpp-csi registers them beside the driver's):
// hpp_peer_sent_bytes_total{kind} counts the response bodies' bytes as
// they are written (an aborted stream's too), and
// hpp_peer_requests_total{result} every answer: served (a whole stream),
// not_modified (304: nothing sent), refused (400, 403, an unknown
// endpoint), not_found (404), unavailable (503), failed (500, or a stream
// aborted after its 200). The receiver's side is the pool runtime's
// hpp_pool_remote_copy_received_bytes_total.
//
// # Identity
//
// Every node has one certificate, signed by a CA dedicated to this
// transport (the operator will issue them; the CA must sign nothing but
// node certificates, since a certificate it signed is a node's word). The
// certificate names its node by exactly one DNS subject alternative name,
// the node's name as in the Node object (and in the selected-node
// annotation); the common name is ignored (Go itself ignores it for host
// names). It carries both extended key usages, serverAuth and clientAuth:
// the same certificate serves and dials.
//
//   - The server requires and verifies a client certificate against the CA
//     (tls.RequireAndVerifyClientCert) and takes the requesting node from
//     its one DNS name; a verified certificate with none, or several, is
//     refused (403).
//   - The client presents its certificate and verifies the server's against
//     the same CA, for the DNS name of the node it means to reach (the
//     address it dials may be an IP: the name is checked, not the address).
//
// Certificates are read from a directory laid out as a Kubernetes TLS
// Secret mounts it (tls.crt, tls.key, ca.crt). The files are read again at
// each handshake and parsed again when their bytes changed, so a rotated
// Secret is used by the next connection without a restart; an unreadable
// or mismatched set (a rotation half written) keeps the last good one.
//
// # Authorization
//
// The Authorizer decides; NewClaimCheck is the one hpp uses. Node R may
// read source S of kind K for claim N/C only when all of these hold:
//
//   - the claim N/C exists and is not bound yet (csi-provisioner calls
//     CreateVolume only for unbound claims, so a bound one asks for nothing);
//   - its annotation volume.kubernetes.io/selected-node is R. The scheduler
//     writes it for WaitForFirstConsumer claims; for Immediate claims,
//     csi-provisioner with --node-deployment (as the operator deploys it,
//     with --node-deployment-immediate-binding left at its default, true)
//     writes it too, with its own node, before it provisions: the instance
//     that becomes the claim's owner is the one that calls CreateVolume. A
//     claim without the annotation (Immediate binding with that option
//     off, or a provisioner not deployed per node) is refused, saying so:
//     nothing then ties the claim to a node, and the accessibility
//     requirements csi-provisioner sends to CreateVolume are not in the API
//     for the server to check. Follow-up, if such deployments are to be
//     served: a record the provisioning node writes (e.g. a claim
//     annotation) that the server can read;
//   - its spec.dataSourceRef (else spec.dataSource) names, in namespace N
//     (a cross-namespace dataSourceRef is refused: it would need a
//     ReferenceGrant check, a follow-up):
//   - for kind volume, a PersistentVolumeClaim (core group) bound to a PV
//     (the claim's spec.volumeName, and the PV's spec.claimRef naming the
//     claim back, uid included) whose spec.csi.driver is this driver and
//     whose spec.csi.volumeHandle is S;
//   - for kind snapshot, a VolumeSnapshot (snapshot.storage.k8s.io) bound
//     to a VolumeSnapshotContent (its status.boundVolumeSnapshotContentName,
//     and the content's spec.volumeSnapshotRef naming it back, uid
//     included) whose spec.driver is this driver and whose
//     status.snapshotHandle is S.
//
// Anything else is refused. The API access this needs, for hpp-csi's
// service account (GETs only; the operator's RBAC is not changed here):
//
//   - get persistentvolumeclaims (core)
//   - get persistentvolumes (core)
//   - get volumesnapshots (snapshot.storage.k8s.io)
//   - get volumesnapshotcontents (snapshot.storage.k8s.io)
//
// The objects are read through cmd/hpp-csi/kubeapi (net/http GETs decoded
// into small structs): hpp-csi does not link client-go.
package peer
