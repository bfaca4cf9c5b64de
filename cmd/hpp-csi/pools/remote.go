package pools

import (
	"context"
	"errors"
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
//
// The contract for an implementation:
//
//   - Fetch and the stream's Read stop when ctx is canceled (Read returns
//     an error): DeleteVolume of a volume being copied cancels the copy and
//     waits for it, holding the volume's lock. Close is called once, after
//     the last Read, never concurrently with it.
//   - A failure the runtime should tell apart, from Fetch or from Read,
//     matches (errors.Is) one of ErrSourceNotFound, ErrSourceUnavailable,
//     ErrNotAuthorized or ErrSourceInvalid; wrap with %w, or give the
//     transport's error type an Is method. Any other error is Internal.
//   - The error's message reaches the CO (kubectl describe pvc) after
//     `volume "<new id>": copying volume:<id> from node <node>: ` (a Read
//     error) or `volume "<new id>": fetching volume:<id> from the node that
//     holds it: ` (a Fetch error): it should say the reason, and a Fetch
//     error should name the node it asked, which the runtime does not know.
//   - A stream that delivers nothing for Config.CopyStallTimeout is
//     canceled and ends Unavailable; the transport need not time out reads
//     itself, only notice a broken connection.
//   - cached is the generation of src this node's clone cache holds (""
//     for none). When the source's node says src is still at that
//     generation, Fetch sends no data: it answers a RemoteStream with
//     NotModified set and no ReadCloser (clonecache.go). Otherwise the
//     stream's Generation is src's generation as its node opened it
//     (GenerationLive, or "" when unknown: then the copy is not cached).
type RemoteSources interface {
	Fetch(ctx context.Context, src Source, claim ClaimRef, cached string) (*RemoteStream, error)
}

// What a RemoteSources implementation's errors match, and the Kind (the
// gRPC code, through the handlers) each becomes.
var (
	// ErrSourceNotFound: no node holds the source (or its node says it has
	// no such volume or snapshot). NotFound, as for a local source.
	ErrSourceNotFound = errors.New("the source does not exist")
	// ErrSourceUnavailable: the source's node cannot be reached or broke
	// off the stream. Unavailable: csi-provisioner retries, and the retry
	// starts the copy again.
	ErrSourceUnavailable = errors.New("the source's node is unavailable")
	// ErrNotAuthorized: the source's node refused this node or the claim
	// (a peer certificate it does not trust, a claim it may not serve).
	// Denied (PermissionDenied): a final answer, retrying the same request
	// cannot succeed until the cluster's configuration changes, and
	// FailedPrecondition would say this node's state is at fault.
	ErrNotAuthorized = errors.New("the source's node did not authorize the copy")
	// ErrSourceInvalid: the source's node refused the request as
	// malformed. Invalid (InvalidArgument).
	ErrSourceInvalid = errors.New("the source's node refused the request as invalid")
)

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
	// Generation is the source's generation (clonecache.go) as its node
	// opened it; "" when unknown.
	Generation string
	// NotModified: the source is still at the generation Fetch was given
	// as cached; there is no data to read (ReadCloser is nil).
	NotModified bool
}

// remoteFailed gives a failed cross-node copy its Kind by the contract
// above; a full pool is NoRoom as for a local copy.
func remoteFailed(what string, err error) error {
	var decided *Error
	if errors.As(err, &decided) {
		return err
	}
	var kind Kind
	switch {
	case errors.Is(err, ErrSourceNotFound):
		kind = NotFound
	case errors.Is(err, ErrSourceUnavailable):
		kind = Unavailable
	case errors.Is(err, ErrNotAuthorized):
		kind = Denied
	case errors.Is(err, ErrSourceInvalid):
		kind = Invalid
	case errors.Is(err, context.Canceled):
		kind = Canceled
	default:
		return copyFailed(what, err)
	}
	return refuse(kind, "%s: %v", what, err)
}
