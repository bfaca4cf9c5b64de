package remote

import (
	"context"
	"errors"
	"fmt"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/peer"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools"
)

// Fetcher is the pool runtime's RemoteSources: it finds the source's node
// and fetches the source's stream from it.
type Fetcher struct {
	Resolver *Resolver
	Client   *peer.Client
}

var _ pools.RemoteSources = (*Fetcher)(nil)

// Fetch streams src from the node that holds it. Errors wrap the peer
// sentinels (see the package documentation) and name the node once it is
// known.
func (f *Fetcher) Fetch(ctx context.Context, src pools.Source, claim pools.ClaimRef) (*pools.RemoteStream, error) {
	p, err := f.Resolver.Locate(ctx, src, claim)
	if err != nil {
		return nil, err
	}
	kind := peer.KindVolume
	if src.Snapshot {
		kind = peer.KindSnapshot
	}
	rc, err := f.Client.Fetch(ctx, p, kind, src.ID, claim.Namespace, claim.Name)
	if err != nil {
		var fe *peer.FetchError
		if errors.As(err, &fe) {
			return nil, fmt.Errorf("fetching %s %q: %w", kind, src.ID, err) // names the node
		}
		return nil, fmt.Errorf("fetching %s %q from node %s: %w: %w", kind, src.ID, p.Node, peer.ErrUnavailable, err)
	}
	out := &pools.RemoteStream{ReadCloser: rc, Node: p.Node}
	if st, ok := rc.(*peer.Stream); ok {
		out.AllocatedBytes = st.AllocatedBytes
	}
	return out, nil
}
