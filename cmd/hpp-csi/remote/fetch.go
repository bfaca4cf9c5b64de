package remote

import (
	"context"
	"errors"
	"fmt"
	"io"

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
//
// With cached set, the source's node is asked to answer "not modified"
// when src is still at that generation (peer.Client.FetchIfChanged): the
// answer then has NotModified set and no stream.
func (f *Fetcher) Fetch(ctx context.Context, src pools.Source, claim pools.ClaimRef, cached string) (*pools.RemoteStream, error) {
	p, err := f.Resolver.Locate(ctx, src, claim)
	if err != nil {
		return nil, forPools(err)
	}
	kind := peer.KindVolume
	if src.Snapshot {
		kind = peer.KindSnapshot
	}
	rc, err := f.Client.FetchIfChanged(ctx, p, kind, src.ID, claim.Namespace, claim.Name, cached)
	if err != nil {
		var fe *peer.FetchError
		if errors.As(err, &fe) {
			return nil, forPools(fmt.Errorf("fetching %s %q: %w", kind, src.ID, err)) // names the node
		}
		return nil, forPools(fmt.Errorf("fetching %s %q from node %s: %w: %w", kind, src.ID, p.Node, peer.ErrUnavailable, err))
	}
	out := &pools.RemoteStream{ReadCloser: brokenIsUnavailable{rc}, Node: p.Node}
	if st, ok := rc.(*peer.Stream); ok {
		out.AllocatedBytes, out.Generation = st.AllocatedBytes, st.Generation
		if st.NotModified {
			_ = st.Close()
			out.ReadCloser, out.NotModified = nil, true
		}
	}
	return out, nil
}

// poolsKinds maps the peer transport's sentinels to the pool runtime's
// (pools/remote.go), which decide the CSI code the user sees.
var poolsKinds = []struct{ peer, pools error }{
	{peer.ErrSourceNotFound, pools.ErrSourceNotFound},
	{peer.ErrNotAuthorized, pools.ErrNotAuthorized},
	{peer.ErrInvalid, pools.ErrSourceInvalid},
	{peer.ErrUnavailable, pools.ErrSourceUnavailable},
}

// forPools keeps err's message and makes it match the pool runtime's
// sentinel of its kind too.
func forPools(err error) error {
	for _, k := range poolsKinds {
		if errors.Is(err, k.peer) {
			return &kindError{err: err, kind: k.pools}
		}
	}
	return err
}

type kindError struct{ err, kind error }

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.err, e.kind} }

// brokenIsUnavailable: a stream that breaks off (the connection cut, the
// sender gone) is a source node that became unavailable: the copy is
// retried.
type brokenIsUnavailable struct{ io.ReadCloser }

func (b brokenIsUnavailable) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) {
		err = &kindError{err: err, kind: pools.ErrSourceUnavailable}
	}
	return n, err
}
