// Package contract holds the names of hpp's compatibility contract
// (docs/design.md, the compatibility contract): the strings that are stored in clusters (in PVs,
// StorageClasses, CSINode objects, labels and annotations) or that two
// binaries must agree on. A cluster that ran the KubeVirt hostpath
// provisioner and its operator has them already, and a PV keeps them for
// its whole life: never change a value here.
//
// Every binary and test takes these names from this package;
// TestNoCopies fails when one of them appears in a Go string anywhere else
// (whole or inside a longer one); the manifests tests hold YAML and JSON
// to them.
package contract

// The drivers, as StorageClasses and PVs name them.
const (
	// DriverName is the CSI driver's name (hpp-csi's default --drivername,
	// the CSIDriver object, spec.csi.driver of every CSI PV).
	DriverName = "kubevirt.io.hostpath-provisioner"
	// LegacyProvisionerName is the pre-CSI provisioner's name
	// (StorageClass.provisioner of hpp-legacy and upstream's legacy PVs).
	LegacyProvisionerName = "kubevirt.io/hostpath-provisioner"
	// TopologyKey is the CSI driver's topology key; its value is the node
	// name. It is in the node affinity of every CSI PV.
	TopologyKey = "topology.hostpath.csi/node"
)

// StorageClass parameters and volume context keys.
const (
	// ParamStoragePool names the pool of a StorageClass, and of a volume in
	// its volume context (hpp-csi writes it there; hpp-migrate writes it on
	// the PVs it moves).
	ParamStoragePool = "storagePool"
	// ParamOverlayCSI is set ("true") by the operators on the StorageClass
	// of a shared (ReadWriteMany pvcTemplate) pool.
	ParamOverlayCSI = "overlayCSI"
	// DefaultPool is the pool a StorageClass without ParamStoragePool gets,
	// and the pool a pathConfig CR's directory is served as.
	DefaultPool = "legacy"
	// VolumeContextLayout says where a volume's directory is. Absent means
	// a volume hpp-csi created (<pool path>/<volume id>).
	VolumeContextLayout = "hostpath.csi/layout"
	// LayoutLegacy: the directory is <pool legacyPath>/<volume handle>, a
	// volume the legacy provisioner made and hpp-migrate moved onto the CSI
	// driver in place.
	LayoutLegacy = "legacy"
)

// Annotations of the legacy provisioners (KubeVirt's and hpp-legacy) on
// claims and PVs, so that either provisioner can delete the other's volumes
// and hpp-migrate can find them.
const (
	// AnnProvisionOnNode on a claim picks the node; on a PV it names the
	// node that owns (and alone may delete) the directory.
	AnnProvisionOnNode = "kubevirt.io/provisionOnNode"
	// AnnSelectedNode is set by the scheduler on WaitForFirstConsumer
	// claims.
	AnnSelectedNode = "volume.kubernetes.io/selected-node"
	// AnnIdentity marks a PV as made by the legacy provisioner family; its
	// value is LegacyProvisionerName.
	AnnIdentity = "hostPathProvisionerIdentity"
	// AnnProvisionedBy is Kubernetes' annotation naming a PV's provisioner.
	AnnProvisionedBy = "pv.kubernetes.io/provisioned-by"
)

// Annotations hpp-migrate puts on the PVs it moves or restores: where a
// volume came from, for people and for resuming.
const (
	// AnnMigratedFrom is the legacy provisioner's name.
	AnnMigratedFrom = "hostpath.csi/migrated-from"
	// AnnMigratedFromPath is the hostPath path of the original PV.
	AnnMigratedFromPath = "hostpath.csi/migrated-from-path"
	// AnnMigratedFromUID is the UID of the original PV object.
	AnnMigratedFromUID = "hostpath.csi/migrated-from-uid"
	// AnnRestoredFrom marks a PV that `hpp-migrate rollback` re-created
	// from a backup.
	AnnRestoredFrom = "hostpath.csi/restored-from-uid"
	// AnnRebind is set on a claim the PV controller marked Lost during the
	// replacement: writing it makes the controller look at the claim again.
	// Its value, <pv name>/<pv uid>, differs for every replacement (a patch
	// that changes nothing would not wake the controller).
	AnnRebind = "hostpath.csi/rebound-to"
	// FinalizerMigration holds the old PV while it is marked for deletion,
	// so that the last state the PV controller sees of it (its delete
	// event) is the one hpp-migrate chose: with the claimRef parked.
	// Parking and dropping the finalizers are two updates: when one update
	// empties the finalizers, the API server deletes the object as it was
	// stored before that update, and the delete event carries the old
	// claimRef. A run killed in between leaves it for the next to remove.
	FinalizerMigration = "hostpath.csi/migration"
	// AnnCounterpartOf marks a StorageClass created for a legacy one.
	AnnCounterpartOf = "hostpath.csi/counterpart-of"
)

// hpp's own keys that outlive a process: in PVs, on claims and classes.
const (
	// VolumeContextPoolID records the identity of the pool a volume was
	// created in (the ID in the pool's marker, internal/poolmarker). A node
	// recreated under the same name, or a new disk mounted at the pool's
	// path, has a new identity: publishing a volume of the old one is
	// refused instead of handing the pod an empty directory in place of its
	// data. Volumes without it (made before identities, or by the KubeVirt
	// driver) publish as before.
	VolumeContextPoolID = "hostpath.csi/pool-id"
	// AnnReleaseAfterNodeLoss opts volumes into release after their node is
	// gone, as a claim annotation or a StorageClass parameter of that name
	// (the claim's wins; hpp-csi ignores parameters under hostpath.csi/).
	// Its value is "true" (after the operator's --node-loss-release-delay),
	// a Go duration ("15m", at least the operator's minimum), or "false" (a
	// claim opting out of its class's setting). When hpp releases a claim
	// it copies the effective value onto the PV, so the orphaned PV is
	// known as opted in once its claim is gone.
	AnnReleaseAfterNodeLoss = "hostpath.csi/release-after-node-loss"
	// AnnTakeoverApplied is set by `hpp-migrate takeover` on each object
	// of hpp's install it applies, to a digest of the manifest applied: a
	// resumed or repeated switch applies an object again only when the
	// manifest or the object has changed since, so a switch run on a
	// switched cluster writes nothing.
	AnnTakeoverApplied = "hostpath.csi/takeover-applied"
	// PeerSignerName is the signerName of the CertificateSigningRequests
	// hpp-csi makes for its peer certificate (cross-node clones): the
	// operator approves and signs exactly those, with its peer CA.
	PeerSignerName = "hostpath.csi/peer"
	// PeerCASecret is the Secret (hpp-operator's namespace) holding the
	// peer CA, and PeerCABundle the ConfigMap beside it with the bundle
	// every hpp-csi trusts. Both belong to the operator, not to a CR: they
	// are made when the operator starts and stay when a CR is deleted, so
	// a new CR's node plugins find the CA they were given.
	PeerCASecret = "hpp-peer-ca"
	PeerCABundle = "hpp-peer-ca-bundle"
)

// Labels the operators put on pool objects (claims, mounter Deployments,
// cleanup Jobs); a takeover finds upstream's objects by them.
const (
	// PoolLabel carries a pool's name (shortened as upstream does).
	PoolLabel = "kubevirt.io.hostpath-provisioner/storagePool"
)
