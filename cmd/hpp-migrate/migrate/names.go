// Package migrate moves legacy hostPath PVs of kubevirt.io/hostpath-provisioner
// onto the CSI driver kubevirt.io.hostpath-provisioner in place: same PV
// name, same claim, same directory on the node. See ../README.md for the
// contract with hpp-csi and the order of API writes.
package migrate

// Names of the compatibility contract (DESIGN.md §1). They are stored in PVs
// that outlive this tool: never change them.
const (
	LegacyProvisioner = "kubevirt.io/hostpath-provisioner"
	CSIDriver         = "kubevirt.io.hostpath-provisioner"
	TopologyKey       = "topology.hostpath.csi/node"

	// Annotations the legacy provisioners (KubeVirt's and hpp-legacy) write.
	AnnProvisionedBy   = "pv.kubernetes.io/provisioned-by"
	AnnIdentity        = "hostPathProvisionerIdentity"
	AnnProvisionOnNode = "kubevirt.io/provisionOnNode"

	// AttrStoragePool names the pool whose legacyPath holds the directory;
	// the same key hpp-csi puts in the volume context of volumes it creates.
	AttrStoragePool = "storagePool"
	// AttrLayout tells hpp-csi where the directory of a volume is. Absent
	// means a volume hpp-csi created (<pool path>/<volume id>).
	AttrLayout = "hostpath.csi/layout"
	// LayoutLegacy: the directory is <pool legacyPath>/<volume handle>.
	LayoutLegacy = "legacy"

	// Annotations hpp-migrate puts on a migrated PV, for people and for
	// resuming: where the volume came from.
	AnnMigratedFrom     = "hostpath.csi/migrated-from"      // the legacy provisioner's name
	AnnMigratedFromPath = "hostpath.csi/migrated-from-path" // the hostPath path of the original
	AnnMigratedFromUID  = "hostpath.csi/migrated-from-uid"  // the UID of the original PV object

	// AnnRestoredFrom marks a PV that `rollback` re-created from a backup.
	AnnRestoredFrom = "hostpath.csi/restored-from-uid"

	// FinalizerPVProtection is kube-controller-manager's PV protection
	// finalizer: it stays on a Bound PV, so a replaced PV would never go.
	FinalizerPVProtection = "kubernetes.io/pv-protection"
)
