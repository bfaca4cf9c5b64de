package remote

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/peer"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

func vol(id string) pools.Source  { return pools.Source{ID: id} }
func snap(id string) pools.Source { return pools.Source{Snapshot: true, ID: id} }

// The resolver follows claim -> source claim -> PV -> node affinity ->
// Node address, or the snapshot chain; every broken link is an error
// that names the object and wraps the sentinel the caller maps.
func TestResolver(t *testing.T) {
	r := &Resolver{API: fakeAPI(t), Node: "node-b", Port: "9443"}
	for _, tt := range []struct {
		src      pools.Source
		claim    string
		want     peer.Peer
		err      error
		contains string
	}{
		{vol("pvc-src"), "clone", peer.Peer{Node: "node-a", Addr: "127.0.0.1:9443"}, nil, ""},
		{snap("snap-1"), "restore", peer.Peer{Node: "node-a", Addr: "127.0.0.1:9443"}, nil, ""},
		// The snapshot's volume is gone: the managed-by label tells.
		{snap("snap-2"), "restore-label", peer.Peer{Node: "node-a", Addr: "127.0.0.1:9443"}, nil, ""},
		{snap("snap-3"), "restore-nolabel", peer.Peer{}, peer.ErrSourceNotFound,
			"VolumeSnapshotContent content-3: cannot tell which node holds it: its source volume's PersistentVolume pvc-deleted is gone, and it has no label snapshot.storage.kubernetes.io/managed-by"},
		{snap("snap-4"), "restore-badlabel", peer.Peer{}, peer.ErrSourceNotFound, "its label snapshot.storage.kubernetes.io/managed-by=csi-snapshotter names no node"},
		{snap("snap-1"), "restore-unbound", peer.Peer{}, peer.ErrSourceNotFound, "VolumeSnapshot ns/snap-unbound is not bound"},
		{snap("snap-1"), "restore-nocontent", peer.Peer{}, peer.ErrSourceNotFound, "VolumeSnapshotContent content-missing"},
		{snap("snap-9"), "restore", peer.Peer{}, peer.ErrInvalid, `VolumeSnapshotContent content-1 is snapshot "snap-1", not "snap-9"`},
		{vol("pvc-other"), "clone", peer.Peer{}, peer.ErrInvalid, `PersistentVolume pvc-src is volume "pvc-src", not "pvc-other"`},
		{snap("snap-1"), "clone", peer.Peer{}, peer.ErrInvalid, `its data source PersistentVolumeClaim "src" (group "") is not the snapshot "snap-1"`},
		{vol("pvc-src"), "plain", peer.Peer{}, peer.ErrInvalid, "claim ns/plain names no data source"},
		{vol("pvc-src"), "nosuch", peer.Peer{}, peer.ErrSourceNotFound, "claim ns/nosuch"},
		{vol("pvc-src"), "clone-nosrc", peer.Peer{}, peer.ErrSourceNotFound, "claim ns/nosuch"},
		{vol("pvc-src"), "clone-apidown", peer.Peer{}, peer.ErrUnavailable, "claim ns/apidown"},
		{vol("pvc-src"), "clone-crossns", peer.Peer{}, peer.ErrNotAuthorized, "another namespace (elsewhere)"},
		{vol("pvc-pending"), "clone-pending", peer.Peer{}, peer.ErrSourceNotFound, "source claim ns/pending is not bound"},
		{vol("pvc-shared"), "clone-shared", peer.Peer{}, peer.ErrSourceNotFound, "PersistentVolume pvc-shared has no required node affinity on " + contract.TopologyKey},
		{vol("pvc-split"), "clone-split", peer.Peer{}, peer.ErrSourceNotFound, "PersistentVolume pvc-split: its node affinity on " + contract.TopologyKey + " does not name one node"},
		{vol("pvc-foreign"), "clone-foreign", peer.Peer{}, peer.ErrInvalid, `PersistentVolume pvc-foreign is not a volume of ` + contract.DriverName + ` (driver "other.csi.driver")`},
		{vol("pvc-on-b"), "clone-local", peer.Peer{}, peer.ErrSourceNotFound, "the API places it on this node (node-b), which does not hold it"},
		{vol("pvc-on-ghost"), "clone-ghost", peer.Peer{}, peer.ErrSourceNotFound, "node node-ghost, which holds the source, does not exist"},
		{vol("pvc-on-noaddr"), "clone-noaddr", peer.Peer{}, peer.ErrUnavailable, "node node-noaddr has no address"},
	} {
		got, err := r.Locate(context.Background(), tt.src, pools.ClaimRef{Namespace: ns, Name: tt.claim})
		switch {
		case tt.err == nil && err != nil:
			t.Errorf("%+v for %s: %v", tt.src, tt.claim, err)
		case tt.err == nil && got != tt.want:
			t.Errorf("%+v for %s: %+v, want %+v", tt.src, tt.claim, got, tt.want)
		case tt.err != nil && (!errors.Is(err, tt.err) || !strings.Contains(err.Error(), tt.contains)):
			t.Errorf("%+v for %s: %v\nwant an error wrapping %q that says %q", tt.src, tt.claim, err, tt.err, tt.contains)
		}
	}
	if _, err := r.Locate(context.Background(), vol("pvc-src"), pools.ClaimRef{}); !errors.Is(err, peer.ErrInvalid) || !strings.Contains(err.Error(), "--extra-create-metadata") {
		t.Errorf("no claim: %v", err)
	}
}
