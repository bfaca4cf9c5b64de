package pools

import (
	"context"
	"io"
)

// RemoteSources fetches a clone's or a restore's source from the node that
// holds it, as a treecopy stream (treecopy.Encode on that node). The pool
// runtime asks it only for a source this node does not hold; nil (no peer
// transport configured) keeps sources node-local, answered NotFound.
//
// The claim is the new volume's PVC (csi-provisioner's
// --extra-create-metadata parameters): the source's node serves the data
// only when that claim asks it of this node.
type RemoteSources interface {
	Fetch(ctx context.Context, src Source, claim ClaimRef) (*RemoteStream, error)
}

// ClaimRef names the claim a volume is made for.
type ClaimRef struct {
	Namespace, Name string
}

// RemoteStream is a source's data on its way from another node.
type RemoteStream struct {
	io.ReadCloser
	// Node is the node that serves it, for messages and metrics.
	Node string
	// AllocatedBytes is what the source holds (data, not holes), the size
	// of the transfer; 0 when the sender did not say.
	AllocatedBytes int64
}
