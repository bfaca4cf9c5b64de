package contract

import "testing"

// upstream holds the contract's values as the KubeVirt hostpath provisioner
// and its operator spell them (and as clusters that ran them store them),
// and hpp's own names as clusters that ran hpp store them. This is the one
// place outside contract.go where they are written out.
var upstream = map[string]struct{ got, want string }{
	"DriverName":              {DriverName, "kubevirt.io.hostpath-provisioner"},
	"LegacyProvisionerName":   {LegacyProvisionerName, "kubevirt.io/hostpath-provisioner"},
	"TopologyKey":             {TopologyKey, "topology.hostpath.csi/node"},
	"ParamStoragePool":        {ParamStoragePool, "storagePool"},
	"ParamOverlayCSI":         {ParamOverlayCSI, "overlayCSI"},
	"DefaultPool":             {DefaultPool, "legacy"},
	"VolumeContextLayout":     {VolumeContextLayout, "hostpath.csi/layout"},
	"LayoutLegacy":            {LayoutLegacy, "legacy"},
	"AnnProvisionOnNode":      {AnnProvisionOnNode, "kubevirt.io/provisionOnNode"},
	"AnnSelectedNode":         {AnnSelectedNode, "volume.kubernetes.io/selected-node"},
	"AnnIdentity":             {AnnIdentity, "hostPathProvisionerIdentity"},
	"AnnProvisionedBy":        {AnnProvisionedBy, "pv.kubernetes.io/provisioned-by"},
	"AnnMigratedFrom":         {AnnMigratedFrom, "hostpath.csi/migrated-from"},
	"AnnMigratedFromPath":     {AnnMigratedFromPath, "hostpath.csi/migrated-from-path"},
	"AnnMigratedFromUID":      {AnnMigratedFromUID, "hostpath.csi/migrated-from-uid"},
	"AnnRestoredFrom":         {AnnRestoredFrom, "hostpath.csi/restored-from-uid"},
	"AnnRebind":               {AnnRebind, "hostpath.csi/rebound-to"},
	"FinalizerMigration":      {FinalizerMigration, "hostpath.csi/migration"},
	"AnnCounterpartOf":        {AnnCounterpartOf, "hostpath.csi/counterpart-of"},
	"VolumeContextPoolID":     {VolumeContextPoolID, "hostpath.csi/pool-id"},
	"AnnReleaseAfterNodeLoss": {AnnReleaseAfterNodeLoss, "hostpath.csi/release-after-node-loss"},
	"PoolLabel":               {PoolLabel, "kubevirt.io.hostpath-provisioner/storagePool"},
	"PeerSignerName":          {PeerSignerName, "hostpath.csi/peer"},
	"PeerCASecret":            {PeerCASecret, "hpp-peer-ca"},
	"PeerCABundle":            {PeerCABundle, "hpp-peer-ca-bundle"},
}

func TestUpstreamValues(t *testing.T) {
	for name, v := range upstream {
		if v.got != v.want {
			t.Errorf("contract.%s = %q; upstream's value is %q (stored in clusters: never change it)", name, v.got, v.want)
		}
	}
}
