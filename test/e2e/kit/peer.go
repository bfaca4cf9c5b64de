package kit

import (
	"context"
	"net"
	"path/filepath"

	"github.com/hostpath-provisioner/hpp/test/cluster"
)

// AddPeerNode adds a simulated node at ip with its own hpp-csi (a "local"
// pool under the node's directory, snapshots by reflink, the peer
// transport on) and csi-provisioner, and csi-snapshotter when snapshotter
// is set: a node that holds sources other nodes clone across the network.
// More pools (plain directories) are named by pools: a clone's StorageClass
// is its source's (csi-provisioner refuses a clone across classes), so the
// source's node needs the pool of every class cloned from it. The caller
// removes the node (Cluster.RemoveSimulatedNode).
func (e *Env) AddPeerNode(ctx context.Context, name string, ip net.IP, snapshotter *cluster.Snapshotter, pools ...string) (*cluster.Node, error) {
	n, err := e.C.AddSimulatedCSINode(ctx, name, cluster.SimulatedNodeOptions{InternalIP: ip})
	if err != nil {
		return nil, err
	}
	peerArgs, err := e.C.PeerArgs(n, ip)
	if err != nil {
		return n, err
	}
	all := []cluster.Pool{{Name: PoolLocal, Path: filepath.Join(n.Dir(), "pools", PoolLocal), SnapshotProvider: "reflink"}}
	for _, p := range pools {
		all = append(all, cluster.Pool{Name: p, Path: filepath.Join(n.Dir(), "pools", p)})
	}
	if err := n.StartHPPCSI(ctx, cluster.HPPCSIConfig{Binary: e.HPPCSI, Pools: all, DriverArgs: peerArgs}); err != nil {
		return n, err
	}
	if snapshotter != nil {
		if err := n.StartCSISnapshotter(*snapshotter); err != nil {
			return n, err
		}
	}
	return n, nil
}
